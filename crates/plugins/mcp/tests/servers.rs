//! The mcp plugin against real MCP servers: the reference servers from npm
//! (`tests/servers`, installed by `.ci/run` with `npm ci`) and `mcp-server-time` from PyPI.
//! Without them the tests say so and pass, unless `AGENTIC_REQUIRE_MCP_SERVERS=1` (as in CI).

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// Integration tests are a separate crate: name the plugins so the linker keeps them.
use agentic_interpreter as _;
// Binary content goes to the user's files, which the fs plugin keeps.
use agentic_plugin_fs as _;
use agentic_plugin_mcp as _;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentic_core::{Runtime, State, ToolContext};
use agentic_plugin_mcp::{McpServers, Status};
use agentic_testing::TimelineRunner;
use serde_json::{Value, json};

mod common;

use common::{EVERYTHING, everything_over_http};

/// Whether the reference servers are installed; panics when CI requires them.
fn servers_installed() -> bool {
    let npm = Path::new(EVERYTHING).exists();
    let python = std::process::Command::new("python3")
        .args(["-c", "import mcp_server_time"])
        .output()
        .is_ok_and(|output| output.status.success());
    if npm && python {
        return true;
    }
    let missing = match (npm, python) {
        (false, false) => {
            "the npm servers (npm ci --prefix crates/plugins/mcp/tests/servers) and mcp-server-time (pip install mcp-server-time)"
        }
        (false, true) => "the npm servers (npm ci --prefix crates/plugins/mcp/tests/servers)",
        _ => "mcp-server-time (pip install mcp-server-time)",
    };
    agentic_testing::Requirement::McpServers.missing(&format!("{missing} are not installed"));
    false
}

#[test]
fn mcp_timelines() {
    if !servers_installed() {
        return;
    }
    // mcp-server-time answers with today's date, weekday and daylight-saving time, which
    // change the offsets: all masked, in the results and in the text the model reads.
    // Binary content is saved here (the timelines' `[fs]` root).
    let files = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../target/mcp-timeline-files");
    let _ = std::fs::remove_dir_all(&files);
    std::fs::create_dir_all(&files).unwrap();
    // Paths the servers print are absolute: the checkout's place is masked, and so is the
    // unique part of a saved file's name.
    let runner = TimelineRunner::new()
        .mask_text(env!("CARGO_MANIFEST_DIR"), "[crate]")
        .mask(r"-[0-9a-f]{8}([.-])", "-[unique]$1")
        .unwrap()
        .mask(
            r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2}",
            "[datetime]",
        )
        .unwrap()
        .mask(r#""day_of_week": ?"\w+""#, r#""day_of_week":"[day]""#)
        .unwrap()
        .mask(r#""is_dst": ?(true|false)"#, r#""is_dst":"[dst]""#)
        .unwrap()
        .mask(
            r#""time_difference": ?"[+-][\d.]+h""#,
            r#""time_difference":"[h]""#,
        )
        .unwrap()
        .redact_keys(&["day_of_week", "is_dst", "time_difference"]);
    agentic_testing::assert_timelines!(runner);
    // The image is a PNG, the blob the gzip of "hello", both among the user's files.
    let saved: Vec<_> = std::fs::read_dir(files.join("mcp/everything"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(saved.len(), 2, "{saved:?}");
    let image = saved
        .iter()
        .find(|path| path.extension().is_some_and(|e| e == "png"));
    assert!(
        std::fs::read(image.unwrap())
            .unwrap()
            .starts_with(b"\x89PNG"),
        "{saved:?}"
    );
    let zipped = saved
        .iter()
        .find(|path| path.to_string_lossy().ends_with("hello.txt.gz"));
    assert!(
        std::fs::read(zipped.unwrap())
            .unwrap()
            .starts_with(&[0x1f, 0x8b]),
        "{saved:?}"
    );
    assert_eq!(
        std::fs::read_to_string("tests/fixture/notes.txt").unwrap(),
        "The launch is on 2026-09-15.\n",
        "the rejected write did not happen"
    );
}

async fn runtime(servers: Value) -> Arc<Runtime> {
    Arc::new(
        Runtime::builder()
            .config(agentic_core::Config::from_value(
                json!({ "mcp": { "servers": servers } }),
            ))
            .registered_plugins()
            .build()
            .await
            .unwrap(),
    )
}

async fn call(runtime: &Runtime, tool: &str, input: Value) -> Result<Value, String> {
    let prepared = runtime
        .services()
        .prepare("u", "p", "classic", &State::default())
        .await
        .unwrap();
    let context = ToolContext::new("u", "p", State::default(), runtime.services().clone());
    prepared
        .tools
        .invoke(context, tool, input)
        .await
        .map_err(|error| error.to_string())
}

fn servers(runtime: &Runtime) -> Arc<McpServers> {
    runtime.services().extensions.get::<McpServers>().unwrap()
}

async fn wait_for(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "waited {limit:?} for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A call dropped before its answer (a cancelled prompt, a timeout around it) is cancelled on
/// the server: `notifications/cancelled` reaches it, and its handler stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_call_is_cancelled_on_the_server() {
    if !servers_installed() {
        return;
    }
    let probe = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/cancel_probe.py");
    let runtime = runtime(json!({ "probe": { "command": "python3", "args": [probe] } })).await;
    let marker = std::env::temp_dir().join(format!("agentic-cancel-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let running = {
        let runtime = runtime.clone();
        let marker = marker.clone();
        tokio::spawn(async move { call(&runtime, "probe.wait", json!({ "marker": marker })).await })
    };
    // Dropped once the server runs it (a server that starts slowly on a busy machine would
    // otherwise never see the call it is to see cancelled).
    let said = |marker: &Path| std::fs::read_to_string(marker).unwrap_or_default();
    wait_for(
        "the call to reach the server",
        Duration::from_secs(60),
        || said(&marker) == "started" || running.is_finished(),
    )
    .await;
    assert!(
        !running.is_finished(),
        "the call ended by itself: {running:?}"
    );
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
    wait_for(
        "the server to see the cancellation",
        Duration::from_secs(10),
        || said(&marker) == "cancelled",
    )
    .await;
    let _ = std::fs::remove_file(&marker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_mid_call_fails_the_call_and_is_restarted() {
    if !servers_installed() {
        return;
    }
    let runtime = runtime(json!({ "everything": { "command": EVERYTHING } })).await;
    let servers = servers(&runtime);
    let server = servers.servers()[0].clone();
    servers.settled().await;
    assert_eq!(server.status(), Status::Ready);
    let first_pid = server.pid().unwrap();

    let long = {
        let runtime = runtime.clone();
        tokio::spawn(async move {
            call(
                &runtime,
                "everything.trigger-long-running-operation",
                json!({ "duration": 30, "steps": 30 }),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // SIGKILL to the server's process group: npm's launcher and node both go.
    let killed = std::process::Command::new("kill")
        .args(["-s", "KILL", "--", &format!("-{first_pid}")])
        .status()
        .unwrap();
    assert!(killed.success());
    let error = tokio::time::timeout(Duration::from_secs(10), long)
        .await
        .expect("the call ends when its server dies")
        .unwrap()
        .unwrap_err();
    assert!(
        error.contains("the MCP server \"everything\" stopped during the call"),
        "{error}"
    );

    // Meanwhile calls fail with the reason; then the server is back with a new process.
    wait_for("the restart", Duration::from_secs(30), || {
        server.status() == Status::Ready && server.pid() != Some(first_pid)
    })
    .await;
    let echoed = call(&runtime, "everything.echo", json!({ "message": "back" }))
        .await
        .unwrap();
    assert_eq!(echoed, json!("Echo: back"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_list_is_listed_again() {
    if !servers_installed() {
        return;
    }
    // server-everything announces tools/list_changed once it is initialised.
    let runtime = runtime(json!({ "everything": { "command": EVERYTHING } })).await;
    let servers = servers(&runtime);
    servers.settled().await;
    let server = servers.servers()[0].clone();
    wait_for("a second tools/list", Duration::from_secs(10), || {
        server.tool_lists() >= 2
    })
    .await;
    assert!(server.tools().iter().any(|tool| tool.name == "echo"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_is_reported_and_its_prompt_goes_on() {
    let runtime = runtime(json!({
        "broken": { "command": "/nonexistent/mcp-server", "startupTimeoutMs": 5000 },
        "off": { "command": "true", "enabled": false },
        "both": { "command": "x", "url": "http://127.0.0.1:1/mcp" },
    }))
    .await;
    let servers = servers(&runtime);
    servers.settled().await;
    let status: Vec<(String, Status)> = servers
        .servers()
        .iter()
        .map(|server| (server.name.clone(), server.status()))
        .collect();
    for (name, status) in &status {
        match (name.as_str(), status) {
            ("broken", Status::Restarting { error, .. }) => {
                assert!(
                    error.contains("could not start `/nonexistent/mcp-server`"),
                    "{error}"
                );
            }
            ("off", Status::Disabled { reason }) => assert!(reason.contains("enabled = false")),
            ("both", Status::Disabled { reason }) => {
                assert!(reason.contains("both `command` and `url`"), "{reason}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    // No tools, and preparing a prompt still works.
    let prepared = runtime
        .services()
        .prepare("u", "p", "classic", &State::default())
        .await
        .unwrap();
    assert!(
        prepared
            .tools
            .iter()
            .all(|tool| !tool.id().starts_with("broken."))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_with_headers() {
    if !servers_installed() {
        return;
    }
    let (mut child, url) = everything_over_http().await;
    let runtime = runtime(json!({
        "remote": {
            "url": url,
            "headers": { "X-Test": "agentic" },
        }
    }))
    .await;
    let servers = servers(&runtime);
    servers.settled().await;
    assert_eq!(servers.servers()[0].status(), Status::Ready);
    let sum = call(&runtime, "remote.get-sum", json!({ "a": 20, "b": 22 }))
        .await
        .unwrap();
    assert_eq!(sum, json!("The sum of 20 and 22 is 42."));
    let weather = call(
        &runtime,
        "remote.get-structured-content",
        json!({ "location": "New York" }),
    )
    .await
    .unwrap();
    assert_eq!(weather["temperature"], json!(33));
    child.kill().await.unwrap();
}

#[test]
fn code_mode_declares_mcp_tools_from_their_schemas() {
    if !servers_installed() {
        return;
    }
    let timeline = TimelineRunner::new()
        .keep_code_mode_system_prompt()
        .run_file_blocking(Path::new("tests/timelines/code_structured.yaml"))
        .unwrap();
    let system = timeline.requests[0].to_string();
    for declaration in [
        // From the input and output schemas.
        r#"everything.getStructuredContent(input: {\n  location: \"New York\" | \"Chicago\" | \"Los Angeles\""#,
        r#"}): { temperature: number; conditions: string; humidity: number }"#,
        // No output schema: the result is the text.
        r#"everything.getSum(input: {\n  a: number"#,
        "}): string",
    ] {
        assert!(
            system.contains(declaration),
            "{declaration} not in {system}"
        );
    }
}

/// The reference knowledge-graph server, server-memory: entities written through one call are
/// found by the next, and its output schemas make the results objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_server_keeps_what_it_is_told() {
    if !servers_installed() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("agentic-mcp-memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("memory.jsonl");
    let runtime = runtime(json!({
        "memory": {
            "command": "tests/servers/node_modules/.bin/mcp-server-memory",
            "env": { "MEMORY_FILE_PATH": file.to_str().unwrap() },
        }
    }))
    .await;
    servers(&runtime).settled().await;
    let created = call(
        &runtime,
        "memory.create_entities",
        json!({ "entities": [{
            "name": "Lena",
            "entityType": "person",
            "observations": ["Birthday on 12 August"],
        }] }),
    )
    .await
    .unwrap();
    assert_eq!(created["entities"][0]["name"], "Lena", "{created}");
    let found = call(
        &runtime,
        "memory.search_nodes",
        json!({ "query": "August" }),
    )
    .await
    .unwrap();
    assert_eq!(found["entities"][0]["name"], "Lena", "{found}");
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("Birthday on 12 August")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

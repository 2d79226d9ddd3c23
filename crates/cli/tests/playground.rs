#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The web playground in a real browser: headless Chromium, driven over WebDriver by
//! chromedriver, against a real `agentic serve` with a scripted model. Each view is saved as a
//! screenshot under `target/tmp/playground/`.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them). Without them the
//! tests say so and pass, unless `AGENTIC_REQUIRE_BROWSER=1`.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use support::{scratch, script, serve_with};

const TOKEN: &str = "playground-token";
/// WebDriver's Tab and Enter keys.
const TAB: char = '\u{e004}';
const ENTER: char = '\u{e007}';

/// Every model answer of the test, in the order the scenarios ask for them.
fn turns() -> String {
    let mut turns = String::from(
        r#"
# 1. classic: a tool call, then the answer
- toolCalls:
    - { id: call_time, name: time.now, input: {} }
- text: "It is **now**, according to `time.now`. <img src=x onerror=\"window.pwned=1\"><script>window.pwned=2</script>"
# 2. code: nested calls, logs, streamed live output, then the answer
- code: |
    const listing = fs.list({});
    console.log("entries:", listing.entries.length);
    const said = shell.exec({ command: "echo streamed-line-one streamed-line-two" });
    done("Listed the files and ran echo.");
# 3. code: a write that waits for approval
- code: |
    const before = fs.list({});
    fs.write({ path: "approved.txt", content: "yes" });
    done("Saved approved.txt.");
# 3b. code: an error on line 2, then a program that works
- code: |
    const n = 1;
    throw new Error("not counted yet");
- code: |
    done("Recovered after the error.");
# 4. classic: a write that is rejected
- toolCalls:
    - { id: call_reject, name: fs.write, input: { path: rejected.txt, content: "no" } }
- text: "Understood, I did not write it."
# 5. a slow answer, across a reload
- { text: "The slow answer arrived.", delayMs: 4000 }
# 5b. an answer that arrives while the page is offline
- { text: "Answered while you were away.", delayMs: 2500 }
# 6. a prompt that is stopped
- { text: "never shown", delayMs: 60000 }
# 7. code: a thousand outputs
- code: |
    for (let i = 0; i < 1000; i++) { time.now({}); }
    done("Called time.now 1000 times.");
# 7b. code: an MCP tool's image becomes a file output
- code: |
    const image = everything.getTinyImage({});
    done("Here is the tiny image.");
"#,
    );
    // 8. a hundred short prompts for the first-paint measurement.
    for index in 0..100 {
        turns.push_str(&format!("- text: \"Answer number {index}.\"\n"));
    }
    turns
}

#[test]
fn the_playground_works_in_a_real_browser() {
    let Some(browser) = Browser::find() else {
        return;
    };
    let turns = script("playground", &turns());
    let dir = scratch().join("playground");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("files")).unwrap();
    let config = dir.join("agentic.toml");
    std::fs::write(
        &config,
        format!(
            "[fs]\nroot = \"{}\"\nperUser = true\n\n[shell]\nallow = [\"echo\"]\n\n\
             [api]\nrequestsPerMinute = 100000\nburst = 10000\n",
            dir.join("files").display()
        ),
    )
    .unwrap();
    let everything = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../plugins/mcp/tests/servers/node_modules/.bin/mcp-server-everything");
    if !everything.exists() {
        assert!(
            std::env::var("AGENTIC_REQUIRE_MCP_SERVERS").as_deref() != Ok("1"),
            "AGENTIC_REQUIRE_MCP_SERVERS=1 but {} is missing",
            everything.display()
        );
        eprintln!(
            "skipped: the npm MCP servers are not installed (npm ci --prefix crates/plugins/mcp/tests/servers)"
        );
        return;
    }
    let mut toml = std::fs::read_to_string(&config).unwrap();
    toml.push_str(&format!(
        "\n[mcp.servers.everything]\ncommand = \"{}\"\n",
        everything.display()
    ));
    std::fs::write(&config, toml).unwrap();
    let database = format!("sqlite://{}", dir.join("agentic.db").display());
    let (mut server, base, log) = serve_with(
        &turns,
        &database,
        &["--config", config.to_str().unwrap()],
        &[("AGENTIC_API_TOKEN", TOKEN)],
    );
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("playground");
    std::fs::create_dir_all(&shots).unwrap();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let outcome = runtime.block_on(async {
        // The browser reaches the server through a proxy the test can cut.
        let proxy = Proxy::start(&base).await;
        let page = Page::open(&browser, &proxy.url, &shots).await;
        let result = scenarios(&page, &proxy, &base).await;
        let errors = page.console_errors().await;
        page.client.clone().close().await.ok();
        result.map(|()| errors)
    });
    // Whether the server was still up when the scenarios ended says a lot about a failure; its
    // last words may still be on their way through the pipe.
    if outcome.is_err() {
        std::thread::sleep(Duration::from_millis(500));
    }
    let status = match server.try_wait() {
        Ok(Some(status)) => format!("the server had exited: {status}"),
        Ok(None) => "the server was still running".to_owned(),
        Err(error) => format!("the server's state is unknown: {error}"),
    };
    let _ = server.kill();
    let _ = server.wait();
    match outcome {
        Ok(errors) => {
            // The browser logs every 4xx answer; these are the ones the scenarios ask for.
            let expected = [
                ("/api/capabilities", 401),
                ("/api/tools/fs.write/invoke", 403),
                ("/api/conversations/", 404),
            ];
            // While the test cuts the connection, requests fail at the network level (the event
            // stream, its reconnects, and whatever the page asked for meanwhile); the server
            // itself never causes one.
            let offline = "Failed to load resource: net::ERR_";
            let unexpected: Vec<&String> = errors
                .iter()
                .filter(|error| !error.contains(offline))
                .filter(|error| {
                    !expected.iter().any(|(path, status)| {
                        error.contains(path)
                            && error.contains(&format!(
                                "Failed to load resource: the server responded with a status of {status}"
                            ))
                    })
                })
                .collect();
            assert!(
                unexpected.is_empty(),
                "errors in the browser console: {unexpected:?}"
            );
        }
        // The error is repeated after the log, whose tail is what a CI summary shows.
        Err(error) => panic!(
            "{error}\n--- server log ---\n{}--- end of server log; {status} ---\n{error}",
            log.lock().unwrap()
        ),
    }
}

type Outcome = Result<(), String>;

async fn scenarios(page: &Page, proxy: &Proxy, base: &str) -> Outcome {
    // Sign-in: the token is asked for, and a missing one is explained.
    page.goto("/").await?;
    page.wait_css("form[aria-labelledby=signin-title]").await?;
    page.shot("01-sign-in").await?;
    page.fill("input[name=user]", "alice").await?;
    page.click("button[type=submit]").await?;
    page.wait_text(".signin .error", "needs a token").await?;
    page.shot("02-sign-in-needs-token").await?;
    page.fill("input[name=token]", TOKEN).await?;
    page.click("button[type=submit]").await?;
    page.wait_css(".composer textarea").await?;
    page.wait_text(".stream", "live").await?;

    // 1. A classic prompt with a tool call; Enter sends.
    page.select("select[name=mode]", "classic").await?;
    page.fill(".composer textarea", "What time is it?\n")
        .await?;
    page.wait_text(".prompt .badge.completed", "completed")
        .await?;
    page.wait_text(".tool .tool-id", "time.now").await?;
    page.wait_text(".markdown strong", "now").await?;
    // What the model writes is sanitised: no handlers, no scripts.
    let hostile = page
        .js("return [window.pwned, document.querySelectorAll('.markdown script, .markdown [onerror], .markdown img').length]")
        .await?;
    if hostile != json!([null, 0]) {
        return Err(format!("the model's markup ran or survived: {hostile}"));
    }
    page.shot("03-classic-tool-call").await?;
    page.click(".tool > summary").await?;
    page.wait_text(".tool .tool-body", "result").await?;
    let conversation = page.js("return location.hash").await?;
    let conversation = conversation
        .as_str()
        .and_then(|hash| hash.strip_prefix("#/c/"))
        .ok_or("no conversation in the address")?
        .to_owned();

    // 2. Code mode in the same conversation: the code, its nested calls, logs, live output.
    page.select("select[name=mode]", "code").await?;
    page.fill(".composer textarea", "List my files and say hello\n")
        .await?;
    page.wait_count(".prompt .badge.completed", 2).await?;
    page.wait_text(".execution .code .line", "fs.list").await?;
    page.wait_text(".execution .calls .tool-id", "shell.exec")
        .await?;
    page.wait_text(".execution .logs", "entries: 0").await?;
    page.wait_text(".markdown", "Listed the files and ran echo.")
        .await?;
    let numbered = page
        .js("return [...document.querySelectorAll('.execution .code .ln')].map(n => n.textContent).join(',')")
        .await?;
    if numbered.as_str() != Some("1,2,3,4") {
        return Err(format!("line numbers: {numbered}"));
    }
    if page.count(".execution .code .hljs-keyword").await? == 0 {
        return Err("the code is not highlighted".into());
    }
    page.click_text(".execution .calls .tool > summary", "shell.exec")
        .await?;
    page.wait_text(".execution .calls .tool-body", "streamed-line-two")
        .await?;
    page.shot("04-code-mode").await?;

    // 3. Approve, with the code in view and the paused line marked.
    page.fill(".composer textarea", "Save a note\n").await?;
    page.wait_css(".approval").await?;
    page.wait_text(".approval h3", "fs.write").await?;
    page.wait_text(".execution .line.mark-paused", "fs.write")
        .await?;
    page.wait_text(".execution .paused-note", "line 2").await?;
    page.wait_text(".approval .paused-code .line.mark-paused", "fs.write")
        .await?;
    page.shot("05-approval-code-mode").await?;
    page.click(".approval button.approve").await?;
    page.wait_count(".prompt .badge.completed", 3).await?;
    page.wait_text(".markdown", "Saved approved.txt.").await?;
    if page.count(".approval").await? != 0 {
        return Err("the approval stayed on screen".into());
    }

    // 3b. An error points at its line.
    page.fill(".composer textarea", "Count them\n").await?;
    page.wait_text(".markdown", "Recovered after the error.")
        .await?;
    page.wait_text(".execution .line.mark-error", "throw new Error")
        .await?;
    page.wait_text(".execution pre.error", "not counted yet")
        .await?;
    page.shot("06-error-line").await?;

    // 4. Reject with a reason, in classic mode.
    page.select("select[name=mode]", "classic").await?;
    page.fill(".composer textarea", "Write rejected.txt\n")
        .await?;
    page.wait_css(".approval").await?;
    page.fill(".approval input", "not today").await?;
    page.shot("07-approval-classic").await?;
    // From the keyboard: Enter in the reason field rejects.
    page.fill(".approval input", &format!("not today{ENTER}"))
        .await?;
    page.wait_count(".prompt .badge.completed", 5).await?;
    page.wait_text(".tool pre.error", "Rejected by user: not today")
        .await?;
    page.wait_text(".markdown", "Understood, I did not write it.")
        .await?;

    // 5. A reload in the middle of a prompt: it shows as running, then finishes live.
    page.fill(".composer textarea", "Take your time\n").await?;
    page.wait_count(".prompt.state-running", 1).await?;
    page.client.refresh().await.map_err(|e| e.to_string())?;
    page.wait_count(".prompt", 6).await?;
    page.wait_count(".prompt.state-running", 1).await?;
    page.shot("08-reloaded-while-running").await?;
    page.wait_text(".markdown", "The slow answer arrived.")
        .await?;
    page.wait_count(".prompt .badge.completed", 6).await?;

    // 5b. A dropped connection: the answer arrives while the page is offline, and the stream
    // picks it up on reconnecting, from the last event it saw.
    page.fill(".composer textarea", "Are you there?\n").await?;
    page.wait_count(".prompt.state-running", 1).await?;
    proxy.cut(true);
    page.wait_text(".stream", "reconnecting").await?;
    let waiting_prompt = page
        .js("return document.querySelector('.prompt.state-running').dataset.promptId")
        .await?;
    let waiting_prompt = waiting_prompt
        .as_str()
        .ok_or("no running prompt")?
        .to_owned();
    wait_completed(base, "alice", &waiting_prompt).await?;
    page.shot("08b-offline").await?;
    if page.count(".prompt .badge.completed").await? != 6 {
        return Err("the page saw the answer while offline".into());
    }
    proxy.cut(false);
    page.wait_text(".stream", "live").await?;
    page.wait_text(".markdown", "Answered while you were away.")
        .await?;
    page.wait_count(".prompt .badge.completed", 7).await?;

    // 6. Stop a running prompt.
    page.fill(".composer textarea", "This will be stopped\n")
        .await?;
    page.wait_css("button.stop").await?;
    page.click("button.stop").await?;
    page.wait_text(".prompt .badge.cancelled", "cancelled")
        .await?;
    page.wait_css("button.send").await?;
    page.shot("09-stopped").await?;

    // 7. A thousand outputs: each change is drawn within 50 ms.
    page.select("select[name=mode]", "code").await?;
    page.js("window.agenticStats.commits = []").await?;
    page.fill(".composer textarea", "Call time.now many times\n")
        .await?;
    page.wait_text(".markdown", "Called time.now 1000 times.")
        .await?;
    page.wait_count(".prompt .badge.completed", 8).await?;
    let outputs = page.count(".execution .calls .tool").await?;
    let commits = page
        .js("return window.agenticStats.commits.filter(c => c.ms > 0).map(c => c.ms)")
        .await?;
    let mut times: Vec<f64> = commits
        .as_array()
        .ok_or("no commit times")?
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    times.sort_by(f64::total_cmp);
    let worst = times.last().copied().unwrap_or_default();
    let median = times.get(times.len() / 2).copied().unwrap_or_default();
    let total_outputs = page
        .js("return [...document.querySelectorAll('.prompt')].length")
        .await?;
    report(
        "timeline",
        json!({ "nestedCalls": outputs, "prompts": total_outputs, "commits": times.len(),
                "medianMs": median, "worstMs": worst }),
    );
    if outputs < 1000 {
        return Err(format!("{outputs} nested calls shown, expected 1,000"));
    }
    if worst > 50.0 {
        let slowest = page
            .js("return window.agenticStats.commits.slice().sort((a, b) => b.ms - a.ms).slice(0, 5)")
            .await?;
        println!("slowest changes: {slowest}");
        over_target(format!(
            "a change of a 1,000-output timeline took {worst:.1} ms to draw (target 50 ms)"
        ))?;
    }
    page.shot("10-thousand-outputs").await?;

    // 7b. A file output: an MCP tool's image, previewed from the user's files.
    page.fill(".composer textarea", "Show me the tiny image\n")
        .await?;
    page.wait_text(".markdown", "Here is the tiny image.")
        .await?;
    page.wait_text(".file figcaption", "mcp/everything/")
        .await?;
    page.wait_until(
        "const i = document.querySelector('.file img'); return !!i && i.complete && i.naturalWidth > 0",
        vec![],
        "the image preview",
    )
    .await?;
    page.shot("11-file-output").await?;

    // Tools: browse, read the schema, invoke from a form; approval-bound tools say so.
    page.goto("/#/tools").await?;
    page.wait_text(".tool-list", "time.now").await?;
    page.click_text(".tool-list a", "fs.list").await?;
    page.wait_text(".tool-detail h3", "fs.list").await?;
    page.click(".tool-detail button[type=submit]").await?;
    page.wait_text(".tool-detail .result", "approved.txt")
        .await?;
    page.shot("12-tools").await?;
    page.goto("/#/tools/fs.write").await?;
    page.wait_text(".tool-detail h3", "fs.write").await?;
    page.wait_text(".tool-detail .approval-note", "approval")
        .await?;
    page.wait_text(".tool-list a.current .asks", "asks approval")
        .await?;
    if page.count(".tool-list a .asks").await? >= page.count(".tool-list a").await? {
        return Err("every tool says it asks for approval".into());
    }
    page.fill(".tool-detail input[name=path]", "x.txt").await?;
    page.fill(".tool-detail input[name=content]", "x").await?;
    page.click(".tool-detail button[type=submit]").await?;
    page.wait_text(".tool-detail .error", "needs approval")
        .await?;

    // Phone width, dark theme, keyboard only.
    page.client
        .set_window_size(390, 844)
        .await
        .map_err(|e| e.to_string())?;
    page.goto(&format!("/#/c/{conversation}")).await?;
    page.js("localStorage.setItem('agentic.theme', 'dark'); location.reload()")
        .await?;
    page.wait_count(".prompt", 10).await?;
    let overflow = page
        .js("return document.documentElement.scrollWidth - window.innerWidth")
        .await?;
    if overflow.as_f64().unwrap_or_default() > 0.0 {
        return Err(format!("the page is {overflow} px wider than a phone"));
    }
    let theme = page
        .js("return document.documentElement.dataset.theme")
        .await?;
    if theme != json!("dark") {
        return Err(format!("theme is {theme}"));
    }
    page.shot("13-phone-dark").await?;
    // The conversations are behind the menu button at this width.
    if page
        .js("return getComputedStyle(document.querySelector('.sidebar')).display")
        .await?
        != json!("none")
    {
        return Err("the sidebar covers the phone's screen".into());
    }
    page.click(".menu-toggle").await?;
    page.wait_until(
        "return getComputedStyle(document.querySelector('.sidebar')).display !== 'none'",
        vec![],
        "the menu to open",
    )
    .await?;
    page.shot("13b-phone-menu").await?;
    page.click(".conversations a").await?;
    page.client
        .set_window_size(1280, 900)
        .await
        .map_err(|e| e.to_string())?;
    // Every control can be reached with Tab: none is taken out of the order.
    let unreachable = page
        .js("return document.querySelectorAll('button[tabindex=\"-1\"], a[tabindex=\"-1\"], select[tabindex=\"-1\"], textarea[tabindex=\"-1\"]').length")
        .await?;
    if unreachable != json!(0) {
        return Err(format!("{unreachable} controls cannot be reached with Tab"));
    }

    // A second user sees none of alice's conversations, even by address.
    page.js("localStorage.clear(); sessionStorage.clear()")
        .await?;
    page.goto("/").await?;
    // Keyboard only: the user id, Tab to the token, Enter signs in.
    page.fill("input[name=user]", &format!("bob{TAB}{TOKEN}{ENTER}"))
        .await?;
    page.wait_text(".conversations", "No conversations yet.")
        .await?;
    page.goto(&format!("/#/c/{conversation}")).await?;
    page.wait_text(".conversation .error", "not yours").await?;
    page.shot("14-second-user").await?;

    // First paint of a conversation with a hundred prompts, from a fresh load (the median of
    // five loads under `cargo xtask bench playground`).
    let many = hundred_prompts(base).await?;
    page.goto("/").await?;
    page.goto(&format!("/#/c/{many}")).await?;
    let loads = if targets_checked() { 5 } else { 1 };
    let mut paints = Vec::new();
    for _ in 0..loads {
        page.client.refresh().await.map_err(|e| e.to_string())?;
        page.wait_count(".prompt", 100).await?;
        page.wait_until(
            "return !!window.agenticStats.firstPaint",
            vec![],
            "the first paint",
        )
        .await?;
        let paint = page.js("return window.agenticStats.firstPaint").await?;
        paints.push(paint["sinceNavigation"].as_f64().ok_or("no first paint")?);
    }
    paints.sort_by(f64::total_cmp);
    let since = paints[paints.len() / 2];
    report(
        "first-paint",
        json!({ "prompts": 100, "loads": paints, "medianMs": since }),
    );
    if since > 1000.0 {
        over_target(format!(
            "a conversation of 100 prompts took {since:.0} ms to show (target 1 s)"
        ))?;
    }
    page.shot("15-hundred-prompts").await?;
    Ok(())
}

/// Timing targets fail the run only under `cargo xtask bench playground`
/// (`AGENTIC_PLAYGROUND_TARGETS=1`): on a shared CI machine they are reported, not checked.
fn targets_checked() -> bool {
    std::env::var("AGENTIC_PLAYGROUND_TARGETS").as_deref() == Ok("1")
}

fn over_target(message: String) -> Outcome {
    if targets_checked() {
        Err(message)
    } else {
        println!("playground: over target (checked by `cargo xtask bench playground`): {message}");
        Ok(())
    }
}

/// Polls the API until the user's prompt has completed. A request that fails at the network
/// level is tried again until the deadline, and the last failure is reported with its causes.
async fn wait_completed(base: &str, user: &str, prompt: &str) -> Outcome {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| error_chain(&e))?;
    let deadline = Instant::now() + WAIT;
    loop {
        let answer = client
            .get(format!("{base}/api/prompts/{prompt}"))
            .header("x-user-id", user)
            .bearer_auth(TOKEN)
            .send()
            .await;
        let last = match answer {
            Ok(answer) => {
                let status = answer.status();
                let text = answer.text().await.map_err(|e| error_chain(&e))?;
                let stored: Value = serde_json::from_str(&text)
                    .map_err(|e| format!("prompt {prompt}: {status} {e}: {text}"))?;
                if stored["state"] == "completed" {
                    return Ok(());
                }
                format!("{status} {stored}")
            }
            Err(error) => error_chain(&error),
        };
        if Instant::now() > deadline {
            return Err(format!("prompt {prompt} did not complete: {last}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An error with every cause it names (reqwest's own text leaves them out).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// Runs a hundred prompts for bob through the API; returns their conversation.
async fn hundred_prompts(base: &str) -> Result<String, String> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| error_chain(&e))?;
    let mut conversation: Option<String> = None;
    for index in 0..100 {
        let mut body = json!({ "input": format!("Question number {index}?"), "mode": "classic" });
        if let Some(id) = &conversation {
            body["conversationId"] = json!(id);
        }
        let accepted: Value = client
            .post(format!("{base}/api/prompt"))
            .header("x-user-id", "bob")
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("prompt {index}: {}", error_chain(&e)))?
            .json()
            .await
            .map_err(|e| format!("prompt {index}: {}", error_chain(&e)))?;
        let prompt = accepted["promptId"]
            .as_str()
            .ok_or_else(|| format!("not accepted: {accepted}"))?
            .to_owned();
        conversation = accepted["conversationId"].as_str().map(str::to_owned);
        wait_completed(base, "bob", &prompt).await?;
    }
    conversation.ok_or_else(|| "no conversation".to_owned())
}

/// A measurement, printed for the log and kept beside the screenshots.
fn report(name: &str, value: Value) {
    println!("playground {name}: {value}");
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("playground")
        .join(format!("{name}.json"));
    let _ = std::fs::write(path, value.to_string());
}

/// A TCP proxy in front of the server, so the test can drop the browser's connections (and
/// refuse new ones) as a network would, and then let them through again.
struct Proxy {
    url: String,
    down: tokio::sync::watch::Sender<bool>,
}

impl Proxy {
    async fn start(base: &str) -> Self {
        let upstream = base.trim_start_matches("http://").to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (down, watching) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let mut watching = watching.clone();
                if *watching.borrow() {
                    continue; // dropped: the connection closes unanswered
                }
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(&upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = watching.wait_for(|down| *down) => {}
                    }
                });
            }
        });
        Self { url, down }
    }

    /// Drops every open connection and refuses new ones (`true`), or lets them through.
    fn cut(&self, down: bool) {
        let _ = self.down.send(down);
    }
}

/// chromedriver and Chromium, when this machine has them.
struct Browser {
    chromium: PathBuf,
    driver: PathBuf,
}

impl Browser {
    fn find() -> Option<Self> {
        let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
            .iter()
            .map(PathBuf::from)
            .find(|path| path.exists());
        let driver = ["/usr/bin/chromedriver"]
            .iter()
            .map(PathBuf::from)
            .find(|path| path.exists());
        match (chromium, driver) {
            (Some(chromium), Some(driver)) => Some(Self { chromium, driver }),
            _ => {
                assert!(
                    std::env::var("AGENTIC_REQUIRE_BROWSER").as_deref() != Ok("1"),
                    "AGENTIC_REQUIRE_BROWSER=1 but chromium or chromedriver is missing \
                     (apt-get install chromium chromium-driver)"
                );
                eprintln!(
                    "skipped: no chromium and chromedriver (apt-get install chromium chromium-driver)"
                );
                None
            }
        }
    }
}

/// One browser session against the server.
struct Page {
    client: Client,
    base: String,
    shots: PathBuf,
    _driver: DriverProcess,
    _profile: tempfile::TempDir,
}

struct DriverProcess(Child);

impl Drop for DriverProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const WAIT: Duration = Duration::from_secs(30);

impl Page {
    async fn open(browser: &Browser, base: &str, shots: &Path) -> Self {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let driver = DriverProcess(
            Command::new(&browser.driver)
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let profile = tempfile::tempdir().unwrap();
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": browser.chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-quic", "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--disable-extensions",
                    "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
            "goog:loggingPrefs": { "browser": "ALL" },
        });
        let capabilities = match capabilities {
            Value::Object(map) => map,
            _ => unreachable!(),
        };
        // chromedriver is plain HTTP on loopback, but the client's TLS stack wants a provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let deadline = Instant::now() + WAIT;
        let client = loop {
            match ClientBuilder::rustls()
                .unwrap()
                .capabilities(capabilities.clone())
                .connect(&format!("http://127.0.0.1:{port}"))
                .await
            {
                Ok(client) => break client,
                Err(error) => {
                    assert!(
                        Instant::now() < deadline,
                        "chromedriver did not start: {error}"
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        Self {
            client,
            base: base.to_owned(),
            shots: shots.to_owned(),
            _driver: driver,
            _profile: profile,
        }
    }

    async fn goto(&self, path: &str) -> Outcome {
        self.client
            .goto(&format!("{}{path}", self.base))
            .await
            .map_err(|e| format!("goto {path}: {e}"))
    }

    async fn js(&self, script: &str) -> Result<Value, String> {
        self.client
            .execute(script, vec![])
            .await
            .map_err(|e| format!("{script}: {e}"))
    }

    async fn wait_css(&self, css: &str) -> Outcome {
        self.client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .map(|_| ())
            .map_err(|e| format!("waiting for {css}: {e}"))
    }

    /// Waits until an element matching `css` contains `text`.
    async fn wait_text(&self, css: &str, text: &str) -> Outcome {
        let script = "return [...document.querySelectorAll(arguments[0])].some(e => e.textContent.includes(arguments[1]))";
        self.wait_until(
            script,
            vec![json!(css), json!(text)],
            &format!("{css} with \"{text}\""),
        )
        .await
    }

    async fn wait_count(&self, css: &str, count: usize) -> Outcome {
        let script = "return document.querySelectorAll(arguments[0]).length >= arguments[1]";
        self.wait_until(
            script,
            vec![json!(css), json!(count)],
            &format!("{count} × {css}"),
        )
        .await
    }

    async fn wait_until(&self, script: &str, arguments: Vec<Value>, what: &str) -> Outcome {
        let deadline = Instant::now() + WAIT;
        loop {
            let done = self
                .client
                .execute(script, arguments.clone())
                .await
                .map_err(|e| format!("{what}: {e}"))?;
            if done == json!(true) {
                return Ok(());
            }
            if Instant::now() > deadline {
                let body = self
                    .js("return document.body.innerText")
                    .await
                    .unwrap_or_default();
                let _ = self.shot("failed").await;
                return Err(format!(
                    "timed out waiting for {what}; the page says:\n{}",
                    body.as_str().unwrap_or_default()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn count(&self, css: &str) -> Result<usize, String> {
        let found = self
            .client
            .execute(
                "return document.querySelectorAll(arguments[0]).length",
                vec![json!(css)],
            )
            .await
            .map_err(|e| e.to_string())?;
        Ok(usize::try_from(found.as_u64().unwrap_or_default()).unwrap_or_default())
    }

    async fn fill(&self, css: &str, text: &str) -> Outcome {
        self.wait_css(css).await?;
        let element = self
            .client
            .find(Locator::Css(css))
            .await
            .map_err(|e| format!("{css}: {e}"))?;
        element.clear().await.map_err(|e| format!("{css}: {e}"))?;
        element
            .send_keys(text)
            .await
            .map_err(|e| format!("typing into {css}: {e}"))
    }

    async fn click(&self, css: &str) -> Outcome {
        self.wait_css(css).await?;
        self.client
            .find(Locator::Css(css))
            .await
            .map_err(|e| format!("{css}: {e}"))?
            .click()
            .await
            .map_err(|e| format!("clicking {css}: {e}"))
    }

    /// Clicks the element matching `css` whose text contains `text`.
    async fn click_text(&self, css: &str, text: &str) -> Outcome {
        self.wait_text(css, text).await?;
        let clicked = self
            .client
            .execute(
                "const e = [...document.querySelectorAll(arguments[0])].find(e => e.textContent.includes(arguments[1])); e.click(); return true",
                vec![json!(css), json!(text)],
            )
            .await
            .map_err(|e| format!("clicking {css} \"{text}\": {e}"))?;
        if clicked == json!(true) {
            Ok(())
        } else {
            Err(format!("nothing to click at {css} \"{text}\""))
        }
    }

    async fn select(&self, css: &str, value: &str) -> Outcome {
        self.wait_until(
            "const s = document.querySelector(arguments[0]); return !!s && [...s.options].some(o => o.value === arguments[1])",
            vec![json!(css), json!(value)],
            &format!("{css} offering {value}"),
        )
        .await?;
        self.client
            .find(Locator::Css(css))
            .await
            .map_err(|e| e.to_string())?
            .select_by_value(value)
            .await
            .map_err(|e| format!("selecting {value} in {css}: {e}"))
    }

    async fn shot(&self, name: &str) -> Outcome {
        let png = self.client.screenshot().await.map_err(|e| e.to_string())?;
        std::fs::write(self.shots.join(format!("{name}.png")), png).map_err(|e| e.to_string())
    }

    /// What went wrong in the page: uncaught errors and rejections the page saw, and the
    /// browser's own log at SEVERE level (failed loads, policy violations, console.error).
    async fn console_errors(&self) -> Vec<String> {
        let mut errors: Vec<String> = self
            .js("return window.agenticStats ? window.agenticStats.errors : []")
            .await
            .ok()
            .and_then(|value| serde_json::from_value(value).ok())
            .unwrap_or_default();
        errors.extend(browser_log(&self.client).await);
        errors
    }
}

/// The browser's console log at SEVERE level, through chromedriver's log endpoint.
async fn browser_log(client: &Client) -> Vec<String> {
    #[derive(Debug)]
    struct GetLog;
    impl fantoccini::wd::WebDriverCompatibleCommand for GetLog {
        fn endpoint(
            &self,
            base_url: &url::Url,
            session_id: Option<&str>,
        ) -> Result<url::Url, url::ParseError> {
            base_url.join(&format!(
                "session/{}/se/log",
                session_id.unwrap_or_default()
            ))
        }
        fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
            (http::Method::POST, Some(r#"{"type":"browser"}"#.to_owned()))
        }
    }
    let Ok(entries) = client.issue_cmd(GetLog).await else {
        return Vec::new();
    };
    entries
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .filter(|entry| entry["level"] == "SEVERE")
                .map(|entry| entry["message"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

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

use agentic_testing::Requirement;

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
# 7c. code, in a new conversation: progress first, then two calls that wait for approval
- code: |
    output("Writing the note first.");
    fs.write({ path: "two.txt", content: "two" });
    output("Now listing the files.");
    const listed = shell.exec({ command: "ls" });
    done("Wrote two.txt and listed the files.");
# 7d. the same message again, from Retry
- code: |
    done("Retried without writing.");
# 7e. code: a write that waits, and the prompt is stopped
- code: |
    fs.write({ path: "never.txt", content: "no" });
    done("never shown");
"#,
    );
    // 8. a hundred short prompts for the first-paint measurement.
    for index in 0..100 {
        turns.push_str(&format!("- text: \"Answer number {index}.\"\n"));
    }
    turns
}

/// axe-core, from the playground's pinned npm packages (`npm ci --prefix crates/api/web`).
fn axe_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../api/web/node_modules/axe-core/axe.min.js")
}

/// One browser at a time: two would share two cores with the servers they drive.
static ONE_BROWSER: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn the_playground_works_in_a_real_browser() {
    let Some(browser) = Browser::find() else {
        return;
    };
    let _one = ONE_BROWSER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let turns = script("playground", &turns());
    let dir = scratch().join("playground");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("files")).unwrap();
    let config = dir.join("agentic.toml");
    std::fs::write(
        &config,
        format!(
            // The scenarios walk code mode's call-by-call approvals (a paused script, the focus
            // moving from one to the next): plans, on by default, have a test of their own.
            "[fs]\nroot = \"{}\"\nperUser = true\n\n[shell]\nallow = [\"echo\"]\n\n\
             [api]\nrequestsPerMinute = 100000\nburst = 10000\n\n[interpreter]\nplan = false\n",
            dir.join("files").display()
        ),
    )
    .unwrap();
    let everything = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../plugins/mcp/tests/servers/node_modules/.bin/mcp-server-everything");
    if !everything.exists() {
        Requirement::McpServers.missing(&format!(
            "{} is missing (npm ci --prefix crates/plugins/mcp/tests/servers)",
            everything.display()
        ));
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
                ("/api/conversations", 401),
                ("/api/events/stream", 401),
                ("/api/tools/fs.write/invoke", 403),
                ("/api/conversations/", 404),
            ];
            let unexpected = unexpected_errors(&errors, &expected);
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

/// The errors in `errors` that none of `expected` (a path and the status the browser logged
/// for it) explains. While a test cuts the connection, requests fail at the network level
/// (the event stream, its reconnects, and whatever the page asked for meanwhile); the server
/// itself never causes one.
fn unexpected_errors<'a>(errors: &'a [String], expected: &[(&str, u16)]) -> Vec<&'a String> {
    let offline = "Failed to load resource: net::ERR_";
    errors
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
        .collect()
}

/// An interrupted prompt continued from the playground: the continued run completes before
/// the answer to `POST /continue` is read (held back here, as a slow network would), and the
/// prompt must stay completed, with the composer free for the next message.
#[test]
fn continue_on_a_fast_prompt_leaves_it_completed() {
    let Some(browser) = Browser::find() else {
        return;
    };
    let _one = ONE_BROWSER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = scratch().join("playground-continue");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let database = format!("sqlite://{}", dir.join("agentic.db").display());
    let first = script(
        "playground-continue-first",
        "- { text: \"never shown\", delayMs: 60000 }\n",
    );
    let second = script(
        "playground-continue-second",
        "- text: \"Continued at once.\"\n- text: \"The next answer.\"\n",
    );
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("playground");
    std::fs::create_dir_all(&shots).unwrap();
    let (mut server, base, _) = serve_with(&first, &database, &[], &[]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let outcome = runtime.block_on(async {
        let proxy = Proxy::start(&base).await;
        let page = Page::open(&browser, &proxy.url, &shots).await;
        let result = async {
            page.goto("/").await?;
            page.fill("input[name=user]", &format!("alice{ENTER}"))
                .await?;
            page.select("select[name=mode]", "classic").await?;
            page.fill(".composer textarea", "Answer slowly\n").await?;
            page.wait_count(".prompt.state-running", 1).await?;
            let prompt = page
                .js("return document.querySelector('.prompt.state-running').dataset.promptId")
                .await?;
            let prompt = prompt.as_str().ok_or("no running prompt")?.to_owned();
            // The server stops mid-prompt; the next one, on the same database, finds it
            // interrupted.
            server.kill().map_err(|e| e.to_string())?;
            server.wait().map_err(|e| e.to_string())?;
            let (next, base, _) = serve_with(&second, &database, &[], &[]);
            server = next;
            proxy.retarget(&base);
            wait_state(&base, "alice", &prompt, "interrupted").await?;
            page.client.refresh().await.map_err(|e| e.to_string())?;
            page.wait_css(".prompt.state-interrupted button.continue")
                .await?;
            page.js(
                "window.continueApplied = false; const fetched = window.fetch; \
                 window.fetch = function (input, init) { \
                   const answer = fetched.call(this, input, init); \
                   if (!String(input).endsWith('/continue')) return answer; \
                   return new Promise((resolve, reject) => { window.releaseContinue = () => answer.then((response) => { \
                     const json = response.json.bind(response); \
                     response.json = () => json().then((body) => { setTimeout(() => { window.continueApplied = true; }); return body; }); \
                     resolve(response); }, reject); }); };",
            )
            .await?;
            page.click("button.continue").await?;
            page.wait_until("return !!window.releaseContinue", vec![], "the held answer")
                .await?;
            page.wait_text(".markdown", "Continued at once.").await?;
            page.wait_css(".prompt.state-completed").await?;
            page.js("window.releaseContinue()").await?;
            page.wait_until("return window.continueApplied", vec![], "the answer to be read")
                .await?;
            let after = page
                .js("return [document.querySelector('.prompt').className, !!document.querySelector('button.stop'), !!document.querySelector('.spinner')]")
                .await?;
            if after != json!(["prompt state-completed", false, false]) {
                page.shot("continue-overwritten").await?;
                return Err(format!("after the answer to continue: {after}"));
            }
            page.fill(".composer textarea", "And the next?\n").await?;
            page.wait_text(".markdown", "The next answer.").await?;
            page.wait_count(".prompt.state-completed", 2).await?;
            Ok(())
        }
        .await;
        let errors = page.console_errors().await;
        page.client.clone().close().await.ok();
        result.map(|()| errors)
    });
    let _ = server.kill();
    let _ = server.wait();
    let errors = outcome.unwrap();
    let unexpected = unexpected_errors(&errors, &[]);
    assert!(
        unexpected.is_empty(),
        "errors in the browser console: {unexpected:?}"
    );
}

/// A code prompt that ended is saved as a test case, and one of its programs is edited and
/// run again against its recording: the new timeline shows beside the old, and a call the
/// recording lacks is named.
#[test]
fn a_prompt_is_saved_as_a_test_and_an_edited_program_reruns_against_its_recording() {
    let turns = "- code: |\n    const t = timeNow({ timezone: \"UTC\" });\n    output(`Recorded on a ${t.weekday}.`);\n    done();\n";
    in_a_browser(
        "playground-record",
        turns,
        &[],
        async |page: &Page, base: &str| {
            page.select("select[name=mode]", "code").await?;
            page.fill(".composer textarea", "What day is it?\n").await?;
            page.wait_css(".prompt.state-completed").await?;
            let prompt = page
                .js("return document.querySelector('.prompt.state-completed').dataset.promptId")
                .await?;
            let prompt = prompt.as_str().ok_or("no completed prompt")?.to_owned();

            // Save as test: the file the browser gets is the API's export.
            page.click("button.save-test").await?;
            page.wait_until(
                "return !!window.agenticStats.exported",
                vec![],
                "the case to be saved",
            )
            .await?;
            page.wait_text(".save-note", "Saved case-").await?;
            let saved = page.js("return window.agenticStats.exported").await?;
            let exported = reqwest::Client::new()
                .get(format!("{base}/api/prompts/{prompt}/export?as=test"))
                .header("x-user-id", "alice")
                .send()
                .await
                .map_err(|e| e.to_string())?
                .text()
                .await
                .map_err(|e| e.to_string())?;
            if saved["bytes"] != json!(exported.len()) || !exported.contains("tool: time.now") {
                return Err(format!("saved {saved}, the export is:\n{exported}"));
            }
            let weekday = exported
                .lines()
                .find_map(|line| line.trim().strip_prefix("weekday: "))
                .ok_or("no weekday recorded")?
                .to_owned();

            // Edit and re-run: the same call, a new answer, from the recording.
            page.click("button.edit-rerun").await?;
            page.fill(
                ".replay-code",
                "const t = timeNow({ timezone: \"UTC\" });\noutput(\"Re-run: still \" + t.weekday);\ndone();",
            )
            .await?;
            page.click("button.rerun").await?;
            page.wait_text(
                ".replay .after .markdown",
                &format!("Re-run: still {weekday}"),
            )
            .await?;
            page.wait_text(".replay .before .markdown", "Recorded on a")
                .await?;
            page.axe("the re-run view").await?;

            // A call the recording does not have fails without running and is named.
            page.fill(
                ".replay-code",
                "output(JSON.stringify(timeNow({ timezone: \"Asia/Tokyo\" })));\ndone();",
            )
            .await?;
            page.click("button.rerun").await?;
            page.wait_text(".divergences", "time.now({\"timezone\":\"Asia/Tokyo\"})")
                .await?;
            page.wait_text(".divergences", "time.now({\"timezone\":\"UTC\"})")
                .await?;
            // Nothing of the re-runs was stored: the conversation still has one prompt.
            page.client.refresh().await.map_err(|e| e.to_string())?;
            page.wait_count(".prompt", 1).await?;
            Ok(())
        },
    );
}

/// A code-mode plan in the playground: the planned writes listed with their diffs and the
/// program beside them, one left out, and only the ticked ones written.
#[test]
fn a_plan_is_shown_as_a_list_beside_its_code_and_approved_in_part() {
    let turns = "- code: |\n    const wrote = [];\n    for (const name of [\"a.txt\", \"b.txt\", \"c.txt\"]) {\n      try { fs.write({ path: name, content: \"new \" + name }); wrote.push(name); }\n      catch (error) { wrote.push(name + \" not written\"); }\n    }\n    done(wrote.join(\", \"));\n";
    let Some(root) = in_a_browser(
        "playground-plan",
        turns,
        &[("a.txt", "old a\n")],
        async |page: &Page, _| {
            page.select("select[name=mode]", "code").await?;
            page.fill(".composer textarea", "Write a, b and c\n")
                .await?;
            page.wait_css(".approval.plan").await?;
            page.wait_count(".plan-call", 3).await?;
            page.wait_text(".approval.plan h2", "Approve the plan?")
                .await?;
            page.wait_text(
                ".approval.plan .plan-call[data-call='0'] pre.diff .del",
                "-old a",
            )
            .await?;
            page.wait_text(
                ".approval.plan .plan-call[data-call='2'] pre.diff .add",
                "+new c.txt",
            )
            .await?;
            page.wait_text(".approval.plan .plan-code", "fs.write")
                .await?;
            page.wait_css(".approval.plan .plan-code .mark-planned")
                .await?;
            page.shot("plan-view").await?;
            page.axe("the plan view").await?;
            page.click(".plan-call[data-call='1'] input[type=checkbox]")
                .await?;
            page.wait_text(".approval.plan button.approve", "Approve 2 of 3")
                .await?;
            page.fill(".approval.plan .actions input", "keep b").await?;
            page.click(".approval.plan button.approve").await?;
            page.wait_css(".prompt.state-completed").await?;
            page.wait_text(".prompt.state-completed", "b.txt not written")
                .await?;
            page.wait_text(
                ".prompt.state-completed .decision",
                "approved in part by alice",
            )
            .await?;
            Ok(())
        },
    ) else {
        return;
    };
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "new a.txt"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("c.txt")).unwrap(),
        "new c.txt"
    );
    assert!(!root.join("b.txt").exists(), "the write left out ran");
}

/// A scope in the playground: approving with "in this conversation" lists the scope, the
/// next prompt's write runs without asking and says which scope approved it, and Revoke
/// takes the scope away.
#[test]
fn a_scope_is_granted_listed_used_and_revoked_in_the_playground() {
    let turns = "- toolCalls:\n    - { name: fs.write, input: { path: one.txt, content: one } }\n- text: Wrote one.\n- toolCalls:\n    - { name: fs.write, input: { path: two.txt, content: two } }\n- text: Wrote two.\n";
    let Some(root) = in_a_browser("playground-scope", turns, &[], async |page: &Page, _| {
        page.select("select[name=mode]", "classic").await?;
        page.fill(".composer textarea", "Write one.txt\n").await?;
        page.wait_css(".approval").await?;
        page.select(".approval select.scope-choice", "conversation")
            .await?;
        page.click(".approval button.approve").await?;
        page.wait_text(".prompt.state-completed", "Wrote one.")
            .await?;
        page.wait_text(".scopes", "fs.write").await?;
        page.shot("scope-listed").await?;
        page.axe("the scopes list").await?;
        page.fill(".composer textarea", "Write two.txt\n").await?;
        page.wait_text(".prompt.state-completed:last-child", "Wrote two.")
            .await?;
        page.wait_text(
            ".prompt:last-child .decision",
            "approved by a scope on fs.write that alice granted",
        )
        .await?;
        page.click(".scopes button.revoke").await?;
        page.wait_until(
            "return !document.querySelector('.scopes')",
            vec![],
            "the scope to be revoked",
        )
        .await?;
        Ok(())
    }) else {
        return;
    };
    assert!(root.join("two.txt").exists());
}

/// The calls of one classic round that need approval are put to the person as one list: one
/// is left unticked, and only the ticked ones are written.
#[test]
fn the_calls_of_one_round_are_shown_as_one_list_and_approved_in_part() {
    let turns = "- toolCalls:\n    - { name: fs.write, input: { path: x.txt, content: x } }\n    - { name: fs.write, input: { path: y.txt, content: y } }\n    - { name: fs.write, input: { path: z.txt, content: z } }\n- text: Wrote x and z.\n";
    let Some(root) = in_a_browser("playground-batch", turns, &[], async |page: &Page, _| {
        page.select("select[name=mode]", "classic").await?;
        page.fill(".composer textarea", "Write x, y and z\n")
            .await?;
        page.wait_count(".approval.plan .plan-call", 3).await?;
        page.wait_text(".approval.plan h2", "Approve these 3 calls?")
            .await?;
        page.wait_text(".approval.plan .plan-call[data-call='1']", "y.txt")
            .await?;
        page.shot("batch-view").await?;
        page.axe("calls decided together").await?;
        page.click(".plan-call[data-call='1'] input[type=checkbox]")
            .await?;
        page.wait_text(".approval.plan button.approve", "Approve 2 of 3")
            .await?;
        page.click(".approval.plan button.approve").await?;
        page.wait_text(".prompt.state-completed", "Wrote x and z.")
            .await?;
        page.wait_text(".prompt.state-completed .decision", "call 2 of 3")
            .await?;
        Ok(())
    }) else {
        return;
    };
    assert!(root.join("x.txt").exists() && root.join("z.txt").exists());
    assert!(!root.join("y.txt").exists(), "the write left out ran");
}

/// Runs `scenario` in the playground, in a browser, against a server of its own: `turns`
/// play the model, `files` are put in the fs root (returned, for what the test checks after),
/// and the page opens signed in as alice. The browser and the server stop after, and any
/// error in the browser console fails the test. `None` without a browser.
fn in_a_browser(
    name: &str,
    turns: &str,
    files: &[(&str, &str)],
    scenario: impl AsyncFnOnce(&Page, &str) -> Outcome,
) -> Option<PathBuf> {
    let browser = Browser::find()?;
    let _one = ONE_BROWSER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = scratch().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let root = dir.join("files");
    std::fs::create_dir_all(&root).unwrap();
    for (file, content) in files {
        std::fs::write(root.join(file), content).unwrap();
    }
    let config = dir.join("agentic.toml");
    std::fs::write(&config, format!("[fs]\nroot = \"{}\"\n", root.display())).unwrap();
    let database = format!("sqlite://{}", dir.join("agentic.db").display());
    let turns = script(name, turns);
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("playground");
    std::fs::create_dir_all(&shots).unwrap();
    let (mut server, base, _) = serve_with(
        &turns,
        &database,
        &["--config", config.to_str().unwrap()],
        &[],
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let outcome = runtime.block_on(async {
        let proxy = Proxy::start(&base).await;
        let page = Page::open(&browser, &proxy.url, &shots).await;
        let result = async {
            page.goto("/").await?;
            page.fill("input[name=user]", &format!("alice{ENTER}"))
                .await?;
            scenario(&page, &base).await
        }
        .await;
        let errors = page.console_errors().await;
        page.client.clone().close().await.ok();
        result.map(|()| errors)
    });
    let _ = server.kill();
    let _ = server.wait();
    let errors = outcome.unwrap();
    let unexpected = unexpected_errors(&errors, &[]);
    assert!(
        unexpected.is_empty(),
        "errors in the browser console: {unexpected:?}"
    );
    Some(root)
}

async fn scenarios(page: &Page, proxy: &Proxy, base: &str) -> Outcome {
    // Sign-in: the token is asked for, and a missing one is explained.
    page.goto("/").await?;
    page.wait_css("form[aria-labelledby=signin-title]").await?;
    page.shot("01-sign-in").await?;
    page.fill("input[name=user]", "alice").await?;
    page.click("button[type=submit]").await?;
    page.wait_text(".signin .error", "needs a token").await?;
    page.shot("02-sign-in-needs-token").await?;
    page.axe("the sign-in").await?;
    page.fill("input[name=token]", TOKEN).await?;
    page.click("button[type=submit]").await?;
    page.wait_css(".composer textarea").await?;
    page.wait_text(".stream", "live").await?;
    // The token is kept for this tab only unless "remember me" is ticked.
    let kept = page
        .js("return [localStorage.getItem('agentic.session'), JSON.parse(sessionStorage.getItem('agentic.session')).token]")
        .await?;
    if kept != json!([null, TOKEN]) {
        return Err(format!("the session is kept as {kept}"));
    }
    // The "auto" theme follows the system as it changes.
    for scheme in ["dark", "light"] {
        page.cdp(
            "Emulation.setEmulatedMedia",
            json!({ "features": [{ "name": "prefers-color-scheme", "value": scheme }] }),
        )
        .await?;
        page.wait_until(
            "return document.documentElement.dataset.theme === arguments[0]",
            vec![json!(scheme)],
            &format!("the {scheme} theme"),
        )
        .await?;
    }

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
    // Its raw HTML reads as the text it is.
    page.wait_text(".markdown", "<img src=x onerror=").await?;
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
    page.wait_text(".approval h2", "fs.write").await?;
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
    // The call says who approved it, and what the request said.
    page.wait_text(".execution .tool .decided-by", "approved by alice")
        .await?;
    page.wait_text(".execution .tool .decision", "asked: ")
        .await?;

    // 3b. An error points at its line.
    page.fill(".composer textarea", "Count them\n").await?;
    page.wait_text(".markdown", "Recovered after the error.")
        .await?;
    page.wait_text(".execution .line.mark-error", "throw new Error")
        .await?;
    page.wait_text(".execution pre.error", "not counted yet")
        .await?;
    page.shot("06-error-line").await?;
    // Code, marked lines and errors can be read in both themes.
    page.axe("a conversation with an error line, light").await?;
    page.click(".topbar button[aria-label='Theme: auto']")
        .await?;
    page.wait_until(
        "return document.documentElement.dataset.theme === 'dark'",
        vec![],
        "the dark theme",
    )
    .await?;
    page.axe("a conversation with an error line, dark").await?;
    page.click(".topbar button[aria-label='Theme: dark']")
        .await?;
    page.click(".topbar button[aria-label='Theme: light']")
        .await?;
    page.wait_css(".topbar button[aria-label='Theme: auto']")
        .await?;

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
    // A rejection is a decision, not a failure: shown as rejected, not as a red error.
    page.wait_text(".tool.rejected .badge.rejected", "rejected")
        .await?;
    page.wait_text(".tool.rejected pre.ended", "Rejected by user: not today")
        .await?;
    if page
        .count(".tool.rejected pre.error, .tool.rejected.error, .tool.rejected .call-time")
        .await?
        != 0
    {
        return Err("the rejected call is shown as an error, or with the time it waited".into());
    }
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

    // 7c. A script that prints progress, then waits twice: every call stays under the script,
    // each approval can be given from the keyboard, and the focus follows the decisions.
    page.click("button.new").await?;
    page.wait_text("h1.conversation-title", "New conversation")
        .await?;
    page.fill(".composer textarea", "Write a note, then list the files\n")
        .await?;
    page.wait_text(".approval h2", "fs.write").await?;
    page.wait_text(".execution .calls .tool.waiting", "fs.write")
        .await?;
    page.wait_text(".execution .paused-note", "line 2").await?;
    page.wait_text(".execution .line.mark-paused", "fs.write")
        .await?;
    page.press(".approval button.approve", ENTER).await?;
    page.wait_text(".approval h2", "shell.exec").await?;
    page.wait_text(".execution .calls .tool.waiting", "shell.exec")
        .await?;
    page.wait_text(".execution .paused-note", "line 4").await?;
    page.wait_text(".approval .paused-code .line.mark-paused", "shell.exec")
        .await?;
    page.wait_text(".approval p code", "ls").await?;
    page.wait_until(
        "const a = document.activeElement; return !!a && !!a.closest('.approval') && a.closest('.approval').textContent.includes('shell.exec')",
        vec![],
        "the focus to move to the second approval",
    )
    .await?;
    page.shot("11b-second-approval").await?;
    page.axe("a second approval").await?;
    page.press(".approval button.approve", ENTER).await?;
    page.wait_text(".markdown", "Wrote two.txt and listed the files.")
        .await?;
    page.wait_until(
        "return document.activeElement === document.querySelector('.composer textarea')",
        vec![],
        "the focus to move to the message box",
    )
    .await?;
    let grouped = "const p = document.querySelector('.prompt:last-child'); \
        return [p.querySelectorAll('.execution .calls .tool').length, p.querySelectorAll('.tool').length, \
        p.querySelector('.execution .calls .label').textContent, p.querySelectorAll('.markdown').length]";
    let expected = json!([2, 2, "2 tool calls", 3]);
    let shown = page.js(grouped).await?;
    if shown != expected {
        return Err(format!(
            "calls, under the script and in all, and texts: {shown}"
        ));
    }
    page.client.refresh().await.map_err(|e| e.to_string())?;
    page.wait_text(".markdown", "Wrote two.txt and listed the files.")
        .await?;
    let shown = page.js(grouped).await?;
    if shown != expected {
        return Err(format!("after a reload, calls and texts: {shown}"));
    }
    // A tool card says it opens.
    let cue = page
        .js("return getComputedStyle(document.querySelector('.tool > summary'), '::before').content")
        .await?;
    if cue != json!("\"▸\"") {
        return Err(format!("a closed tool card's cue is {cue}"));
    }

    // Copy the answer, retry the prompt.
    page.js("window.copied = null; navigator.clipboard.writeText = async (text) => { window.copied = text; }")
        .await?;
    page.click(".prompt:last-child button.copy").await?;
    page.wait_text(".prompt:last-child button.copy", "Copied")
        .await?;
    let copied = page.js("return window.copied").await?;
    if !copied.as_str().is_some_and(|text| {
        text.contains("Writing the note first.")
            && text.ends_with("Wrote two.txt and listed the files.")
    }) {
        return Err(format!("copied {copied}"));
    }
    page.click(".prompt:last-child button.retry").await?;
    page.wait_text(".markdown", "Retried without writing.")
        .await?;
    let inputs = page
        .js("return [...document.querySelectorAll('.prompt .user-text')].map(e => e.textContent)")
        .await?;
    if inputs
        != json!([
            "Write a note, then list the files",
            "Write a note, then list the files"
        ])
    {
        return Err(format!("after Retry the prompts are {inputs}"));
    }

    // A call whose prompt is stopped while it waits is shown as cancelled, not as an error.
    page.fill(".composer textarea", "Write never.txt\n").await?;
    page.wait_text(".approval h2", "fs.write").await?;
    page.click("button.stop").await?;
    page.wait_text(
        ".prompt:last-child .tool.cancelled .badge.cancelled",
        "cancelled",
    )
    .await?;
    page.wait_text(".prompt:last-child .tool.cancelled pre.ended", "Cancelled")
        .await?;
    let failed = page
        .count(".prompt:last-child .tool.error, .prompt:last-child .execution.error, .prompt:last-child pre.error")
        .await?;
    if failed != 0 {
        return Err(format!(
            "{failed} parts of the stopped prompt are shown as errors"
        ));
    }

    // Rename, export and delete the conversation.
    page.click(".conversation-actions button.rename").await?;
    page.fill(
        ".conversation-header input[name=title]",
        &format!("Two approvals{ENTER}"),
    )
    .await?;
    page.wait_text("h1.conversation-title", "Two approvals")
        .await?;
    page.wait_text(".conversations a.current .title", "Two approvals")
        .await?;
    page.client.refresh().await.map_err(|e| e.to_string())?;
    page.wait_text("h1.conversation-title", "Two approvals")
        .await?;
    // The page's policy keeps it from reading blob: URLs back, so the download is caught as
    // the page makes it: the blob, and the link it clicks.
    page.js(
        "window.exported = null; const click = HTMLAnchorElement.prototype.click; \
         const made = URL.createObjectURL; let blob = null; \
         URL.createObjectURL = (object) => { blob = object; return made(object); }; \
         HTMLAnchorElement.prototype.click = function () { \
           HTMLAnchorElement.prototype.click = click; URL.createObjectURL = made; \
           window.exported = { name: this.download, blob }; }",
    )
    .await?;
    page.click(".conversation-actions button.export").await?;
    page.wait_until("return !!window.exported", vec![], "the export")
        .await?;
    let exported = page
        .js_async(
            "const done = arguments[0]; window.exported.blob.text().then((text) => JSON.parse(text)) \
             .then((c) => done([window.exported.name, c.title, c.prompts.length]), (e) => done(String(e)))",
        )
        .await?;
    if exported != json!(["Two-approvals.json", "Two approvals", 3]) {
        return Err(format!("exported {exported}"));
    }
    let renamed = page.js("return location.hash").await?;
    page.click(".conversation-actions button.delete").await?;
    page.click(".conversation-header button.confirm-delete")
        .await?;
    page.wait_until(
        "return location.hash === '#/' || location.hash === ''",
        vec![],
        "the way back from the deleted conversation",
    )
    .await?;
    page.wait_text(".conversations", "What time is it?").await?;
    if page
        .js("return document.querySelector('.conversations').textContent.includes('Two approvals')")
        .await?
        != json!(false)
    {
        return Err("the deleted conversation is still listed".into());
    }
    page.goto(&format!("/{}", renamed.as_str().unwrap_or_default()))
        .await?;
    page.wait_text(".conversation .error", "not yours").await?;

    // Tools: browse, read the schema, invoke from a form; approval-bound tools say so.
    page.goto("/#/tools").await?;
    page.wait_text(".tool-list", "time.now").await?;
    page.click_text(".tool-list a", "fs.list").await?;
    page.wait_text(".tool-detail h2", "fs.list").await?;
    page.click(".tool-detail button[type=submit]").await?;
    page.wait_text(".tool-detail .result", "approved.txt")
        .await?;
    page.shot("12-tools").await?;
    page.goto("/#/tools/fs.write").await?;
    page.wait_text(".tool-detail h2", "fs.write").await?;
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
    // The filter left from before never hides the tool that is open.
    page.fill(".tool-list input[type=search]", "fs.").await?;
    page.goto("/#/tools/memory.write").await?;
    page.wait_text(".tool-detail h2", "memory.write").await?;
    page.wait_text(".tool-list a.current", "memory.write")
        .await?;
    // Required fields first; a choice is a select; backticks are code, not characters.
    let form = page
        .js("return [[...document.querySelectorAll('.tool-form [name]')].map(e => e.name + ':' + e.tagName.toLowerCase()), \
             [...document.querySelectorAll('.tool-form select[name=tier] option')].map(o => o.value).filter(Boolean), \
             [...document.querySelectorAll('.tool-form label')].some(l => l.textContent.includes('`')), \
             document.querySelectorAll('.tool-form label .muted code').length > 0]")
        .await?;
    let expected = json!([
        [
            "tier:select",
            "label:input",
            "content:input",
            "mode:select",
            "permission:select"
        ],
        ["core", "working", "archival"],
        false,
        true
    ]);
    if form != expected {
        return Err(format!("memory.write's form: {form}"));
    }
    page.shot("12b-tool-form").await?;
    page.axe("a tool's form").await?;
    page.goto("/#/tools/memory.list").await?;
    page.wait_text(".tool-detail h2", "memory.list").await?;
    page.select(".tool-detail select[name=tier]", "core")
        .await?;
    page.click(".tool-detail button[type=submit]").await?;
    page.wait_css(".tool-detail .result").await?;
    if page.count(".tool-detail .error").await? != 0 {
        return Err("memory.list with a tier chosen failed".into());
    }

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
    page.axe("a long conversation at phone width, dark").await?;
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
    // Escape closes it, and the focus goes back to its button.
    page.press(".menu-toggle", '\u{e00c}').await?;
    page.wait_until(
        "return getComputedStyle(document.querySelector('.sidebar')).display === 'none' \
         && document.activeElement === document.querySelector('.menu-toggle')",
        vec![],
        "Escape to close the menu",
    )
    .await?;
    page.click(".menu-toggle").await?;
    page.wait_until(
        "return getComputedStyle(document.querySelector('.sidebar')).display !== 'none'",
        vec![],
        "the menu to open again",
    )
    .await?;
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

    // A saved session the server no longer takes goes back to the sign-in, and says why.
    page.js("sessionStorage.setItem('agentic.session', JSON.stringify({ user: 'alice', token: 'stale' })); location.reload()")
        .await?;
    page.wait_text(".signin .error", "sign in again").await?;
    let user = page
        .js("return document.querySelector('input[name=user]').value")
        .await?;
    if user != json!("alice") {
        return Err(format!("the sign-in forgot the user: {user}"));
    }
    if page
        .js("return sessionStorage.getItem('agentic.session')")
        .await?
        != Value::Null
    {
        return Err("the refused session is still kept".into());
    }
    // Signing in again, asking to be remembered, keeps the session across tabs.
    page.fill("input[name=token]", TOKEN).await?;
    page.click("input[name=remember]").await?;
    page.click("button[type=submit]").await?;
    page.wait_css(".composer textarea").await?;
    let kept = page
        .js("return [JSON.parse(localStorage.getItem('agentic.session')).token, sessionStorage.getItem('agentic.session')]")
        .await?;
    if kept != json!([TOKEN, null]) {
        return Err(format!("a remembered session is kept as {kept}"));
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
    wait_state(base, user, prompt, "completed").await
}

/// [`wait_completed`] for any state.
async fn wait_state(base: &str, user: &str, prompt: &str, state: &str) -> Outcome {
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
                if stored["state"] == state {
                    return Ok(());
                }
                format!("{status} {stored}")
            }
            Err(error) => error_chain(&error),
        };
        if Instant::now() > deadline {
            return Err(format!("prompt {prompt} never got to {state}: {last}"));
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
    upstream: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Proxy {
    async fn start(base: &str) -> Self {
        let upstream = std::sync::Arc::new(std::sync::Mutex::new(
            base.trim_start_matches("http://").to_owned(),
        ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (down, watching) = tokio::sync::watch::channel(false);
        let target = upstream.clone();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let mut watching = watching.clone();
                if *watching.borrow() {
                    continue; // dropped: the connection closes unanswered
                }
                let upstream = target.lock().unwrap().clone();
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
        Self {
            url,
            down,
            upstream,
        }
    }

    /// Sends new connections to the server at `base` (one that replaced the first).
    fn retarget(&self, base: &str) {
        *self.upstream.lock().unwrap() = base.trim_start_matches("http://").to_owned();
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
        let axe = axe_path();
        if chromium.is_some() && driver.is_some() && !axe.exists() {
            Requirement::Browser.missing(&format!(
                "{} is missing (npm ci --prefix crates/api/web)",
                axe.display()
            ));
            return None;
        }
        match (chromium, driver) {
            (Some(chromium), Some(driver)) => Some(Self { chromium, driver }),
            _ => {
                Requirement::Browser.missing(
                    "chromium or chromedriver is missing (apt-get install chromium chromium-driver)",
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

    /// Runs `script` as an async WebDriver script: it ends by calling `arguments[0]`.
    async fn js_async(&self, script: &str) -> Result<Value, String> {
        self.client
            .execute_async(script, vec![])
            .await
            .map_err(|e| format!("{script}: {e}"))
    }

    /// Sends `key` to the element matching `css`, as a keyboard would (WebDriver focuses it).
    async fn press(&self, css: &str, key: char) -> Outcome {
        self.wait_css(css).await?;
        self.client
            .find(Locator::Css(css))
            .await
            .map_err(|e| format!("{css}: {e}"))?
            .send_keys(&key.to_string())
            .await
            .map_err(|e| format!("pressing {key:?} on {css}: {e}"))
    }

    /// A Chrome DevTools command, through chromedriver.
    async fn cdp(&self, command: &str, parameters: Value) -> Outcome {
        #[derive(Debug)]
        struct Cdp(String);
        impl fantoccini::wd::WebDriverCompatibleCommand for Cdp {
            fn endpoint(
                &self,
                base_url: &url::Url,
                session_id: Option<&str>,
            ) -> Result<url::Url, url::ParseError> {
                base_url.join(&format!(
                    "session/{}/goog/cdp/execute",
                    session_id.unwrap_or_default()
                ))
            }
            fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
                (http::Method::POST, Some(self.0.clone()))
            }
        }
        let body = json!({ "cmd": command, "params": parameters }).to_string();
        self.client
            .issue_cmd(Cdp(body))
            .await
            .map(|_| ())
            .map_err(|e| format!("{command}: {e}"))
    }

    /// Runs axe-core on the page as it is; fails on any serious or critical violation.
    async fn axe(&self, what: &str) -> Outcome {
        let loaded = self.js("return typeof window.axe === 'object'").await?;
        if loaded != json!(true) {
            let source = std::fs::read_to_string(axe_path())
                .map_err(|e| format!("{}: {e}", axe_path().display()))?;
            self.js(&format!("{source}\n;return true")).await?;
        }
        let found = self
            .js_async(
                "const done = arguments[0]; \
                 axe.run(document, { resultTypes: ['violations'] }).then((results) => done(results.violations \
                   .filter((v) => v.impact === 'serious' || v.impact === 'critical') \
                   .map((v) => `${v.id} (${v.impact}): ${v.help}: ` + v.nodes.slice(0, 5) \
                     .map((n) => n.target.join(' ') + ' ' + n.failureSummary.replace(/\\s+/g, ' ')).join(' | '))), \
                   (error) => done([`axe failed: ${error}`]))",
            )
            .await?;
        match found.as_array() {
            Some(violations) if violations.is_empty() => Ok(()),
            _ => {
                let _ = self.shot(&format!("axe-{}", what.replace(' ', "-"))).await;
                Err(format!("accessibility of {what}: {found:#}"))
            }
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

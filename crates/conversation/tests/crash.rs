#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A process killed with SIGKILL mid-prompt loses nothing it committed: after a restart the
//! prompt is `interrupted`, every output seen before the kill is there, the SQLite file is
//! sound, and the conversation takes a new prompt.
//!
//! Its own harness: run plain, it is the test; run with `AGENTIC_CRASH_CHILD` set, it is the
//! child process that runs the prompt and gets killed.

mod support;

use std::time::{Duration, Instant};

use agentic_conversation::PromptRequest;
use agentic_core::{PromptOutput, PromptState};
use support::databases;
use tokio::io::{AsyncBufReadExt, BufReader};

const CHILD: &str = "AGENTIC_CRASH_CHILD";

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if std::env::var_os(CHILD).is_some() {
        runtime.block_on(child());
        return;
    }
    runtime.block_on(a_prompt_killed_mid_run_is_interrupted_with_its_committed_outputs_kept());
    println!("test a_prompt_killed_mid_run_is_interrupted_with_its_committed_outputs_kept ... ok");
}

/// Runs one prompt in a new conversation; prints `conversation <id>` and `prompt <id>` as soon
/// as the prompt is stored.
async fn child() {
    use std::io::Write as _;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, turns, input] = args.as_slice() else {
        panic!("usage: crash <database-url> <turns.yaml> <input>");
    };
    let provider = std::sync::Arc::new(
        agentic_plugin_script::ScriptedProvider::from_file(std::path::Path::new(turns)).unwrap(),
    );
    let runtime = agentic_core::Runtime::builder()
        .plugin(agentic_testing::kit::plugin())
        .provider(provider)
        .build()
        .await
        .unwrap();
    let service =
        agentic_conversation::ConversationService::open(std::sync::Arc::new(runtime), url)
            .await
            .unwrap();
    let mut conversation = service.create("alice").await.unwrap();
    let started = conversation
        .start(PromptRequest {
            input: Some(input.clone()),
            ..PromptRequest::default()
        })
        .await
        .unwrap();
    let mut stdout = std::io::stdout();
    writeln!(stdout, "conversation {}", started.conversation_id()).unwrap();
    writeln!(stdout, "prompt {}", started.prompt_id()).unwrap();
    stdout.flush().unwrap();
    let prompt = started.run().await.unwrap();
    writeln!(stdout, "state {}", prompt.state.as_str()).unwrap();
}

async fn a_prompt_killed_mid_run_is_interrupted_with_its_committed_outputs_kept() {
    for db in databases().await {
        let dir = tempfile::tempdir().unwrap();
        let turns = dir.path().join("turns.yaml");
        let mut script = String::new();
        for round in 0..40 {
            script.push_str(&format!(
                "- toolCalls:\n    - {{ name: kit.echo, input: {{ text: round {round} }} }}\n  delayMs: 100\n"
            ));
        }
        script.push_str("- text: never reached\n");
        std::fs::write(&turns, script).unwrap();

        let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
            .env(CHILD, "1")
            .args([db.url.as_str(), turns.to_str().unwrap(), "Echo forty times"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let conversation_id = lines
            .next_line()
            .await
            .unwrap()
            .unwrap()
            .strip_prefix("conversation ")
            .unwrap()
            .to_owned();
        let prompt_id = lines
            .next_line()
            .await
            .unwrap()
            .unwrap()
            .strip_prefix("prompt ")
            .unwrap()
            .to_owned();

        // Watch the database from here until a few outputs are committed, then kill.
        let watcher = support::store(&db).await;
        let deadline = Instant::now() + Duration::from_secs(60);
        let seen = loop {
            let prompts = watcher
                .conversation_prompts(&conversation_id)
                .await
                .unwrap();
            let prompt = prompts
                .iter()
                .find(|stored| stored.prompt.id == prompt_id)
                .map(|stored| stored.prompt.clone());
            if let Some(prompt) = prompt
                && prompt.output.len() >= 5
            {
                break prompt;
            }
            assert!(
                Instant::now() < deadline,
                "{}: the child never got going",
                db.name
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        child.start_kill().unwrap(); // SIGKILL
        let status = child.wait().await.unwrap();
        assert!(!status.success());
        watcher.close().await.unwrap();

        // Restart.
        let (service, provider) = support::service(&db, "- text: back again\n").await;
        assert!(
            service.recovery().interrupted.contains(&prompt_id),
            "{}: {:?}",
            db.name,
            service.recovery()
        );
        let stored = service.prompt("alice", &prompt_id).await.unwrap().prompt;
        assert_eq!(stored.state, PromptState::Interrupted, "{}", db.name);
        assert!(stored.output.len() >= seen.output.len());
        for (before, after) in seen.output.iter().zip(&stored.output) {
            assert_eq!(before.id(), after.id());
            if let (PromptOutput::Tool(before), PromptOutput::Tool(after)) = (before, after)
                && !before.result.is_pending()
            {
                assert_eq!(before.result, after.result, "{}", db.name);
            }
        }
        for output in &stored.output {
            if let PromptOutput::Tool(tool) = output {
                assert!(!tool.result.is_pending(), "{}: {tool:?}", db.name);
            }
        }
        assert_eq!(service.store().integrity_check().await.unwrap(), "ok");

        let mut conversation = service.get("alice", &conversation_id).await.unwrap();
        let next = conversation
            .prompt(PromptRequest {
                input: Some("Are you there?".into()),
                ..PromptRequest::default()
            })
            .await
            .unwrap();
        assert_eq!(next.state, PromptState::Completed, "{}", db.name);
        // The new prompt's history holds the interrupted one, every call answered.
        let messages = &provider.requests()[0].messages;
        let calls: usize = messages
            .iter()
            .map(|message| message.tool_calls.len())
            .sum();
        assert_eq!(calls, stored.output.len(), "{}", db.name);
    }
}

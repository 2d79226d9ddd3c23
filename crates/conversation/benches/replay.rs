//! `cargo xtask bench replay`: a code-mode script makes 1,000 tool calls (`kit.echo`, which
//! answers at once) and then waits for approval. Measured side by side, five rounds on SQLite:
//!
//! - live: from the prompt's start to its wait, every call run and recorded;
//! - replay: after a restart (a new runtime and service on the same file), from the approval
//!   to the prompt's end: the script runs again in a fresh worker, its 1,000 calls answered
//!   from the timeline, then the approved call and `done()` run live.
//!
//! Prints the medians and their ratio (target: replay ≤ 2× live).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentic_conversation::{ConversationService, PromptRequest};
use agentic_core::{Config, PromptOutput, PromptState, Runtime};
use agentic_plugin_script::ScriptedProvider;

const CALLS: usize = 1_000;
const ROUNDS: usize = 5;

fn main() {
    // The bench is its own sandbox worker, as the `agentic` binary is.
    agentic_interpreter::run_worker_if_requested();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}

async fn service(url: &str, turns: &str) -> ConversationService {
    let provider = Arc::new(ScriptedProvider::from_yaml(turns).unwrap());
    let runtime = Runtime::builder()
        .config(Config::from_value(serde_json::json!({
            "interpreter": { "sandbox": { "maxToolCalls": CALLS + 10 } }
        })))
        .plugin(agentic_testing::kit::plugin())
        .plugin(Arc::new(agentic_interpreter::InterpreterPlugin::default()))
        .provider(provider)
        .build()
        .await
        .unwrap();
    ConversationService::open(Arc::new(runtime), url)
        .await
        .unwrap()
}

async fn run() {
    let script = format!(
        "- code: |\n    let last;\n    for (let i = 0; i < {CALLS}; i++) {{ last = kitEcho({{ text: \"call \" + i }}); }}\n    \
         const deleted = kitDelete({{ path: \"notes.txt\" }});\n    done(last + \", then \" + deleted);\n"
    );
    let mut live = Vec::new();
    let mut replay = Vec::new();
    for round in 0..ROUNDS {
        let dir = tempfile::tempdir().unwrap();
        let url = agentic_conversation::sqlite_url(&dir.path().join("replay.db"));
        let first = service(&url, &script).await;
        let mut conversation = first.create("alice").await.unwrap();
        let started = Instant::now();
        let waiting = conversation
            .prompt(PromptRequest {
                input: Some("Echo a thousand times".to_owned()),
                mode: Some("code".to_owned()),
                ..PromptRequest::default()
            })
            .await
            .unwrap();
        let live_took = started.elapsed();
        assert_eq!(
            waiting.state,
            PromptState::WaitingForApproval,
            "{waiting:?}"
        );
        let call = waiting
            .output
            .iter()
            .rev()
            .find_map(|output| match output {
                PromptOutput::Tool(tool) if tool.function == "kit.delete" => Some(tool.id.clone()),
                _ => None,
            })
            .unwrap();
        drop(conversation);
        first.shutdown().await.unwrap();
        drop(first);

        let second = service(&url, "- text: unexpected\n").await;
        let started = Instant::now();
        let done = second
            .decide("alice", &waiting.id, &call, agentic_core::Verdict::Approve)
            .await
            .unwrap();
        let replay_took = started.elapsed();
        assert_eq!(done.state, PromptState::Completed, "{:?}", done.error);
        assert!(
            done.text().ends_with("call 999, then deleted notes.txt"),
            "{}",
            done.text()
        );
        eprintln!(
            "round {}: live {:.0} ms, replay {:.0} ms",
            round + 1,
            live_took.as_secs_f64() * 1000.0,
            replay_took.as_secs_f64() * 1000.0
        );
        live.push(live_took);
        replay.push(replay_took);
        second.shutdown().await.unwrap();
    }
    let median = |times: &mut Vec<Duration>| {
        times.sort();
        times[times.len() / 2].as_secs_f64() * 1000.0
    };
    let (live, replay) = (median(&mut live), median(&mut replay));
    println!(
        "| {CALLS} calls, median of {ROUNDS} | live | replayed after a restart | replay ÷ live |"
    );
    println!("| --- | --- | --- | --- |");
    println!(
        "| SQLite, isolated worker | {live:.0} ms | {replay:.0} ms | {:.2} |",
        replay / live
    );
}

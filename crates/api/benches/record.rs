//! `cargo xtask bench record`: record and replay at the size of a long prompt. A code-mode
//! program makes 1,000 tool calls (`kit.echo`, which answers at once) and the prompt is
//! stored in SQLite; then, side by side, median of 7 rounds:
//!
//! - export: the stored prompt (1,000+ outputs and its journal) read and written as a test
//!   case in YAML, as `GET /api/prompts/{id}/export?as=test` does (target: ≤ 1 s);
//! - replay: the case played on a fresh runtime with every call answered from its recording,
//!   beside the same case with `live: ["*"]`, where every call runs the tool; their difference
//!   per call is what replaying adds (target: ≤ 0.1 ms per call);
//! - lookup: the recording's answer to each of 1,000 calls in order, alone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentic_conversation::{ConversationService, PromptRequest};
use agentic_core::{Config, PromptState, Runtime};
use agentic_plugin_script::{ScriptedProvider, TimelineCase};

const CALLS: usize = 1_000;
const ROUNDS: usize = 7;

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

fn config() -> Config {
    Config::from_value(serde_json::json!({
        "interpreter": { "sandbox": { "maxToolCalls": CALLS + 10 } }
    }))
}

async fn runtime(provider: Arc<ScriptedProvider>) -> Runtime {
    Runtime::builder()
        .config(config())
        .plugin(agentic_testing::kit::plugin())
        .plugin(Arc::new(agentic_interpreter::InterpreterPlugin::default()))
        .provider(provider)
        .build()
        .await
        .unwrap()
}

fn median(times: &mut [Duration]) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1000.0
}

async fn play(case: &TimelineCase) -> Duration {
    let provider = agentic_plugin_script::provider_of(case);
    let runtime = runtime(provider.clone()).await;
    let started = Instant::now();
    let played = agentic_plugin_script::play(case, &runtime, &provider, "alice")
        .await
        .unwrap();
    let took = started.elapsed();
    assert_eq!(
        played.prompt.state,
        PromptState::Completed,
        "{:?}",
        played.prompt.error
    );
    assert!(played.divergences.is_empty());
    took
}

async fn run() {
    let script = format!(
        "- code: |\n    let last;\n    for (let i = 0; i < {CALLS}; i++) {{ last = kitEcho({{ text: \"call \" + i }}); }}\n    done(last);\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let url = agentic_conversation::sqlite_url(&dir.path().join("record.db"));
    let provider = Arc::new(ScriptedProvider::from_yaml(&script).unwrap());
    let service = ConversationService::open(Arc::new(runtime(provider).await), &url)
        .await
        .unwrap();
    let mut conversation = service.create("alice").await.unwrap();
    let prompt = conversation
        .prompt(PromptRequest {
            input: Some("Echo a thousand times".to_owned()),
            mode: Some("code".to_owned()),
            ..PromptRequest::default()
        })
        .await
        .unwrap();
    assert_eq!(prompt.state, PromptState::Completed, "{:?}", prompt.error);
    let outputs = prompt.output.len();

    let mut export = Vec::new();
    let mut yaml = String::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let case = agentic_api::export::export_case(&service, "alice", &prompt.id)
            .await
            .unwrap();
        yaml = agentic_api::export::case_yaml(&case).unwrap();
        export.push(started.elapsed());
    }
    let case = TimelineCase::from_yaml(&yaml).unwrap();
    assert_eq!(case.recorded.as_ref().unwrap().calls.len(), CALLS);
    let mut live_case = case.clone();
    live_case.live = vec!["*".to_owned()];

    let (mut replayed, mut live) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        // Alternated, so the machine's drift falls on both.
        let (first, second) = if round % 2 == 0 {
            (play(&case).await, play(&live_case).await)
        } else {
            let live = play(&live_case).await;
            (play(&case).await, live)
        };
        replayed.push(first);
        live.push(second);
    }

    let calls = case.recorded.as_ref().unwrap().calls.clone();
    let mut lookup = Vec::new();
    for _ in 0..ROUNDS {
        let replay = agentic_core::replay::Replay::new(calls.clone(), Vec::new(), Vec::new());
        let started = Instant::now();
        for call in &calls {
            replay.answer(&call.tool, &call.input).unwrap();
        }
        lookup.push(started.elapsed());
    }

    let export = median(&mut export);
    let (replayed, live) = (median(&mut replayed), median(&mut live));
    let lookup = median(&mut lookup);
    println!("| median of {ROUNDS} | time | per call | target |");
    println!("| --- | --- | --- | --- |");
    println!(
        "| export of a {outputs}-output prompt ({} KB of YAML) | {export:.1} ms | | ≤ 1,000 ms |",
        yaml.len() / 1024
    );
    println!(
        "| replay, {CALLS} calls from the recording | {replayed:.0} ms | {:.3} ms | |",
        replayed / CALLS as f64
    );
    println!(
        "| the same, every call live (`live: [\"*\"]`) | {live:.0} ms | {:.3} ms | |",
        live / CALLS as f64
    );
    println!(
        "| replay − live | {:.0} ms | {:.3} ms | ≤ 0.1 ms per call |",
        replayed - live,
        (replayed - live) / CALLS as f64
    );
    println!(
        "| lookup alone, {CALLS} calls in order | {lookup:.2} ms | {:.4} ms | |",
        lookup / CALLS as f64
    );
}

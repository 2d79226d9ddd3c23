//! What a script reads besides its code, made repeatable: `Math.random()` follows the seed the
//! host gives, and `Date` returns the journaled times first, then reports each live reading
//! with the next host request. Both backends.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentic_interpreter::protocol::{
    Determinism, ExecuteRequest, HostReply, HostRequest, ToolBinding,
};
use agentic_interpreter::{Backend, Sandbox, SandboxConfig, SandboxEvent};
use serde_json::{Value, json};

fn sandbox(backend: Backend) -> Arc<Sandbox> {
    Sandbox::new(SandboxConfig {
        backend,
        pool_size: 1,
        ..SandboxConfig::default()
    })
}

/// Runs `code` with one tool, `kit.echo`; returns its value and the clock readings each
/// request reported.
async fn run(
    sandbox: &Arc<Sandbox>,
    code: &str,
    determinism: Determinism,
) -> (Value, Vec<Vec<i64>>) {
    let mut execution = sandbox
        .start(ExecuteRequest {
            code: code.to_owned(),
            tools: vec![ToolBinding {
                id: "kit.echo".to_owned(),
                function: Some("echo".to_owned()),
                aliases: Vec::new(),
                member: None,
                description: "Echoes".to_owned(),
                result: Default::default(),
            }],
            input: None,
            store: serde_json::Map::new(),
            limits: sandbox.config().script_limits(),
            same_tools_as_before: false,
            determinism,
        })
        .await;
    let mut readings = Vec::new();
    loop {
        match execution.next().await {
            SandboxEvent::Request { id, request, clock } => {
                readings.push(clock);
                let HostRequest::CallTool { input, .. } = request else {
                    panic!("unexpected request {request:?}");
                };
                execution.reply(id, HostReply::Value { value: input }).await;
            }
            SandboxEvent::Output(_) | SandboxEvent::Log(_) => {}
            SandboxEvent::Finished(outcome) => {
                let value = outcome
                    .result
                    .unwrap_or_else(|error| panic!("{code:?} failed: {}", error.describe()));
                return (value, readings);
            }
        }
    }
}

const RANDOM: &str = "return [Math.random(), Math.random(), Math.floor(Math.random() * 1000)];";

async fn random_follows_the_seed(backend: Backend) {
    let sandbox = sandbox(backend);
    let seeded = |seed| Determinism {
        seed: Some(seed),
        clock: Vec::new(),
    };
    let (first, _) = run(&sandbox, RANDOM, seeded(7)).await;
    let (again, _) = run(&sandbox, RANDOM, seeded(7)).await;
    let (other, _) = run(&sandbox, RANDOM, seeded(8)).await;
    assert_eq!(first, again);
    assert_ne!(first, other);
    for value in first.as_array().unwrap()[..2].iter() {
        let value = value.as_f64().unwrap();
        assert!((0.0..1.0).contains(&value), "{value} is not in [0, 1)");
    }
    // Without a seed, two runs differ.
    let (one, _) = run(&sandbox, RANDOM, Determinism::default()).await;
    let (two, _) = run(&sandbox, RANDOM, Determinism::default()).await;
    assert_ne!(one, two);
}

/// Reads the clock three ways around a tool call, then once more after it.
const CLOCK: &str = "const a = Date.now(); const b = new Date().getTime(); \
    echo({ n: 1 }); const c = Date.now(); echo({ n: 2 }); return [a, b, c, Date.now()];";

async fn the_clock_replays_then_runs_live(backend: Backend) {
    let sandbox = sandbox(backend);
    // Live: every reading is reported with the request after it.
    let (live, readings) = run(&sandbox, CLOCK, Determinism::default()).await;
    let live: Vec<i64> = serde_json::from_value(live).unwrap();
    assert_eq!(readings, vec![live[..2].to_vec(), vec![live[2]]]);

    // Replayed: the journaled times come back in order, are not reported again, and the
    // clock is live once they run out.
    let journal = vec![1_000, 2_000, 3_000];
    let (replayed, readings) = run(
        &sandbox,
        CLOCK,
        Determinism {
            seed: None,
            clock: journal.clone(),
        },
    )
    .await;
    let replayed: Vec<i64> = serde_json::from_value(replayed).unwrap();
    assert_eq!(replayed[..3], journal[..]);
    assert!(replayed[3] >= live[3], "the last reading is live");
    assert_eq!(readings, vec![Vec::<i64>::new(), Vec::new()]);
    // `Date()` and `new Date()` agree with `Date.now()`.
    let (text, _) = run(
        &sandbox,
        "return [new Date().toISOString(), Date.now()];",
        Determinism {
            seed: None,
            clock: vec![86_400_000, 5],
        },
    )
    .await;
    assert_eq!(text, json!(["1970-01-02T00:00:00.000Z", 5]));
}

/// Promises settle in order without the clock being read.
async fn promise_jobs_read_no_clock(backend: Backend) {
    let sandbox = sandbox(backend);
    let code = "const order = []; \
        (async () => { for (let i = 0; i < 50; i++) { await null; order.push(i); } })(); \
        Promise.resolve().then(() => order.push('then')); \
        await Promise.resolve(); echo({ n: 1 }); return order.length;";
    let (value, readings) = run(&sandbox, code, Determinism::default()).await;
    assert!(value.as_u64().unwrap() >= 1, "{value}");
    assert!(readings.iter().all(Vec::is_empty), "{readings:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolated_worker() {
    random_follows_the_seed(Backend::Isolated).await;
    the_clock_replays_then_runs_live(Backend::Isolated).await;
    promise_jobs_read_no_clock(Backend::Isolated).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_worker() {
    random_follows_the_seed(Backend::InProcess).await;
    the_clock_replays_then_runs_live(Backend::InProcess).await;
    promise_jobs_read_no_clock(Backend::InProcess).await;
}

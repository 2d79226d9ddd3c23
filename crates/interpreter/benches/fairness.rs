//! `cargo xtask bench fairness`: one user's honest scripts while another user runs four
//! endless loops, on the isolated backend. Reports the honest user's p50 and p99 alone and
//! beside the loops, with the sandbox's fair share (one running script per user, one per core)
//! and without it (every script runs at once, as before), side by side.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentic_interpreter as _;
use agentic_interpreter::protocol::ExecuteRequest;
use agentic_interpreter::{Backend, Sandbox, SandboxConfig, SandboxEvent};

const HONEST: &str = "let s = 0; for (let i = 0; i < 200000; i++) { s += i % 7; } s";
const HOG: &str = "while (true) {}";
const RUNS: usize = 40;
const HOGS: usize = 4;

fn request(code: &str, sandbox: &Sandbox) -> ExecuteRequest {
    ExecuteRequest {
        code: code.to_owned(),
        tools: Vec::new(),
        input: None,
        store: serde_json::Map::new(),
        limits: sandbox.config().script_limits(),
        same_tools_as_before: false,
        determinism: Default::default(),
    }
}

async fn run(sandbox: &Arc<Sandbox>, owner: &str, code: &str) -> Duration {
    let started = Instant::now();
    let mut execution = sandbox
        .start_with_wall_time(Some(owner), request(code, sandbox), None)
        .await;
    loop {
        if let SandboxEvent::Finished(_) = execution.next().await {
            return started.elapsed();
        }
    }
}

fn percentile(times: &mut [Duration], share: f64) -> f64 {
    times.sort();
    let index = ((times.len() as f64 - 1.0) * share).round() as usize;
    times[index].as_secs_f64() * 1000.0
}

/// The honest user's latencies (ms): p50 and p99 of `RUNS` scripts, one after another.
async fn honest(sandbox: &Arc<Sandbox>) -> (f64, f64) {
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        times.push(run(sandbox, "alice", HONEST).await);
    }
    (percentile(&mut times, 0.5), percentile(&mut times, 0.99))
}

async fn measure(fair: bool) -> [(f64, f64); 2] {
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    let config = SandboxConfig {
        backend: Backend::Isolated,
        wall_time_ms: 15_000,
        pool_size: HOGS + 2,
        max_running: if fair { cores } else { 1_000 },
        max_running_per_user: if fair { 1 } else { 1_000 },
        ..SandboxConfig::default()
    };
    let sandbox = Sandbox::new(config);
    sandbox.warm_up().await.unwrap();
    // Warm the honest path too.
    run(&sandbox, "alice", HONEST).await;
    let alone = honest(&sandbox).await;
    let hogs: Vec<_> = (0..HOGS)
        .map(|_| {
            let sandbox = sandbox.clone();
            tokio::spawn(async move { run(&sandbox, "mallory", HOG).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let beside = honest(&sandbox).await;
    for hog in hogs {
        hog.abort();
    }
    [alone, beside]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "{RUNS} honest scripts of one user, alone and beside {HOGS} endless loops of another \
         user (isolated workers, {} cores)",
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get)
    );
    println!(
        "| sandbox | alone p50 ms | alone p99 ms | beside p50 ms | beside p99 ms | p99 ratio |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for (name, fair) in [
        ("every script at once (before)", false),
        ("fair share (now)", true),
    ] {
        let [alone, beside] = runtime.block_on(measure(fair));
        println!(
            "| {name} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2}x |",
            alone.0,
            alone.1,
            beside.0,
            beside.1,
            beside.1 / alone.1
        );
    }
    // The endless loops still hold workers until their wall time; leave without waiting.
    runtime.shutdown_timeout(Duration::from_millis(100));
}

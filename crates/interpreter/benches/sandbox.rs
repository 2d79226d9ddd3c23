//! `cargo xtask bench sandbox`: per-iteration overhead and host-call throughput of the
//! sandbox, in process and isolated, printed as JSON for xtask to tabulate.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentic_interpreter as _;
use agentic_interpreter::protocol::{ExecuteRequest, HostReply, HostRequest, ToolBinding};
use agentic_interpreter::{Backend, Sandbox, SandboxConfig, SandboxEvent};
use serde_json::{Value, json};

const TOOLS: usize = 50;

const CALLS_10K: &str = "let s = 0; for (let i = 0; i < 10000; i++) { s = tool({ n: s }).n } s";

fn tools() -> Vec<ToolBinding> {
    (0..TOOLS)
        .map(|n| ToolBinding {
            id: format!("bench.tool-{n}"),
            function: Some(format!("benchTool{n}")),
            aliases: Vec::new(),
            member: None,
            description: format!("Benchmark tool number {n}"),
            result: Default::default(),
        })
        .chain(std::iter::once(ToolBinding {
            id: "bench.next".to_owned(),
            function: Some("tool".to_owned()),
            aliases: Vec::new(),
            member: None,
            description: "Adds one to n".to_owned(),
            result: Default::default(),
        }))
        .collect()
}

/// Runs one script, answering every tool call at once with `{n: input.n + 1}`.
async fn run(sandbox: &Arc<Sandbox>, code: &str, bindings: &[ToolBinding]) -> Value {
    let mut execution = sandbox
        .start(ExecuteRequest {
            code: code.to_owned(),
            tools: bindings.to_vec(),
            input: None,
            store: serde_json::Map::new(),
            limits: sandbox.config().script_limits(),
            same_tools_as_before: false,
            determinism: Default::default(),
        })
        .await;
    loop {
        match execution.next().await {
            SandboxEvent::Request {
                id,
                request: HostRequest::CallTool { input, .. },
                ..
            } => {
                let n = input["n"].as_i64().unwrap_or(0);
                execution
                    .reply(
                        id,
                        HostReply::Value {
                            value: json!({ "n": n + 1 }),
                        },
                    )
                    .await;
            }
            SandboxEvent::Request { id, .. } => {
                execution
                    .reply(
                        id,
                        HostReply::Error {
                            message: "unsupported".into(),
                        },
                    )
                    .await;
            }
            SandboxEvent::Finished(outcome) => {
                return outcome
                    .result
                    .unwrap_or_else(|error| panic!("{code}: {error:?}"));
            }
            _ => {}
        }
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn percentile(mut samples: Vec<Duration>, p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64) * p).floor() as usize;
    samples[index.min(samples.len() - 1)]
}

/// A warmed-up sandbox with room for every call the benchmarks make.
async fn warm_sandbox(backend: Backend) -> Arc<Sandbox> {
    let sandbox = Sandbox::new(SandboxConfig {
        backend,
        max_tool_calls: 1_000_000,
        pool_size: 2,
        ..SandboxConfig::default()
    });
    sandbox.warm_up().await.unwrap();
    sandbox
}

async fn measure(backend: Backend) -> Value {
    let sandbox = warm_sandbox(backend).await;
    let bindings = tools();

    // Per iteration: take a warm worker, bind 51 tools, run `1+1`, get the result back.
    let mut iterations = Vec::new();
    for round in 0..550 {
        // Give the pool the idle time a real model call would give it.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let started = Instant::now();
        assert_eq!(run(&sandbox, "1+1", &bindings).await, json!(2));
        if round >= 50 {
            iterations.push(started.elapsed());
        }
    }

    let timed = |code: &'static str, expected: Value, runs: usize| {
        let sandbox = sandbox.clone();
        let bindings = bindings.clone();
        async move {
            let mut samples = Vec::new();
            for round in 0..runs + 2 {
                let started = Instant::now();
                assert_eq!(run(&sandbox, code, &bindings).await, expected, "{code}");
                if round >= 2 {
                    samples.push(started.elapsed());
                }
            }
            samples
        }
    };
    let calls = timed(CALLS_10K, json!(10000), 7).await;
    let local = timed(
        "store('n', { n: 0 }); let s = 0; for (let i = 0; i < 10000; i++) { s = recall('n').n + i } s",
        json!(9999),
        7,
    )
    .await;
    let fib = timed(
        "function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2) } fib(25)",
        json!(75025),
        7,
    )
    .await;
    let expected: i64 = (0..100_000i64).filter(|i| (i * 2) % 3 == 0).sum();
    let array = timed(
        "let a = []; for (let i = 0; i < 100000; i++) { a.push({ id: i, v: i * 2 }); } a.filter(x => x.v % 3 == 0).map(x => x.id).reduce((p, c) => p + c, 0)",
        json!(expected),
        7,
    )
    .await;
    let ms = |duration: Duration| (duration.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0;
    json!({
        "iterationMedianMs": ms(median(iterations.clone())),
        "iterationP90Ms": ms(percentile(iterations, 0.9)),
        "toolCalls10kMedianMs": ms(median(calls)),
        "localCalls10kMedianMs": ms(median(local)),
        "fib25MedianMs": ms(median(fib)),
        "array100kMedianMs": ms(median(array)),
    })
}

/// The same 10,000 calls through a whole code-mode prompt: every call validated, run as a real
/// tool and recorded in the timeline with its events.
async fn through_code_mode() -> Value {
    let calls: usize = std::env::var("BENCH_CALLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    use agentic_core::{Config, PromptOptions, PromptState, Runtime, ToolError, define_tool};

    struct Counter;

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Input {
        n: i64,
    }

    #[async_trait::async_trait]
    impl agentic_core::Plugin for Counter {
        fn id(&self) -> &str {
            "bench"
        }
        async fn prepare(&self, context: &mut agentic_core::PrepareContext) -> anyhow::Result<()> {
            context.add_tool(
                define_tool("bench.next", "Adds one to n", |_cx, input: Input| async move {
                    Ok::<_, ToolError>(json!({ "n": input.n + 1 }))
                })
                .into_arc(),
            );
            Ok(())
        }
    }

    let mut samples = Vec::new();
    for round in 0..5 {
        let provider = Arc::new(agentic_plugin_script::ScriptedProvider::new(vec![
            agentic_plugin_script::Turn {
                code: Some(format!(
                    "let s = 0; for (let i = 0; i < {calls}; i++) {{ s = benchNext({{ n: s }}).n }} output(String(s)); done();"
                )),
                ..agentic_plugin_script::Turn::default()
            },
        ]));
        let runtime = Runtime::builder()
            .config(Config::from_value(json!({
                "interpreter": { "sandbox": { "maxToolCalls": 1000000 } }
            })))
            .registered_plugins()
            .plugin(Arc::new(Counter))
            .provider(provider)
            .build()
            .await
            .unwrap();
        // Let the pool start before timing.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let started = Instant::now();
        let prompt = runtime
            .prompts()
            .create_and_run(PromptOptions {
                user_id: "bench".to_owned(),
                input: Some("count".to_owned()),
                mode: Some("code".to_owned()),
                ..PromptOptions::default()
            })
            .await
            .unwrap();
        assert_eq!(prompt.state, PromptState::Completed, "{:?}", prompt.error);
        assert_eq!(prompt.output.len(), calls + 2);
        if round >= 1 {
            samples.push(started.elapsed());
        }
    }
    json!({ "codeModePrompt10kToolCallsMedianMs": (median(samples).as_secs_f64() * 1e6).round() / 1000.0 })
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes `--bench`; nothing else is expected.
    if std::env::var("BENCH_ONLY_CODE_MODE").is_ok() {
        println!("{}", through_code_mode().await);
        return;
    }
    // `BENCH_ONLY_CALLS=runs`: only the in-process 10,000-call script (or `BENCH_CODE`), for
    // profiling.
    if let Some(runs) = std::env::var("BENCH_ONLY_CALLS")
        .ok()
        .and_then(|runs| runs.parse::<usize>().ok())
    {
        let sandbox = warm_sandbox(Backend::InProcess).await;
        let bindings = tools();
        let mut samples = Vec::new();
        let (code, label) = match std::env::var("BENCH_CODE") {
            Ok(code) => (code, "BENCH_CODE in process"),
            Err(_) => (CALLS_10K.to_owned(), "10,000 calls in process"),
        };
        for _ in 0..runs {
            let started = Instant::now();
            run(&sandbox, &code, &bindings).await;
            samples.push(started.elapsed());
        }
        println!("{label}: median {:?}", median(samples));
        return;
    }
    let in_process = measure(Backend::InProcess).await;
    if std::env::var("BENCH_ONLY_IN_PROCESS").is_ok() {
        println!("{in_process}");
        return;
    }
    let isolated = measure(Backend::Isolated).await;
    let prompt = through_code_mode().await;
    println!(
        "{}",
        serde_json::to_string_pretty(
            &json!({ "inProcess": in_process, "isolated": isolated, "codeMode": prompt })
        )
        .unwrap()
    );
}

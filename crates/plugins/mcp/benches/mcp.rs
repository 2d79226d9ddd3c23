//! `cargo xtask bench mcp`: what a call of an MCP tool through agentic costs above the same
//! call made straight with the SDK, over stdio and over streamable HTTP, beside a local tool.
//!
//! The server is the reference server-everything (`tests/servers`, `npm ci`), its `echo`
//! tool. "Direct" is rmcp's own client calling it: the server's time plus the transport's.
//! "agentic" is the same call as a tool of a prompt (`ToolSet::invoke`: input validation
//! against the server's schema, the span and metrics, result conversion). The difference of
//! the medians is agentic's overhead. The local row is `kit.echo`, an in-process tool, through
//! the same `ToolSet::invoke`. Rounds interleave the paths so that noise hits them alike.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use agentic_interpreter as _;
use agentic_plugin_mcp as _;

use std::time::Instant;

use agentic_core::{Runtime, State, ToolContext};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

#[path = "../tests/common/mod.rs"]
mod common;

use common::{EVERYTHING, everything_over_http};
const ROUNDS: usize = 10;
const CALLS_PER_ROUND: usize = 200;

fn main() {
    if !std::path::Path::new(EVERYTHING).exists() {
        println!(
            "bench mcp: {EVERYTHING} is missing; run npm ci --prefix crates/plugins/mcp/tests/servers"
        );
        std::process::exit(1);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}

struct Samples {
    name: &'static str,
    micros: Vec<f64>,
}

impl Samples {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            micros: Vec::new(),
        }
    }

    fn median(&mut self) -> f64 {
        self.percentile(50.0)
    }

    fn percentile(&mut self, p: f64) -> f64 {
        self.micros.sort_by(f64::total_cmp);
        let index = ((p / 100.0) * (self.micros.len() - 1) as f64).round() as usize;
        self.micros[index]
    }
}

async fn timed<F: std::future::Future<Output = ()>>(samples: &mut Samples, call: impl Fn() -> F) {
    for _ in 0..CALLS_PER_ROUND {
        let start = Instant::now();
        call().await;
        samples.micros.push(start.elapsed().as_secs_f64() * 1e6);
    }
}

async fn run() {
    // HTTP: server-everything's streamable HTTP mode on a free port.
    let (mut http_server, url) = everything_over_http().await;

    let agentic = Runtime::builder()
        .config(agentic_core::Config::from_value(json!({
            "mcp": { "servers": {
                "stdio": { "command": EVERYTHING },
                "http": { "url": url },
            } }
        })))
        .registered_plugins()
        .plugin(agentic_testing::kit::plugin())
        .build()
        .await
        .unwrap();
    let prepared = agentic
        .services()
        .prepare("bench", "bench", "classic", &State::default())
        .await
        .unwrap();
    let context = ToolContext::new(
        "bench",
        "bench",
        State::default(),
        agentic.services().clone(),
    );

    // rmcp's own clients of the same two servers.
    let direct_stdio = ()
        .serve(
            rmcp::transport::TokioChildProcess::new(tokio::process::Command::new(EVERYTHING))
                .unwrap(),
        )
        .await
        .unwrap();
    let direct_http = ()
        .serve(rmcp::transport::StreamableHttpClientTransport::from_uri(
            url.clone(),
        ))
        .await
        .unwrap();
    let echo = || {
        CallToolRequestParams::new("echo")
            .with_arguments(json!({ "message": "hello" }).as_object().cloned().unwrap())
    };

    let mut local = Samples::new("local tool (kit.echo)");
    let mut stdio_direct = Samples::new("stdio, rmcp directly");
    let mut stdio_agentic = Samples::new("stdio, through agentic");
    let mut http_direct = Samples::new("HTTP, rmcp directly");
    let mut http_agentic = Samples::new("HTTP, through agentic");
    // One warm-up round, not counted.
    for round in 0..=ROUNDS {
        let mut scratch = Samples::new("warm-up");
        let counted = round > 0;
        macro_rules! pick {
            ($samples:expr) => {
                if counted { &mut $samples } else { &mut scratch }
            };
        }
        timed(pick!(local), || async {
            prepared
                .tools
                .invoke(context.clone(), "kit.echo", json!({ "text": "hello" }))
                .await
                .unwrap();
        })
        .await;
        timed(pick!(stdio_direct), || async {
            direct_stdio.call_tool(echo()).await.unwrap();
        })
        .await;
        timed(pick!(stdio_agentic), || async {
            prepared
                .tools
                .invoke(context.clone(), "stdio.echo", json!({ "message": "hello" }))
                .await
                .unwrap();
        })
        .await;
        timed(pick!(http_direct), || async {
            direct_http.call_tool(echo()).await.unwrap();
        })
        .await;
        timed(pick!(http_agentic), || async {
            prepared
                .tools
                .invoke(context.clone(), "http.echo", json!({ "message": "hello" }))
                .await
                .unwrap();
        })
        .await;
    }
    let mut rows = Vec::new();
    for samples in [
        &mut local,
        &mut stdio_direct,
        &mut stdio_agentic,
        &mut http_direct,
        &mut http_agentic,
    ] {
        let (median, p99) = (samples.median(), samples.percentile(99.0));
        rows.push((samples.name, median, p99));
    }
    println!(
        "{} calls per path ({} rounds of {}, interleaved), server-everything's echo",
        ROUNDS * CALLS_PER_ROUND,
        ROUNDS,
        CALLS_PER_ROUND
    );
    println!("| path | median µs | p99 µs |");
    println!("| --- | --- | --- |");
    for (name, median, p99) in &rows {
        println!("| {name} | {median:.0} | {p99:.0} |");
    }
    println!(
        "agentic's overhead, median: stdio {:.0} µs, HTTP {:.0} µs",
        rows[2].1 - rows[1].1,
        rows[4].1 - rows[3].1
    );
    let _ = http_server.kill().await;
}

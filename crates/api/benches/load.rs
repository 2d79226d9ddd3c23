//! `cargo xtask bench api`: 1,000 concurrent prompts of 3 model rounds each against a real
//! `agentic serve` (release build, SQLite), whose model is a fake OpenAI-format server on
//! loopback that answers every call after 50 ms (streamed, as the provider asks).
//!
//! Each client follows its own user's event stream, starts one prompt and waits for its
//! `prompt.completed`. Reports wall time, prompts per second, p50/p99 latency (request to
//! completion) and the server's peak RSS (VmHWM).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::response::Response;
use axum::routing::post;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

const PROMPTS: usize = 1_000;
const MODEL_DELAY: Duration = Duration::from_millis(50);
const ROUNDS: usize = 3;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}

/// The name of the first tool a chat request offers.
fn first_tool_name(body: &[u8]) -> Option<&str> {
    let tools = memchr::memmem::find(body, br#""tools":"#)?;
    let marker = br#""function":{"name":""#;
    let start = tools + memchr::memmem::find(&body[tools..], marker)? + marker.len();
    let end = start + memchr::memchr(b'"', &body[start..])?;
    std::str::from_utf8(&body[start..end]).ok()
}

async fn fake_openai(calls: Arc<AtomicU64>, request_bytes: Arc<AtomicU64>) -> String {
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move |body: Bytes| {
            let calls = calls.clone();
            let request_bytes = request_bytes.clone();
            async move {
                calls.fetch_add(1, Ordering::Relaxed);
                request_bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
                // Read only what the answer depends on, without parsing the whole request:
                // the fake model's CPU shares the two cores with the server under test.
                let rounds_done = memchr::memmem::find_iter(&body, br#""role":"tool""#).count();
                let tool = first_tool_name(&body).unwrap_or("time_now").to_owned();
                tokio::time::sleep(MODEL_DELAY).await;
                let chunks: Vec<String> = if rounds_done + 1 < ROUNDS {
                    vec![
                        json!({"id": "c", "object": "chat.completion.chunk", "model": "fake",
                            "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
                                {"index": 0, "id": format!("call_{rounds_done}"), "type": "function",
                                 "function": {"name": tool, "arguments": "{\"timezone\":\"UTC\"}"}}]},
                              "finish_reason": null}]})
                        .to_string(),
                        json!({"id": "c", "object": "chat.completion.chunk", "model": "fake",
                            "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
                        .to_string(),
                    ]
                } else {
                    vec![
                        json!({"id": "c", "object": "chat.completion.chunk", "model": "fake",
                            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "It is late."},
                              "finish_reason": null}]})
                        .to_string(),
                        json!({"id": "c", "object": "chat.completion.chunk", "model": "fake",
                            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}})
                        .to_string(),
                    ]
                };
                let mut body: String = chunks
                    .iter()
                    .map(|chunk| format!("data: {chunk}\n\n"))
                    .collect();
                body.push_str("data: [DONE]\n\n");
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from(body))
                    .unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    address
}

/// Clock ticks per second in /proc's CPU times (USER_HZ on Linux).
const TICKS: f64 = 100.0;

/// CPU seconds (user + system) a process has used, from /proc.
fn cpu_seconds(pid: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            let user: f64 = fields.get(11)?.parse().ok()?;
            let system: f64 = fields.get(12)?.parse().ok()?;
            Some((user + system) / TICKS)
        })
        .unwrap_or(f64::NAN)
}

/// The machine's idle and stolen seconds (time the hypervisor gave to other guests), from
/// the first line of /proc/stat.
fn idle_and_stolen_seconds() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<f64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .map(|field| field.parse().unwrap_or(f64::NAN))
        .collect();
    let field = |index: usize| fields.get(index).copied().unwrap_or(f64::NAN) / TICKS;
    // user nice system idle iowait irq softirq steal
    (field(3) + field(4), field(7))
}

fn peak_rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmHWM:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// One way to run the server under test.
struct Setup {
    label: String,
    binary: String,
    environment: Vec<(String, String)>,
    /// Servers sharing the database; more than one needs `postgres`.
    replicas: usize,
    /// The admin URL of a PostgreSQL server: each run gets a fresh database there. SQLite
    /// (a fresh file) without it.
    postgres: Option<String>,
}

/// What one run measured.
struct Measured {
    server_cpu: f64,
    own_cpu: f64,
    idle: f64,
    stolen: f64,
    wall: Duration,
    latencies: Vec<Duration>,
    rss: f64,
    failures: usize,
    calls: u64,
    request_bytes: u64,
    /// Bytes of spans the OTLP receiver got during the run.
    spans_bytes: u64,
}

/// An OTLP/HTTP receiver that accepts every export and counts its bytes.
async fn otlp_sink(received: Arc<AtomicU64>) -> String {
    let app = Router::new().route(
        "/v1/traces",
        post(move |body: Bytes| {
            let received = received.clone();
            async move {
                received.fetch_add(body.len() as u64, Ordering::Relaxed);
                Response::builder()
                    .header("content-type", "application/x-protobuf")
                    .body(Body::empty())
                    .unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    address
}

/// A new database on the PostgreSQL server at `admin`; its URL.
async fn fresh_postgres(admin: &str) -> String {
    use agentic_conversation::sea_orm::{ConnectionTrait as _, Database};
    let name = format!("agentic_load_{}", uuid::Uuid::new_v4().simple());
    let connection = Database::connect(admin).await.unwrap();
    connection
        .execute_unprepared(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let (base, _) = admin.rsplit_once('/').unwrap();
    format!("{base}/{name}")
}

async fn drop_postgres(admin: &str, database: &str) {
    use agentic_conversation::sea_orm::{ConnectionTrait as _, Database};
    let name = database.rsplit('/').next().unwrap();
    let connection = Database::connect(admin).await.unwrap();
    let _ = connection
        .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .await;
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Runs every setup `AGENTIC_BENCH_ROUNDS` times (3 by default), interleaved, so that a noisy
/// stretch of the shared machine falls on all of them: the release binary under test
/// (`AGENTIC_BIN`) with its default logs and no trace exporter, the same with the OTLP exporter
/// sending to a receiver on loopback, and, when `AGENTIC_BASELINE_BIN` names one, an earlier
/// build to compare with. Prints the medians side by side, then the last run of the first
/// setup in detail.
async fn run() {
    let binary = std::env::var("AGENTIC_BIN").expect("AGENTIC_BIN: the release `agentic` binary");
    let rounds: usize = std::env::var("AGENTIC_BENCH_ROUNDS")
        .ok()
        .and_then(|rounds| rounds.parse().ok())
        .unwrap_or(3)
        .max(1);
    let spans = Arc::new(AtomicU64::new(0));
    let sink = otlp_sink(spans.clone()).await;
    let mut setups = Vec::new();
    if let Ok(postgres) = std::env::var("AGENTIC_BENCH_REPLICAS_POSTGRES") {
        // `cargo xtask bench api --replicas`: one server, then three behind no balancer
        // (each client streams from one server and prompts on the next), on one PostgreSQL.
        for replicas in [1, 3] {
            setups.push(Setup {
                label: format!(
                    "PostgreSQL, {replicas} server{}",
                    if replicas == 1 { "" } else { "s" }
                ),
                binary: binary.clone(),
                environment: Vec::new(),
                replicas,
                postgres: Some(postgres.clone()),
            });
        }
    } else {
        if let Ok(baseline) = std::env::var("AGENTIC_BASELINE_BIN") {
            setups.push(Setup {
                label: "baseline build, default logs".to_owned(),
                binary: baseline,
                environment: Vec::new(),
                replicas: 1,
                postgres: None,
            });
        }
        setups.push(Setup {
            label: "this build, default logs, spans, no exporter".to_owned(),
            binary: binary.clone(),
            environment: Vec::new(),
            replicas: 1,
            postgres: None,
        });
        setups.push(Setup {
            label: "this build, OTLP/HTTP exporter on".to_owned(),
            binary,
            environment: vec![("OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(), sink)],
            replicas: 1,
            postgres: None,
        });
    }
    let mut results: Vec<Vec<Measured>> = setups.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for (index, setup) in setups.iter().enumerate() {
            eprintln!("round {} of {rounds}: {}", round + 1, setup.label);
            results[index].push(run_once(setup, &spans).await);
        }
    }
    let cpu_per_prompt = |runs: &[Measured]| {
        let mut values: Vec<f64> = runs
            .iter()
            .map(|run| run.server_cpu * 1000.0 / PROMPTS as f64)
            .collect();
        median(&mut values)
    };
    let reference = cpu_per_prompt(&results[0]);
    println!(
        "| setup (median of {rounds}) | server CPU per prompt | × {} | p50 | p99 | failed | span bytes exported |",
        setups[0].label
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (setup, runs) in setups.iter().zip(&results) {
        let cpu = cpu_per_prompt(runs);
        let mut p50: Vec<f64> = runs
            .iter()
            .map(|run| percentile(&run.latencies, 0.5))
            .collect();
        let mut p99: Vec<f64> = runs
            .iter()
            .map(|run| percentile(&run.latencies, 0.99))
            .collect();
        let mut bytes: Vec<f64> = runs.iter().map(|run| run.spans_bytes as f64).collect();
        let failed: usize = runs.iter().map(|run| run.failures).sum();
        println!(
            "| {} | {cpu:.2} ms | {:.3} | {:.0} ms | {:.0} ms | {failed} | {:.0} KiB |",
            setup.label,
            cpu / reference,
            median(&mut p50) * 1000.0,
            median(&mut p99) * 1000.0,
            median(&mut bytes) / 1024.0,
        );
    }
    println!();
    let last = results[0].pop().unwrap();
    print_details(&setups[0].label, &last);
}

/// The latency at `share` (0.5 for the median) of sorted latencies, in seconds.
fn percentile(latencies: &[Duration], share: f64) -> f64 {
    latencies[((latencies.len() as f64 - 1.0) * share).round() as usize].as_secs_f64()
}

async fn run_once(setup: &Setup, spans: &AtomicU64) -> Measured {
    let calls = Arc::new(AtomicU64::new(0));
    let request_bytes = Arc::new(AtomicU64::new(0));
    let model = fake_openai(calls.clone(), request_bytes.clone()).await;
    let binary = &setup.binary;
    let spans_before = spans.load(Ordering::Relaxed);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agentic.toml");
    // Lift the per-user request rate: each client is one user making a handful of requests.
    std::fs::write(&config, "[api]\nrequestsPerMinute = 100000\nburst = 1000\n").unwrap();
    let database = match &setup.postgres {
        Some(admin) => fresh_postgres(admin).await,
        None => agentic_conversation::sqlite_url(&dir.path().join("load.db")),
    };
    let mut servers = Vec::with_capacity(setup.replicas);
    let mut bases = Vec::with_capacity(setup.replicas);
    let mut pids = Vec::with_capacity(setup.replicas);
    for _ in 0..setup.replicas {
        let mut server = tokio::process::Command::new(binary)
            .args([
                "--config",
                config.to_str().unwrap(),
                "serve",
                "--addr",
                "127.0.0.1:0",
            ])
            .env_remove("AGENTIC_PROVIDER")
            .env("OPENAI_BASE_URL", &model)
            .env("OPENAI_API_KEY", "bench")
            .env("OPENAI_MODEL", "fake")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .envs(setup.environment.iter().map(|(name, value)| (name, value)))
            .env("AGENTIC_DATABASE_URL", &database)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        pids.push(server.id().unwrap());
        let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
        // Log lines may come before the one that names the address.
        let base = loop {
            let line = lines.next_line().await.unwrap().unwrap();
            if let Some(word) = line
                .split_whitespace()
                .find(|word| word.starts_with("http://"))
            {
                break word.to_owned();
            }
        };
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        servers.push(server);
        bases.push(base);
    }
    let servers_cpu =
        |pids: &[u32]| -> f64 { pids.iter().map(|pid| cpu_seconds(&pid.to_string())).sum() };

    let server_cpu_before = servers_cpu(&pids);
    let own_cpu_before = cpu_seconds("self");
    let (idle_before, stolen_before) = idle_and_stolen_seconds();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(PROMPTS)
        .build()
        .unwrap();
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(PROMPTS);
    for index in 0..PROMPTS {
        let client = client.clone();
        // Events from one server, the prompt on the next (the same one when there is one).
        let base = bases[index % bases.len()].clone();
        let prompt_base = bases[(index + 1) % bases.len()].clone();
        tasks.push(tokio::spawn(async move {
            let user = format!("user{index}");
            let begin = Instant::now();
            let events = client
                .get(format!("{base}/api/events/stream"))
                .header("x-user-id", &user)
                .send()
                .await
                .unwrap();
            let accepted: Value = client
                .post(format!("{prompt_base}/api/prompt"))
                .header("x-user-id", &user)
                .json(&json!({ "input": "What time is it?" }))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let prompt = accepted["promptId"].as_str().unwrap().to_owned();
            let mut stream = eventsource_stream::EventStream::new(events.bytes_stream());
            let mut state = String::new();
            while let Some(Ok(event)) = stream.next().await {
                if event.event == "prompt.completed" || event.event == "prompt.error" {
                    let data: Value = serde_json::from_str(&event.data).unwrap();
                    if data["data"]["promptId"] == prompt.as_str() {
                        state = event.event;
                        break;
                    }
                }
                if event.event == "stream.lagged" {
                    // Fall back to polling.
                    loop {
                        let stored: Value = client
                            .get(format!("{base}/api/prompts/{prompt}"))
                            .header("x-user-id", &user)
                            .send()
                            .await
                            .unwrap()
                            .json()
                            .await
                            .unwrap();
                        if stored["state"] != "running" {
                            state = format!("polled {}", stored["state"]);
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    break;
                }
            }
            (begin.elapsed(), state)
        }));
    }
    let mut latencies = Vec::with_capacity(PROMPTS);
    let mut failures = 0;
    for task in tasks {
        let (latency, state) = task.await.unwrap();
        if state != "prompt.completed" && state != "polled \"completed\"" {
            failures += 1;
        }
        latencies.push(latency);
    }
    let wall = started.elapsed();
    latencies.sort();
    let rss = pids
        .iter()
        .map(|pid| peak_rss_mib(*pid))
        .fold(0.0, f64::max);
    let server_cpu = servers_cpu(&pids) - server_cpu_before;
    let own_cpu = cpu_seconds("self") - own_cpu_before;
    let (idle_after, stolen_after) = idle_and_stolen_seconds();
    for server in &mut servers {
        let _ = server.start_kill();
        let _ = server.wait().await;
    }
    if let Some(admin) = &setup.postgres {
        drop_postgres(admin, &database).await;
    }
    Measured {
        server_cpu,
        own_cpu,
        idle: idle_after - idle_before,
        stolen: stolen_after - stolen_before,
        wall,
        latencies,
        rss,
        failures,
        calls: calls.load(Ordering::Relaxed),
        request_bytes: request_bytes.load(Ordering::Relaxed),
        spans_bytes: spans.load(Ordering::Relaxed) - spans_before,
    }
}

fn print_details(label: &str, measured: &Measured) {
    let Measured {
        server_cpu,
        own_cpu,
        idle,
        stolen,
        wall,
        latencies,
        rss,
        failures,
        calls,
        request_bytes,
        ..
    } = measured;
    let (server_cpu, own_cpu, idle, stolen, rss, failures) =
        (*server_cpu, *own_cpu, *idle, *stolen, *rss, *failures);
    println!("{label}, last run:");
    println!();
    let model_time = (MODEL_DELAY * ROUNDS as u32).as_secs_f64();
    // The ideal run keeps both cores busy from start to end and adds nothing but the model's
    // delay: 3 × 50 ms plus the run's CPU work queued on 2 cores. That work is the server's
    // and the load generator's (with the fake model), which share the cores; the ideal with
    // the server's work alone is shown beside it.
    let ideal = model_time + (server_cpu + own_cpu) / 2.0;
    let server_only_ideal = model_time + server_cpu / 2.0;
    // Core time the hypervisor gave to other guests during the run was not ours to use: the
    // ideal on the cores we had counts it as work done beside ours.
    let ideal_on_cores_we_had = ideal + stolen / 2.0;
    let ms = |seconds: f64| format!("{:.0} ms", seconds * 1000.0);
    let p50 = percentile(latencies, 0.5);
    let p99 = percentile(latencies, 0.99);
    let wall = wall.as_secs_f64();
    let rows = [
        (
            "prompts (3 model rounds each, 50 ms per model call)".to_owned(),
            PROMPTS.to_string(),
        ),
        ("model calls answered".to_owned(), calls.to_string()),
        (
            "mean model request size".to_owned(),
            format!(
                "{:.1} KiB",
                *request_bytes as f64 / (*calls).max(1) as f64 / 1024.0
            ),
        ),
        ("failed prompts".to_owned(), failures.to_string()),
        ("wall time".to_owned(), ms(wall)),
        (
            "prompts per second".to_owned(),
            format!("{:.0}", PROMPTS as f64 / wall),
        ),
        ("p50 latency".to_owned(), ms(p50)),
        ("p99 latency".to_owned(), ms(p99)),
        ("server peak RSS".to_owned(), format!("{rss:.1} MiB")),
        (
            "server CPU time (per prompt)".to_owned(),
            format!(
                "{server_cpu:.2} s ({:.2} ms)",
                server_cpu * 1000.0 / PROMPTS as f64
            ),
        ),
        (
            "load generator + fake model CPU time".to_owned(),
            format!("{own_cpu:.2} s"),
        ),
        (
            "ideal: 150 ms + all CPU work / 2 cores".to_owned(),
            ms(ideal),
        ),
        (
            "wall / ideal (target ≤ 1.5)".to_owned(),
            format!("{:.2}", wall / ideal),
        ),
        ("p99 − ideal (target ≤ 100 ms)".to_owned(), ms(p99 - ideal)),
        (
            "ideal with the server's CPU alone: 150 ms + server CPU / 2".to_owned(),
            ms(server_only_ideal),
        ),
        (
            "cores stolen by the hypervisor".to_owned(),
            format!("{stolen:.2} s"),
        ),
        ("cores idle".to_owned(), format!("{idle:.2} s")),
        (
            "ideal on the core time we had: 150 ms + (all CPU work + stolen) / 2".to_owned(),
            ms(ideal_on_cores_we_had),
        ),
        (
            "against it: wall / ideal; p99 − ideal".to_owned(),
            format!(
                "{:.2}; {}",
                wall / ideal_on_cores_we_had,
                ms(p99 - ideal_on_cores_we_had)
            ),
        ),
    ];
    println!("| measurement | value |");
    println!("| --- | --- |");
    for (name, value) in rows {
        println!("| {name} | {value} |");
    }
}

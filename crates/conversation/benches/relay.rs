//! `cargo xtask bench relay`: how long an event published on one server takes to reach a
//! subscriber on another, through PostgreSQL (`relay.rs`). Two services, each with its own
//! runtime and event hub, as two `agentic serve` processes have them, on a fresh database of
//! the server `AGENTIC_TEST_POSTGRES_URL` names.
//!
//! - one at a time: 1,000 events, each published after the last arrived (latency alone);
//! - a burst: 10,000 events published as fast as one task can (latency under load, and the
//!   rate the log sustains).
//!
//! Prints the median, p99 and worst delivery time of each, and the burst's events per second.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentic_conversation::{ConversationService, relay};
use agentic_core::{Config, EventPayload, Received, Runtime};
use sea_orm::{ConnectionTrait, Database};

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}

async fn service(url: &str) -> ConversationService {
    let runtime = Runtime::builder()
        .config(Config::default())
        .event_capacity(16_384)
        .build()
        .await
        .unwrap();
    ConversationService::open(Arc::new(runtime), url)
        .await
        .unwrap()
}

async fn run() {
    let Ok(admin) = std::env::var("AGENTIC_TEST_POSTGRES_URL") else {
        eprintln!("bench relay: set AGENTIC_TEST_POSTGRES_URL (bash .ci/postgres.sh prints it)");
        std::process::exit(2);
    };
    let connection = Database::connect(&admin).await.unwrap();
    let database = format!("agentic_bench_{}", uuid::Uuid::new_v4().simple());
    connection
        .execute_unprepared(&format!("CREATE DATABASE {database}"))
        .await
        .unwrap();
    let (base, _) = admin.rsplit_once('/').unwrap();
    let url = format!("{base}/{database}");
    let a = service(&url).await;
    let b = service(&url).await;
    let hub_a = a.runtime().services().events.clone();
    let hub_b = b.runtime().services().events.clone();
    let _relay_a = relay::start_for(&a).await.unwrap();
    let _relay_b = relay::start_for(&b).await.unwrap();

    println!("| measurement | events | median | p99 | worst | events/s |");
    println!("| --- | --- | --- | --- | --- | --- |");

    // One at a time.
    let mut on_b = hub_b.subscribe(Some("bench"));
    let mut times = Vec::new();
    for index in 0..1_000 {
        let sent = Instant::now();
        hub_a.publish("bench", payload(index));
        loop {
            match on_b.next().await.unwrap() {
                Received::Event(event) if name_of(&event.payload) == Some(index) => break,
                Received::Event(_) => {}
                Received::Lagged(missed) => panic!("lagged by {missed}"),
            }
        }
        times.push(sent.elapsed());
    }
    report("one at a time, A to B", &mut times, None);

    // A burst.
    let count = 10_000;
    let sent_at: Arc<std::sync::Mutex<Vec<Instant>>> = Arc::default();
    let publisher = {
        let (hub, sent_at) = (hub_a.clone(), sent_at.clone());
        tokio::spawn(async move {
            for index in 0..count {
                sent_at.lock().unwrap().push(Instant::now());
                hub.publish("bench", payload(1_000_000 + index));
                if index % 100 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        })
    };
    let started = Instant::now();
    let mut arrived = Vec::with_capacity(count);
    while arrived.len() < count {
        match tokio::time::timeout(Duration::from_secs(60), on_b.next())
            .await
            .expect("the burst arrives")
            .unwrap()
        {
            Received::Event(event) => {
                if let Some(index) = name_of(&event.payload) {
                    arrived.push((index - 1_000_000, Instant::now()));
                }
            }
            Received::Lagged(missed) => panic!("lagged by {missed}"),
        }
    }
    let elapsed = started.elapsed();
    publisher.await.unwrap();
    let sent_at = sent_at.lock().unwrap().clone();
    let mut times: Vec<Duration> = arrived
        .iter()
        .map(|(index, at)| at.duration_since(sent_at[*index]))
        .collect();
    let rate = count as f64 / elapsed.as_secs_f64();
    report("burst, A to B", &mut times, Some(rate));
    let _ = connection
        .execute_unprepared(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
        .await;
}

fn payload(index: usize) -> EventPayload {
    EventPayload::ConversationUpdated {
        conversation_id: format!("event-{index}"),
    }
}

fn name_of(payload: &EventPayload) -> Option<usize> {
    match payload {
        EventPayload::ConversationUpdated { conversation_id } => {
            conversation_id.strip_prefix("event-")?.parse().ok()
        }
        _ => None,
    }
}

fn report(name: &str, times: &mut [Duration], rate: Option<f64>) {
    times.sort_unstable();
    let at = |fraction: f64| {
        let index = ((times.len() as f64 - 1.0) * fraction).round() as usize;
        times[index]
    };
    println!(
        "| {name} | {} | {:.2} ms | {:.2} ms | {:.2} ms | {} |",
        times.len(),
        at(0.5).as_secs_f64() * 1000.0,
        at(0.99).as_secs_f64() * 1000.0,
        times[times.len() - 1].as_secs_f64() * 1000.0,
        rate.map_or_else(|| "—".to_owned(), |rate| format!("{rate:.0}")),
    );
}

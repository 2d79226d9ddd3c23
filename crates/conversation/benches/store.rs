//! `cargo xtask bench store`: the conversation store on SQLite and (when
//! `AGENTIC_TEST_POSTGRES_URL` names a server) PostgreSQL.
//!
//! - appending 10,000 outputs to one running prompt, each committed on its own (what a
//!   checkpoint does), timed one by one;
//! - loading a conversation of 1,000 finished prompts (3 outputs each);
//! - prompts per second from 16 conversations prompting at once (scripted model, no delay).
//!
//! Prints one markdown table row per backend and measurement.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentic_conversation::{ConversationService, PromptRequest, Store};
use agentic_core::{
    ModelKind, Prompt, PromptChange, PromptOutput, PromptState, Runtime, TextOutput, ToolOutput,
    ToolResult,
};
use agentic_plugin_script::{ScriptedProvider, Turn};
use sea_orm::{ConnectionTrait, Database};

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}

async fn run() {
    let dir = tempfile::tempdir().unwrap();
    let mut targets = vec![(
        "SQLite",
        agentic_conversation::sqlite_url(&dir.path().join("bench.db")),
    )];
    match std::env::var("AGENTIC_TEST_POSTGRES_URL") {
        Ok(admin) if !admin.is_empty() => {
            targets.push(("PostgreSQL", fresh_postgres(&admin).await))
        }
        _ => eprintln!("AGENTIC_TEST_POSTGRES_URL is unset: PostgreSQL skipped"),
    }
    println!("| backend | measurement | median | p99 | total | rate |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for (name, url) in targets {
        append(name, &url).await;
        load(name, &url).await;
        concurrent(name, &url).await;
    }
}

async fn fresh_postgres(admin: &str) -> String {
    let connection = Database::connect(admin).await.unwrap();
    let database = format!("agentic_bench_{}", uuid::Uuid::new_v4().simple());
    connection
        .execute_unprepared(&format!("CREATE DATABASE {database}"))
        .await
        .unwrap();
    let (base, _) = admin.rsplit_once('/').unwrap();
    format!("{base}/{database}")
}

fn tool(index: usize) -> PromptOutput {
    PromptOutput::Tool(ToolOutput {
        id: format!("call_{index}"),
        function: "kit.echo".into(),
        input: serde_json::json!({ "text": format!("item {index}") }),
        result: ToolResult::Success {
            output: serde_json::json!(format!("item {index}")),
        },
        start: chrono::Utc::now(),
        end: Some(chrono::Utc::now()),
        decision: None,
    })
}

fn text(content: &str) -> PromptOutput {
    PromptOutput::Text(TextOutput {
        id: uuid::Uuid::new_v4().to_string(),
        content: content.into(),
        start: chrono::Utc::now(),
        end: Some(chrono::Utc::now()),
    })
}

fn percentile(sorted: &[Duration], share: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * share).round() as usize]
}

fn ms(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1000.0)
}

async fn append(name: &str, url: &str) {
    let store = Store::open(url, &Default::default()).await.unwrap();
    let conversation = store.create_conversation("bench", "append").await.unwrap();
    let mut prompt = Prompt::new("bench", "classic", ModelKind::Normal, Some("go".into()));
    store
        .insert_prompt(&conversation.id, &prompt)
        .await
        .unwrap();
    let mut times = Vec::with_capacity(10_000);
    let started = Instant::now();
    for index in 0..10_000 {
        prompt.output.push(tool(index));
        let one = Instant::now();
        store
            .save_prompt(&prompt, PromptChange::Output(index))
            .await
            .unwrap();
        times.push(one.elapsed());
    }
    let total = started.elapsed();
    prompt.state = PromptState::Completed;
    store
        .save_prompt(&prompt, PromptChange::Prompt)
        .await
        .unwrap();
    times.sort();
    println!(
        "| {name} | append 10,000 outputs to one prompt | {} | {} | {} | {:.0} outputs/s |",
        ms(percentile(&times, 0.5)),
        ms(percentile(&times, 0.99)),
        ms(total),
        10_000.0 / total.as_secs_f64()
    );
    store.close().await.unwrap();
}

async fn load(name: &str, url: &str) {
    let store = Store::open(url, &Default::default()).await.unwrap();
    let conversation = store.create_conversation("bench", "load").await.unwrap();
    for index in 0..1_000 {
        let mut prompt = Prompt::new(
            "bench",
            "classic",
            ModelKind::Normal,
            Some(format!("question {index}")),
        );
        store
            .insert_prompt(&conversation.id, &prompt)
            .await
            .unwrap();
        prompt.output = vec![
            text("Let me look."),
            tool(index),
            text("Here is the answer."),
        ];
        prompt.state = PromptState::Completed;
        store
            .save_prompt(&prompt, PromptChange::Prompt)
            .await
            .unwrap();
    }
    let mut times = Vec::new();
    for _ in 0..21 {
        let one = Instant::now();
        let prompts = store.conversation_prompts(&conversation.id).await.unwrap();
        times.push(one.elapsed());
        assert_eq!(prompts.len(), 1_000);
    }
    times.sort();
    println!(
        "| {name} | load a conversation of 1,000 prompts (21 runs) | {} | max {} | | |",
        ms(percentile(&times, 0.5)),
        ms(*times.last().unwrap()),
    );
    store.close().await.unwrap();
}

async fn concurrent(name: &str, url: &str) {
    const CONVERSATIONS: usize = 16;
    const PROMPTS: usize = 25;
    let turns = vec![
        Turn {
            text: Some("Done.".into()),
            ..Turn::default()
        };
        CONVERSATIONS * PROMPTS
    ];
    let runtime = Runtime::builder()
        .provider(Arc::new(ScriptedProvider::new(turns)))
        .build()
        .await
        .unwrap();
    let service = ConversationService::open(Arc::new(runtime), url)
        .await
        .unwrap();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for user in 0..CONVERSATIONS {
        let service = service.clone();
        tasks.push(tokio::spawn(async move {
            let mut conversation = service.create(&format!("user{user}")).await.unwrap();
            for index in 0..PROMPTS {
                let prompt = conversation
                    .prompt(PromptRequest {
                        input: Some(format!("prompt {index}")),
                        ..PromptRequest::default()
                    })
                    .await
                    .unwrap();
                assert_eq!(prompt.state, PromptState::Completed);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let total = started.elapsed();
    let count = CONVERSATIONS * PROMPTS;
    println!(
        "| {name} | {count} prompts from {CONVERSATIONS} concurrent conversations | | | {} | {:.0} prompts/s |",
        ms(total),
        count as f64 / total.as_secs_f64()
    );
}

//! The todo tools used from prompts, in classic and in code mode, each case over its own
//! SQLite database (opened by the runner's hook, as a conversation service would).

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

// Integration tests are a separate crate: name the plugins so the linker keeps them.
use agentic_interpreter as _;
use agentic_plugin_todo as _;

use agentic_plugin_script::testing::TimelineRunner;

fn runner() -> TimelineRunner {
    TimelineRunner::new()
        .on_runtime(Arc::new(|services| {
            Box::pin(agentic_conversation::testing::attach_temporary_sqlite(
                services,
            ))
        }))
        .mask_uuids()
        .mask_times()
}

#[test]
fn todo_plugin_timelines() {
    let runner = runner();
    insta::glob!("timelines/*.yaml", |path| {
        let timeline = runner
            .run_file_blocking(path)
            .unwrap_or_else(|error| panic!("{}: {error:#}", path.display()));
        insta::assert_yaml_snapshot!(timeline);
    });
}

#[tokio::test]
async fn todos_are_kept_per_user() {
    use agentic_core::{Runtime, State, ToolContext};
    let runtime = Runtime::builder()
        .registered_plugins()
        .build()
        .await
        .unwrap();
    let services = runtime.services().clone();
    let db = agentic_conversation::testing::TestDatabase::sqlite().unwrap();
    agentic_conversation::attach_database(&services, &db.url)
        .await
        .unwrap();
    let invoke = |user: &'static str, tool: &'static str, input: serde_json::Value| {
        let services = services.clone();
        async move {
            let prepared = services
                .prepare(user, "p", "classic", &State::default())
                .await
                .unwrap();
            let context = ToolContext::new(user, "p", State::default(), services.clone());
            prepared.tools.invoke(context, tool, input).await
        }
    };
    let made = invoke(
        "alice",
        "todo.create",
        serde_json::json!({ "title": "Alice's" }),
    )
    .await
    .unwrap();
    let id = made["id"].as_str().unwrap().to_owned();
    let bobs = invoke("bob", "todo.list", serde_json::json!({ "status": "all" }))
        .await
        .unwrap();
    assert_eq!(bobs["todos"], serde_json::json!([]));
    let steal = invoke("bob", "todo.complete", serde_json::json!({ "id": id }))
        .await
        .unwrap_err();
    assert!(steal.to_string().contains("no todo with id"), "{steal}");
    let done = invoke("alice", "todo.complete", serde_json::json!({ "id": id }))
        .await
        .unwrap();
    assert_eq!(done["done"], true);
    let renamed = invoke(
        "alice",
        "todo.update",
        serde_json::json!({ "id": id, "title": "Renamed", "due": "Friday" }),
    )
    .await
    .unwrap();
    assert_eq!(renamed["title"], "Renamed");
    assert_eq!(renamed["due"], "Friday");
    let gone = invoke("alice", "todo.delete", serde_json::json!({ "id": id }))
        .await
        .unwrap();
    assert_eq!(gone["deleted"], true);
}

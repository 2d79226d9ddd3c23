//! The todo tools used from prompts, in classic and in code mode, each case over its own
//! SQLite database (opened by the runner's hook, as a conversation service would).

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// Integration tests are a separate crate: name the plugins so the linker keeps them.
use agentic_interpreter as _;
use agentic_plugin_todo as _;

use agentic_testing::TimelineRunner;

fn runner() -> TimelineRunner {
    TimelineRunner::new()
        .with_temporary_database()
        .mask_uuids()
        .mask_times()
}

#[test]
fn todo_plugin_timelines() {
    let runner = runner();
    agentic_testing::assert_timelines!(runner);
}

#[tokio::test]
async fn todos_are_kept_per_user() {
    let db = agentic_testing::TestDatabase::sqlite().unwrap();
    let tools = agentic_testing::ToolHarness::open(&db.url, serde_json::json!({}))
        .await
        .unwrap();
    let invoke = |user: &'static str, tool: &'static str, input: serde_json::Value| {
        let tools = &tools;
        async move { tools.call(user, tool, input).await }
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

//! The filesystem tools used from prompts, in classic and in code mode, over the committed
//! fixture directory (`tests/fixture`).

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// Integration tests are a separate crate: name the plugins so the linker keeps them.
use agentic_interpreter as _;
use agentic_plugin_fs as _;

use agentic_testing::TimelineRunner;

#[test]
fn fs_plugin_timelines() {
    let runner = TimelineRunner::new();
    agentic_testing::assert_timelines!(runner);
    // Nothing was written: the only write was rejected.
    let todo = std::fs::read_to_string("tests/fixture/todo.txt").unwrap();
    assert!(!todo.contains("Eggs"));
}

#[tokio::test]
async fn the_plugin_is_discovered_through_inventory() {
    let runtime = agentic_core::Runtime::builder()
        .registered_plugins()
        .build()
        .await
        .unwrap();
    assert!(runtime.services().plugin_ids().contains(&"fs".to_owned()));
}

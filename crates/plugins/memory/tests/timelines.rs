//! The memory tools used from prompts, in classic and in code mode, each case over its own
//! SQLite database (opened by the runner's hook, as a conversation service would).

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// Integration tests are a separate crate: name the plugins so the linker keeps them.
use agentic_interpreter as _;
use agentic_plugin_memory as _;

use agentic_testing::TimelineRunner;

fn runner() -> TimelineRunner {
    TimelineRunner::new()
        .with_temporary_database()
        .mask_uuids()
        .mask_times()
}

#[test]
fn memory_plugin_timelines() {
    let runner = runner();
    agentic_testing::assert_timelines!(runner);
}

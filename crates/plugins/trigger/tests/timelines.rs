//! The trigger tools used from prompts, in classic and in code mode, each case over its own
//! SQLite database, as a conversation service would have.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// Integration tests are a separate crate: name the plugins so the linker keeps them.
use agentic_interpreter as _;
use agentic_plugin_trigger as _;

use agentic_testing::TimelineRunner;

fn runner() -> TimelineRunner {
    TimelineRunner::new()
        .with_temporary_database()
        .mask_uuids()
        .mask(
            // Times that depend on today: next fires, creation times and "it is now …".
            // Times the cases chose (2099, 2001) are kept.
            r"20[2-8]\d-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})",
            "[time]",
        )
        .unwrap()
}

#[test]
fn trigger_plugin_timelines() {
    let runner = runner();
    agentic_testing::assert_timelines!(runner);
}

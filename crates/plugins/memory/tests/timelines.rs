//! The memory tools used from prompts, in classic and in code mode, each case over its own
//! SQLite database (opened by the runner's hook, as a conversation service would).

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

// Integration tests are a separate crate: name the plugins so the linker keeps them.
use agentic_interpreter as _;
use agentic_plugin_memory as _;

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
fn memory_plugin_timelines() {
    let runner = runner();
    insta::glob!("timelines/*.yaml", |path| {
        let timeline = runner
            .run_file_blocking(path)
            .unwrap_or_else(|error| panic!("{}: {error:#}", path.display()));
        insta::assert_yaml_snapshot!(timeline);
    });
}

//! The trigger tools used from prompts, in classic and in code mode, each case over its own
//! SQLite database (opened by the runner's hook, as a conversation service would).

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

// Integration tests are a separate crate: name the plugins so the linker keeps them.
use agentic_interpreter as _;
use agentic_plugin_trigger as _;

use agentic_plugin_script::testing::TimelineRunner;

fn runner() -> TimelineRunner {
    TimelineRunner::new()
        .on_runtime(Arc::new(|services| {
            Box::pin(agentic_conversation::testing::attach_temporary_sqlite(
                services,
            ))
        }))
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
    insta::glob!("timelines/*.yaml", |path| {
        let timeline = runner
            .run_file_blocking(path)
            .unwrap_or_else(|error| panic!("{}: {error:#}", path.display()));
        insta::assert_yaml_snapshot!(timeline);
    });
}

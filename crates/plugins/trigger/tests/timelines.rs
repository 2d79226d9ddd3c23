//! The trigger tools used from prompts, in classic and in code mode, each case over its own
//! SQLite database (opened by the runner's hook, as a conversation service would).

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

// Integration tests are a separate crate: name the plugins so the linker keeps them.
use agentic_interpreter as _;
use agentic_plugin_trigger as _;

use agentic_conversation::{DatabaseSlot, Store, sqlite_url};
use agentic_plugin_script::testing::TimelineRunner;

fn runner() -> TimelineRunner {
    TimelineRunner::new()
        .on_runtime(Arc::new(|services| {
            Box::pin(async move {
                let dir = tempfile::tempdir()?.keep();
                let store =
                    Store::open(&sqlite_url(&dir.join("trigger.db")), &services.extensions).await?;
                services
                    .extensions
                    .get::<DatabaseSlot>()
                    .expect("the trigger plugin registers migrations, and with them the slot")
                    .set(store);
                Ok(())
            })
        }))
        .mask(
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "[uuid]",
        )
        .and_then(|runner| runner.mask(r"call_[0-9a-f]{32}", "call_[random]"))
        .and_then(|runner| {
            // Times that depend on today: next fires, creation times and "it is now …".
            // Times the cases chose (2099, 2001) are kept.
            runner.mask(
                r"20[2-8]\d-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})",
                "[time]",
            )
        })
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

//! The artifact tools used from prompts, in classic and in code mode (through the aliases),
//! each case over its own SQLite database (opened by the runner's hook, as a conversation
//! service would).

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// Integration tests are a separate crate: name the plugins so the linker keeps them.
use agentic_interpreter as _;
use agentic_plugin_artifact as _;

use agentic_testing::{Timeline, TimelineRunner};
use serde_json::Value;

/// Arrays longer than this are shortened in snapshots to their length: a stored data set
/// would otherwise fill the snapshot a thousand lines at a time.
const LONGEST_ARRAY_SHOWN: usize = 20;

fn runner() -> TimelineRunner {
    TimelineRunner::new()
        .with_temporary_database()
        .mask_uuids()
        .mask_times()
}

#[test]
fn artifact_plugin_timelines() {
    let runner = runner();
    agentic_testing::assert_timelines!(runner, shorten_long_arrays);
}

fn shorten_long_arrays(timeline: &mut Timeline) {
    fn shorten(value: &mut Value) {
        match value {
            Value::Array(items) if items.len() > LONGEST_ARRAY_SHOWN => {
                *value = Value::String(format!("[array of {} items]", items.len()));
            }
            Value::Array(items) => items.iter_mut().for_each(shorten),
            Value::Object(fields) => fields.values_mut().for_each(shorten),
            _ => {}
        }
    }
    shorten(&mut timeline.prompt);
    timeline.events.iter_mut().for_each(shorten);
    timeline.requests.iter_mut().for_each(shorten);
}

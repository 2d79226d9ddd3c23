//! Every `tests/timelines/*.yaml` case: a prompt played with scripted model turns against this
//! plugin, its whole timeline (outputs, tool inputs and results, events) kept as an insta
//! snapshot in `tests/snapshots/`. A change to what the tools answer shows in the snapshots;
//! `cargo insta review` (or `INSTA_UPDATE=always cargo test`) accepts it.

use agentic::testing::TimelineRunner;
use agentic_plugin_{{name}}::{{Title}}Plugin;

#[test]
fn timelines() {
    let runner = TimelineRunner::new().only_given_plugins().plugin(std::sync::Arc::new({{Title}}Plugin));
    agentic::testing::assert_timelines!(runner);
}

//! Code mode, scenario by scenario: each `timelines/*.yaml` file is a case, and its whole
//! timeline (prompt, events, model requests) is snapshotted.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// The interpreter plugin registers itself through inventory; name the crate so it links.
use agentic_interpreter as _;
use agentic_plugin_script::testing::{TimelineRunner, kit};

#[test]
fn code_mode_timelines() {
    let runner = TimelineRunner::new().plugin(kit::plugin());
    insta::glob!("timelines/*.yaml", |path| {
        let timeline = runner
            .run_file_blocking(path)
            .unwrap_or_else(|error| panic!("{}: {error:#}", path.display()));
        insta::assert_yaml_snapshot!(timeline);
    });
}

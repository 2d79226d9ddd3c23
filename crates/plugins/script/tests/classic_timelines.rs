//! Classic mode, scenario by scenario: each `timelines/*.yaml` file is a case, and its whole
//! timeline is snapshotted.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentic_testing::{TimelineRunner, kit};

#[test]
fn classic_mode_timelines() {
    let runner = TimelineRunner::new().plugin(kit::plugin());
    agentic_testing::assert_timelines!(runner);
}

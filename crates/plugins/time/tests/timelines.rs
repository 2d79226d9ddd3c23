//! `time.now` used from a prompt, snapshotted with the timeline helper as any plugin would.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// Integration tests are a separate crate: name the plugin so the linker keeps its registration.
use agentic_plugin_time as _;

use agentic_testing::TimelineRunner;

#[test]
fn time_plugin_timelines() {
    let runner = TimelineRunner::new()
        .mask(
            r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}(Z|[+-]\d{2}:\d{2})",
            "[now]",
        )
        .and_then(|runner| runner.mask(r#""unixMs":\d+"#, r#""unixMs":"[now]""#))
        .and_then(|runner| runner.mask(r#""weekday":"\w+""#, r#""weekday":"[day]""#))
        .and_then(|runner| runner.mask(r#""date":"[\d-]+""#, r#""date":"[date]""#))
        .and_then(|runner| runner.mask(r#""timeOfDay":"[\d:]+""#, r#""timeOfDay":"[time]""#))
        .unwrap()
        .redact_keys(&["unixMs", "weekday", "date", "timeOfDay"]);
    agentic_testing::assert_timelines!(runner);
}

#[tokio::test]
async fn the_plugin_is_discovered_through_inventory() {
    let runtime = agentic_core::Runtime::builder()
        .registered_plugins()
        .build()
        .await
        .unwrap();
    assert!(runtime.services().plugin_ids().contains(&"time".to_owned()));
}

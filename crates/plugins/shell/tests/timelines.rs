//! `shell.exec` used from prompts, in classic and in code mode, over the committed fixture
//! directory (`tests/fixture`), approvals included.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// Integration tests are a separate crate: name the plugins so the linker keeps them.
use agentic_interpreter as _;
use agentic_plugin_shell as _;

use agentic_testing::{Timeline, TimelineRunner};
use serde_json::Value;

#[test]
fn shell_plugin_timelines() {
    let runner = TimelineRunner::new()
        // Durations inside results the model reads as text.
        .mask(r#""durationMs":\d+"#, r#""durationMs":"[ms]""#)
        .unwrap()
        .redact_keys(&["durationMs"]);
    agentic_testing::assert_timelines!(runner, join_live_output);
    // The rejected commands never ran.
    assert!(!std::path::Path::new("tests/fixture/created-by-shell-test.txt").exists());
}

/// A terminal hands output over in pieces whose sizes vary from run to run: consecutive live
/// output events of one call are joined into one, so the snapshot holds what was streamed.
fn join_live_output(timeline: &mut Timeline) {
    let mut joined: Vec<Value> = Vec::new();
    for event in timeline.events.drain(..) {
        let call = live_output_call(&event);
        if let (Some(call), Some(last)) = (&call, joined.last_mut())
            && live_output_call(last).as_ref() == Some(call)
        {
            let delta = event["data"]["delta"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let text = last["data"]["delta"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
                + &delta;
            last["data"]["delta"] = Value::String(text);
            continue;
        }
        joined.push(event);
    }
    timeline.events = joined;
}

/// The call a `prompt.stream` event carries live output of; `None` for the model's own text.
fn live_output_call(event: &Value) -> Option<String> {
    (event["type"] == "prompt.stream")
        .then(|| event["data"]["toolCallId"].as_str().map(str::to_owned))
        .flatten()
}

#[tokio::test]
async fn the_plugin_is_discovered_through_inventory() {
    let runtime = agentic_core::Runtime::builder()
        .registered_plugins()
        .build()
        .await
        .unwrap();
    assert!(
        runtime
            .services()
            .plugin_ids()
            .contains(&"shell".to_owned())
    );
}

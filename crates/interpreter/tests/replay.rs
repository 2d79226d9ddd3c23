//! A recorded case against a changed plugin: replayed, the tool does not run and the snapshot
//! shows what was recorded; with the tool marked `live`, the tool runs and the snapshot shows
//! its new output shape. The case is a scratch copy written by the test.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentic_core::{Plugin, PrepareContext, ToolError, define_tool};
use agentic_interpreter as _;
use agentic_testing::TimelineRunner;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

/// `shape.get`, which now answers `{title}` where it used to answer `{name}`, and counts its
/// runs.
struct Shape {
    runs: Arc<AtomicUsize>,
}

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

#[async_trait]
impl Plugin for Shape {
    fn id(&self) -> &str {
        "shape"
    }

    async fn prepare(&self, context: &mut PrepareContext) -> anyhow::Result<()> {
        let runs = self.runs.clone();
        context.add_tool(
            define_tool("shape.get", "The shape", move |_cx, _input: Nothing| {
                let runs = runs.clone();
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, ToolError>(serde_json::json!({ "title": "B" }))
                }
            })
            .into_arc(),
        );
        Ok(())
    }
}

const CASE: &str = r#"description: recorded when shape.get answered {name}
input: What shape is it?
mode: code
turns:
- code: |
    const got = shape.get({});
    output(`The shape: ${JSON.stringify(got)}`);
    done();
recorded:
  calls:
  - tool: shape.get
    input: {}
    output:
      name: A
"#;

#[test]
fn a_changed_output_shape_shows_in_the_snapshot_of_a_recorded_case_only_when_live() {
    let scratch = tempfile::tempdir().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let plugin: Arc<dyn Plugin> = Arc::new(Shape { runs: runs.clone() });
    let runner = TimelineRunner::new().plugin(plugin);

    let replayed_path = scratch.path().join("replayed.yaml");
    std::fs::write(&replayed_path, CASE).unwrap();
    let replayed = runner.run_file_blocking(&replayed_path).unwrap();
    let replayed_text = serde_json::to_string(&replayed.prompt).unwrap();
    assert!(
        replayed_text.contains(r#"The shape: {\"name\":\"A\"}"#),
        "{replayed_text}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0, "a replayed tool ran");

    let live_path = scratch.path().join("live.yaml");
    std::fs::write(&live_path, format!("{CASE}live: [\"shape.*\"]\n")).unwrap();
    let live = runner.run_file_blocking(&live_path).unwrap();
    let live_text = serde_json::to_string(&live.prompt).unwrap();
    assert!(
        live_text.contains(r#"The shape: {\"title\":\"B\"}"#),
        "{live_text}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_ne!(
        serde_json::to_value(&replayed).unwrap(),
        serde_json::to_value(&live).unwrap()
    );
}

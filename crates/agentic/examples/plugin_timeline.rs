//! A timeline test for a plugin: a prompt played with scripted model turns against the
//! plugin's tools, and its whole timeline (what the model was sent, what each tool answered,
//! every event) kept as an insta snapshot. A change to a tool's output shows in the snapshot.
//!
//! `cargo test -p agentic --example plugin_timeline` runs the test at the bottom over
//! `examples/timelines/*.yaml` (snapshots in `examples/snapshots/`);
//! `cargo run -p agentic --example plugin_timeline` plays the same cases and prints the
//! answers. A plugin crate of your own gets the same from `cargo xtask new-plugin --standalone`.

use std::sync::Arc;

use agentic::schemars::JsonSchema;
use agentic::serde::{Deserialize, Serialize};
use agentic::testing::TimelineRunner;
use agentic::{Plugin, PrepareContext, ToolError, async_trait, define_tool};

/// A plugin with one tool, `units.convert`.
struct UnitsPlugin;

/// What the model sends: a distance and its unit.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "agentic::serde", deny_unknown_fields)]
#[schemars(crate = "agentic::schemars")]
struct Distance {
    /// How far.
    value: f64,
    /// `km` or `mi`; the answer is in the other.
    unit: String,
}

#[derive(Serialize, JsonSchema)]
#[serde(crate = "agentic::serde")]
#[schemars(crate = "agentic::schemars")]
struct Converted {
    value: f64,
    unit: &'static str,
}

#[async_trait]
impl Plugin for UnitsPlugin {
    fn id(&self) -> &str {
        "units"
    }

    async fn prepare(&self, context: &mut PrepareContext) -> agentic::Result<()> {
        let convert = define_tool(
            "units.convert",
            "Converts a distance between kilometres and miles",
            |_context, distance: Distance| async move {
                let (factor, unit) = match distance.unit.as_str() {
                    "km" => (0.621_371, "mi"),
                    "mi" => (1.609_344, "km"),
                    other => return Err(ToolError::failed(format!("unit {other}: use km or mi"))),
                };
                let value = (distance.value * factor * 100.0).round() / 100.0;
                Ok(Converted { value, unit })
            },
        );
        context.add_tool(convert.into_arc());
        Ok(())
    }
}

/// Only this plugin takes part, so the snapshots do not change when others do.
fn runner() -> TimelineRunner {
    TimelineRunner::new().only_given_plugins().plugin(Arc::new(UnitsPlugin))
}

#[agentic::main]
async fn main() -> agentic::Result<()> {
    let cases = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/timelines");
    let mut paths: Vec<_> =
        std::fs::read_dir(cases)?.map(|entry| entry.map(|e| e.path())).collect::<Result<_, _>>()?;
    paths.sort();
    for path in paths {
        let timeline = runner().run_file(&path).await?;
        let outputs = timeline.prompt["output"].as_array().cloned().unwrap_or_default();
        let answer = outputs.iter().rev().find_map(|output| output["content"].as_str());
        println!(
            "{}: {}",
            path.file_stem().unwrap_or_default().display(),
            answer.unwrap_or("(no answer)")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn units_timelines() {
        agentic::testing::assert_timelines!(super::runner());
    }
}

//! Tool aliases in code mode: an alias is one more global name for the same function, listed
//! in the system prompt and by `discoverTools()`, and it never shadows a tool's own name or a
//! sandbox built-in.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

// The interpreter plugin registers itself through inventory; name the crate so it links.
use agentic_interpreter as _;

use agentic_core::{Plugin, PrepareContext, ToolError, define_tool};
use agentic_testing::{TimelineCase, TimelineRunner};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

/// `notes.save` asks for `saveNote` (free), `output` (a built-in), `notesList` (another tool's
/// own name) and `save note` (no identifier); `notes.list` asks for `listNotes`.
struct Notes;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SaveInput {
    text: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Nothing {}

#[async_trait]
impl Plugin for Notes {
    fn id(&self) -> &str {
        "notes"
    }

    async fn prepare(&self, context: &mut PrepareContext) -> anyhow::Result<()> {
        context.add_tool(
            define_tool(
                "notes.save",
                "Saves a note",
                |_cx, input: SaveInput| async move {
                    Ok::<_, ToolError>(serde_json::json!({ "saved": input.text }))
                },
            )
            .alias("saveNote")
            .alias("output")
            .alias("notesList")
            .alias("save note")
            .into_arc(),
        );
        context.add_tool(
            define_tool(
                "notes.list",
                "Lists the notes",
                |_cx, _input: Nothing| async move { Ok::<_, ToolError>(vec!["milk".to_owned()]) },
            )
            .alias("listNotes")
            .into_arc(),
        );
        Ok(())
    }
}

#[tokio::test]
async fn aliases_call_the_same_tool_and_never_shadow() {
    let case: TimelineCase = serde_json::from_value(serde_json::json!({
        "description": "Aliases reach the same function; refused aliases leave their names alone.",
        "mode": "code",
        "input": "Save a note and list them",
        "turns": [{ "code": concat!(
            "const saved = saveNote({ text: \"milk\" });\n",
            "const same = saveNote === notesSave && saveNote === tools[\"notes.save\"];\n",
            "const listed = listNotes({});\n",
            "const untouched = notesList === tools[\"notes.list\"] && typeof globalThis[\"save note\"] === \"undefined\";\n",
            "log(JSON.stringify(discoverTools()));\n",
            "output(`saved=${saved.saved} same=${same} listed=${listed.join()} untouched=${untouched}`);\n",
            "done();",
        ) }]
    }))
    .unwrap();
    let timeline = TimelineRunner::new()
        .plugin(Arc::new(Notes))
        .keep_code_mode_system_prompt()
        .run(&case)
        .await
        .unwrap();
    let text = serde_json::to_string(&timeline).unwrap();
    // output() is still the sandbox's own: the line reached the user.
    assert!(
        text.contains("saved=milk same=true listed=milk untouched=true"),
        "{text}"
    );
    let system = timeline.requests[0]["messages"][0]["content"]
        .as_str()
        .unwrap();
    assert!(
        system.contains("\n// Lists the notes (also listNotes)\nnotes.list("),
        "{system}"
    );
    assert!(
        system.contains("\n// Saves a note (also saveNote)\nnotes.save(input: {"),
        "{system}"
    );
    // The snapshot is about the calls; the prompt's wording has its own snapshot.
    let mut timeline = timeline;
    timeline.requests[0]["messages"][0]["content"] = "[code-mode system prompt]".into();
    insta::assert_yaml_snapshot!(timeline);
}

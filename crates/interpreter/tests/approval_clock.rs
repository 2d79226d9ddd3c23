//! Waiting for a person does not count toward a script's wall time, and nothing runs before
//! the person decides.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use agentic_core::{Config, PromptOptions, PromptOutput, PromptState, Runtime, ToolResult};
use agentic_interpreter as _;
use agentic_plugin_script::{ScriptedProvider, Turn};
use agentic_testing::kit;
use serde_json::json;

#[tokio::test]
async fn a_long_approval_wait_does_not_hit_the_time_limit() {
    let provider = Arc::new(ScriptedProvider::new(vec![Turn {
        code: Some(r#"output(kitDelete({ path: "a.txt" })); done();"#.to_owned()),
        ..Turn::default()
    }]));
    let runtime = Runtime::builder()
        .config(Config::from_value(
            json!({ "interpreter": { "sandbox": { "wallTimeMs": 1000 }, "plan": false } }),
        ))
        .registered_plugins()
        .plugin(kit::plugin())
        .provider(provider)
        .build()
        .await
        .unwrap();
    let prompts = runtime.prompts();
    let prompt = prompts
        .create_and_run(PromptOptions {
            user_id: "alice".into(),
            input: Some("delete a.txt".into()),
            mode: Some("code".into()),
            ..PromptOptions::default()
        })
        .await
        .unwrap();
    assert_eq!(prompt.state, PromptState::WaitingForApproval);
    let waiting = prompt
        .output
        .iter()
        .find_map(|output| match output {
            PromptOutput::Tool(tool) if tool.function == "kit.delete" => Some(tool.clone()),
            _ => None,
        })
        .unwrap();
    assert!(
        waiting.result.is_pending(),
        "nothing runs before the decision"
    );

    // Twice the script's whole wall time passes while the person thinks.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let prompt = prompts
        .decide(&prompt.id, &waiting.id, &agentic_core::Verdict::Approve)
        .await
        .unwrap();

    assert_eq!(prompt.state, PromptState::Completed);
    let deleted = prompt.tool_output(&waiting.id).unwrap();
    assert_eq!(
        deleted.result,
        ToolResult::Success {
            output: json!("deleted a.txt")
        }
    );
    assert!(
        matches!(prompt.output.last(), Some(PromptOutput::Text(text)) if text.content == "deleted a.txt")
    );
}

//! Without a working sandbox, a code-mode prompt fails at once with the reason, instead of
//! asking the model to fix what it cannot.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentic_core::{Config, PromptOptions, PromptState, Runtime};
use agentic_interpreter as _;
use agentic_plugin_script::{ScriptedProvider, Turn};
use serde_json::json;

#[tokio::test]
async fn a_missing_worker_program_fails_the_prompt_after_one_model_call() {
    let code = || Turn {
        code: Some("output('hi'); done();".to_owned()),
        ..Turn::default()
    };
    let provider = Arc::new(ScriptedProvider::new(vec![code(), code(), code()]));
    let runtime = Runtime::builder()
        .config(Config::from_value(json!({
            "interpreter": { "sandbox": { "workerProgram": "/nonexistent/agentic-sandbox" } }
        })))
        .registered_plugins()
        .provider(provider.clone())
        .build()
        .await
        .unwrap();
    let prompt = runtime
        .prompts()
        .create_and_run(PromptOptions {
            user_id: "alice".into(),
            input: Some("hi".into()),
            mode: Some("code".into()),
            ..PromptOptions::default()
        })
        .await
        .unwrap();
    assert_eq!(prompt.state, PromptState::Failed);
    let error = prompt.error.unwrap();
    assert!(
        error.starts_with("code mode is unavailable: could not start a sandbox worker: /nonexistent/agentic-sandbox"),
        "{error}"
    );
    assert_eq!(provider.requests().len(), 1);
}

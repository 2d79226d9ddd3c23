//! The scripted provider is selected by config, like any provider, and fails loudly on bad
//! scripts.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentic_core::{Config, PromptOptions, PromptOutput, PromptState, Runtime};
use agentic_plugin_script::ScriptedProvider;

fn script_file(text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!(
        "agentic-script-{}-{}.yaml",
        std::process::id(),
        text.len()
    ));
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn a_provider_spec_in_config_selects_the_script() {
    let path = script_file("- text: scripted hello\n");
    let config =
        Config::from_value(serde_json::json!({ "provider": format!("script:{}", path.display()) }));
    let runtime = Runtime::builder()
        .config(config)
        .registered_plugins()
        .build()
        .await
        .unwrap();
    let prompt = runtime
        .prompts()
        .create_and_run(PromptOptions {
            user_id: "alice".into(),
            input: Some("hi".into()),
            ..PromptOptions::default()
        })
        .await
        .unwrap();
    assert_eq!(prompt.state, PromptState::Completed);
    assert!(
        matches!(&prompt.output[..], [PromptOutput::Text(text)] if text.content == "scripted hello")
    );
    std::fs::remove_file(path).unwrap();
}

#[tokio::test]
async fn an_unknown_provider_names_the_registered_ones() {
    let error = Runtime::builder()
        .registered_plugins()
        .provider_spec("telepathy")
        .build()
        .await
        .err()
        .unwrap();
    assert_eq!(
        error.to_string(),
        "unknown model provider \"telepathy\"; registered providers: script"
    );
}

#[tokio::test]
async fn a_missing_script_file_is_a_clear_error() {
    let error = Runtime::builder()
        .registered_plugins()
        .provider_spec("script:/nonexistent/turns.yaml")
        .build()
        .await
        .err()
        .unwrap();
    assert_eq!(
        format!("{error:#}"),
        "could not create model provider \"script:/nonexistent/turns.yaml\": could not read turn \
         script /nonexistent/turns.yaml: No such file or directory (os error 2)"
    );
}

#[test]
fn a_malformed_script_says_where() {
    let error = ScriptedProvider::from_yaml("- text: fine\n- txet: typo\n").unwrap_err();
    let message = format!("{error:#}");
    assert!(message.starts_with("invalid turn script: "), "{message}");
}

#[tokio::test]
async fn without_any_provider_a_prompt_fails_with_advice() {
    let runtime = Runtime::builder().build().await.unwrap();
    let prompt = runtime
        .prompts()
        .create_and_run(PromptOptions {
            user_id: "alice".into(),
            input: Some("hi".into()),
            ..PromptOptions::default()
        })
        .await
        .unwrap();
    assert_eq!(prompt.state, PromptState::Failed);
    let error = prompt.error.unwrap();
    assert!(
        error.contains("no model provider is configured") && error.contains("OPENAI_BASE_URL"),
        "{error}"
    );
}

//! Execution modes are pluggable: a plugin registers a third mode through `setup()` and a
//! prompt runs in it, with the same timeline and events as the built-in modes.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentic_core::mode::ModeError;
use agentic_core::runtime::PromptServiceError;
use agentic_core::{
    ChatMessage, ExecutionModeFactory, ExecutorCreateOptions, ExecutorError, ModelRequest, Plugin,
    Prompt, PromptExecutor, PromptOptions, PromptRecorder, Runtime, SetupContext, State,
};
use agentic_plugin_script::{ScriptedProvider, Turn};
use agentic_testing::{TimelineCase, TimelineRunner};
use async_trait::async_trait;

/// Mode `shout`: one model call, and the answer in capitals.
struct ShoutMode;

impl ExecutionModeFactory for ShoutMode {
    fn id(&self) -> &str {
        "shout"
    }
    fn name(&self) -> &str {
        "Shout (answers in capitals)"
    }
    fn create_executor(&self, options: ExecutorCreateOptions) -> Box<dyn PromptExecutor> {
        let prompt = Prompt::new(
            &options.prompt.user_id,
            "shout",
            options.prompt.model,
            options.prompt.input.clone(),
        );
        let recorder = PromptRecorder::new(
            prompt,
            options.services.events.clone(),
            options.prompt.checkpoint.clone(),
        );
        Box::new(ShoutExecutor { options, recorder })
    }
}

struct ShoutExecutor {
    options: ExecutorCreateOptions,
    recorder: PromptRecorder,
}

#[async_trait]
impl PromptExecutor for ShoutExecutor {
    fn prompt(&self) -> &Prompt {
        self.recorder.prompt()
    }
    fn state(&self) -> &State {
        &self.options.prompt.state
    }
    async fn run(&mut self) -> Result<Prompt, ExecutorError> {
        let input = self.options.prompt.input.clone().unwrap_or_default();
        let request = ModelRequest::new(self.options.prompt.model, vec![ChatMessage::user(input)]);
        match self
            .options
            .services
            .completion
            .complete_text(request)
            .await
        {
            Ok(response) => {
                self.recorder.add_usage(&response.usage);
                let loud = response.text.to_uppercase();
                self.recorder.stream(&loud);
                self.recorder.push_text(&loud).await?;
                self.recorder.complete().await?;
            }
            Err(error) => self.recorder.fail(&error.to_string()).await?,
        }
        Ok(self.recorder.prompt().clone())
    }
}

struct ShoutPlugin;

#[async_trait]
impl Plugin for ShoutPlugin {
    fn id(&self) -> &str {
        "shout"
    }
    async fn setup(&self, context: &mut SetupContext<'_>) -> anyhow::Result<()> {
        context.modes.register(Arc::new(ShoutMode))?;
        Ok(())
    }
}

#[tokio::test]
async fn a_plugin_registers_a_third_mode_and_a_prompt_runs_in_it() {
    let case = TimelineCase {
        input: "say hi".to_owned(),
        mode: Some("shout".to_owned()),
        turns: vec![Turn {
            text: Some("hi there".to_owned()),
            ..Turn::default()
        }],
        ..TimelineCase::default()
    };
    let timeline = TimelineRunner::new()
        .plugin(Arc::new(ShoutPlugin))
        .run(&case)
        .await
        .unwrap();
    insta::assert_yaml_snapshot!(timeline);
}

async fn runtime_with(plugins: Vec<Arc<dyn Plugin>>) -> anyhow::Result<Runtime> {
    let mut builder = Runtime::builder().provider(Arc::new(ScriptedProvider::new(vec![])));
    for plugin in plugins {
        builder = builder.plugin(plugin);
    }
    builder.build().await
}

#[tokio::test]
async fn an_unknown_mode_fails_and_lists_the_registered_ones() {
    let runtime = runtime_with(vec![Arc::new(ShoutPlugin)]).await.unwrap();
    let error = runtime
        .prompts()
        .create(PromptOptions {
            user_id: "alice".to_owned(),
            input: Some("hi".to_owned()),
            mode: Some("telepathy".to_owned()),
            ..PromptOptions::default()
        })
        .err()
        .unwrap();
    assert_eq!(
        error,
        PromptServiceError::Mode(ModeError::Unknown {
            mode: "telepathy".to_owned(),
            registered: vec!["classic".to_owned(), "shout".to_owned()],
        })
    );
    assert_eq!(
        error.to_string(),
        "unknown execution mode \"telepathy\"; registered modes: classic, shout"
    );
}

#[tokio::test]
async fn two_plugins_with_one_id_fail_at_startup() {
    let error = runtime_with(vec![Arc::new(ShoutPlugin), Arc::new(ShoutPlugin)])
        .await
        .err()
        .unwrap();
    assert_eq!(error.to_string(), "plugin id \"shout\" is registered twice");
}

struct SecondShout;

#[async_trait]
impl Plugin for SecondShout {
    fn id(&self) -> &str {
        "shout-again"
    }
    async fn setup(&self, context: &mut SetupContext<'_>) -> anyhow::Result<()> {
        context.modes.register(Arc::new(ShoutMode))?;
        Ok(())
    }
}

#[tokio::test]
async fn two_modes_with_one_id_fail_at_startup() {
    let error = runtime_with(vec![Arc::new(ShoutPlugin), Arc::new(SecondShout)])
        .await
        .err()
        .unwrap();
    assert_eq!(
        format!("{error:#}"),
        "plugin \"shout-again\" failed to set up: execution mode \"shout\" is registered twice"
    );
}

#[tokio::test]
async fn the_script_plugin_is_discovered_through_inventory() {
    let runtime = Runtime::builder()
        .registered_plugins()
        .build()
        .await
        .unwrap();
    assert_eq!(runtime.services().plugin_ids(), vec!["script".to_owned()]);
}

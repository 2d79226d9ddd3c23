//! A new execution mode, from a plugin: `setup()` registers it, and prompts name it. This
//! one answers without a model, with the message read back in capitals; a real mode asks
//! `services.completion` and runs tools through the prepared `ToolSet`.
//!
//! `cargo run -p agentic --example custom_mode`

use std::sync::Arc;

use agentic::async_trait::async_trait;
use agentic::{
    Agent, Driven, ExecutionModeFactory, ExecutorBase, ExecutorCreateOptions, ExecutorError,
    ModeDriver, Plugin, Prompt, PromptExecutor, SetupContext,
};

/// Registers mode `shout`.
struct ShoutPlugin;

#[async_trait]
impl Plugin for ShoutPlugin {
    fn id(&self) -> &str {
        "shout"
    }

    async fn setup(&self, context: &mut SetupContext<'_>) -> agentic::Result<()> {
        context.modes.register(Arc::new(ShoutMode))?;
        Ok(())
    }
}

struct ShoutMode;

impl ExecutionModeFactory for ShoutMode {
    fn id(&self) -> &str {
        "shout"
    }
    fn name(&self) -> &str {
        "Shout (reads the message back)"
    }
    fn create_executor(&self, options: ExecutorCreateOptions) -> Box<dyn PromptExecutor> {
        Box::new(Driven(ShoutExecutor { base: ExecutorBase::new(options) }))
    }
}

/// The shared skeleton (`ExecutorBase`) holds the prompt and its recorder, the only way to
/// change a prompt, so this mode's timeline and events are the same shapes as every mode's.
/// `Driven` runs it: it checks the prompt may run before `advance`, and answers for the
/// prompt and its state.
struct ShoutExecutor {
    base: ExecutorBase,
}

#[async_trait]
impl ModeDriver for ShoutExecutor {
    fn base(&self) -> &ExecutorBase {
        &self.base
    }

    async fn advance(&mut self) -> Result<Prompt, ExecutorError> {
        let input = self.base.prompt().input.clone().unwrap_or_default();
        self.base.recorder.push_unstreamed_text(&input.to_uppercase()).await?;
        self.base.recorder.complete().await?;
        Ok(self.base.prompt().clone())
    }
}

#[agentic::main]
async fn main() -> agentic::Result<()> {
    let agent = Agent::builder().plugin(ShoutPlugin).mode("shout").build().await?;
    println!("{}", agent.run("hello, modes").await?.answer());
    Ok(())
}

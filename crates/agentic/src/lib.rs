//! LLM agents with tools: the one crate to depend on.
//!
//! An agent takes a message and works with tools until it has an answer, in one of two
//! modes: `classic` (the model calls tools by name, agentic validates and runs each call) or
//! `code` (the model writes JavaScript that runs in a sandbox, where every tool is a
//! function). Conversations are stored (SQLite in memory by default, a file or PostgreSQL when
//! you say so), tool calls can wait for a person, and every step is recorded in the same
//! timeline whichever mode ran.
//!
//! ```no_run
//! /// Today's weather in a city.
//! #[agentic::tool(id = "weather.today")]
//! async fn weather(city: String) -> String {
//!     format!("sunny, 21 °C in {city}")
//! }
//!
//! #[agentic::main]
//! async fn main() -> agentic::Result<()> {
//!     let agent = agentic::Agent::builder().mode("code").tool(weather()).build().await?;
//!     println!("{}", agent.run("What is the weather in Lyon today?").await?.answer());
//!     Ok(())
//! }
//! ```
//!
//! # Features
//! One cargo feature per plugin and provider, so that what you enable is linked and
//! registered, with nothing else to write. The default set is `code`, `everyday` (`fs`,
//! `shell`, `web`, `time`, `todo`, `memory`, `artifact`), `local` (the embedded model),
//! `openai` (any OpenAI-compatible server), `anthropic` (Anthropic's Messages API) and
//! `gemini` (the Gemini API). Also:
//! `mcp`, `trigger`, `script` (scripted turns) and `testing` (the test kit).
//!
//! # What is public
//! [`Agent`] and what it returns are the front door. The re-exported contract
//! ([`Tool`], [`Plugin`], [`ModelProvider`], [`ExecutionModeFactory`] and what they are
//! handed) is what a plugin or mode author implements. [`core`] and [`conversation`] are the
//! crates underneath, for what the agent does not cover (an HTTP server, several users).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod agent;
mod linked;

pub use agent::{Agent, AgentBuilder, ApprovalRequest, Reply};
pub use agentic_macros::{main, tool};
/// The error every fallible call of this crate returns, and its `Result`.
pub use anyhow::{Error, Result};

/// Stored conversations (`agentic-conversation`): the store and the conversation service.
pub use agentic_conversation as conversation;
/// The contract and runtime crate (`agentic-core`), whole.
pub use agentic_core as core;

pub use agentic_core::{
    Approval, Config, ContextItem, Driven, Event, EventPayload, EventSubscription,
    ExecutionModeFactory, ExecutorBase, ExecutorCreateOptions, ExecutorError, FileOutput, FnTool,
    ModeDriver, ModelEvent, ModelKind, ModelProvider, ModelRequest, ModelResponse, Plugin,
    PluginRegistration, PrepareContext, Prompt, PromptExecutor, PromptOptions, PromptOutput,
    PromptState, ProviderError, Received, SetupContext, State, TextOutput, Tool, ToolContext,
    ToolError, ToolOutput, ToolResult, Verdict, define_tool, inventory,
};

/// Code mode's sandbox, for programs that tune it or run it directly.
#[cfg(feature = "code")]
pub use agentic_interpreter as interpreter;

/// The test kit: scripted models, timeline snapshots, a plugin's tools called directly.
#[cfg(feature = "testing")]
pub use agentic_testing as testing;

/// The crates the attributes expand to, so that a program needs no dependency but `agentic`.
/// Not an API: they change with agentic's own versions.
#[doc(hidden)]
pub mod __private {
    pub use schemars;
    pub use serde;
    pub use tokio;
}

/// The async-trait crate, whose attribute is re-exported beside it.
pub use ::async_trait;
/// `#[async_trait]`, for implementing [`Plugin`], [`Tool`], [`ModelProvider`] or a mode:
/// `use agentic::async_trait;` brings in the attribute.
pub use ::async_trait::async_trait;
/// schemars, for a tool's own input and output types (`#[schemars(crate = "agentic::schemars")]`).
pub use schemars;
/// serde, for a tool's own input and output types: derive with
/// `#[derive(agentic::serde::Deserialize)]` and `#[serde(crate = "agentic::serde")]`.
pub use serde;
/// JSON values, as tools and configuration sections take them.
pub use serde_json;
/// The async runtime agentic runs on.
pub use tokio;

/// The names of the two modes every build with `code` has.
pub mod mode {
    /// The model calls tools by name; each call is validated and run.
    pub const CLASSIC: &str = "classic";
    /// The model writes JavaScript that runs in a sandbox, where every tool is a function.
    pub const CODE: &str = "code";
}

/// Serves sandbox scripts and exits when this process was started as a code-mode worker;
/// returns at once otherwise. [`Agent::builder`] calls it, so a program needs it only when
/// it does work of its own (writes to stdout, starts servers) before it builds its agent:
/// then it is the first line of `main`.
pub fn run_worker_if_requested() {
    #[cfg(feature = "code")]
    agentic_interpreter::run_worker_if_requested();
}

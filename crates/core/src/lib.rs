//! The contracts of agentic: prompts and their timeline, tools, plugins, execution modes,
//! events and model providers, plus the classic execution mode that every runtime has.
//!
//! Nothing here talks HTTP, opens a database or embeds a JavaScript engine; those live in
//! the crates around this one (see `docs/architecture.md`).
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod classic;
pub mod config;
pub mod event;
pub mod history;
mod legacy;
pub mod mode;
pub mod plugin;
pub mod prompt;
pub mod provider;
pub mod recorder;
pub mod runtime;
pub mod state;
pub mod telemetry;
pub mod text_calls;
pub mod tokens;
pub mod tool;
pub mod typescript;

pub use config::Config;
pub use event::{Event, EventPayload, EventService, EventSubscription, Received, StreamProgress};
pub use mode::{
    ExecutionModeFactory, ExecutionModeService, ExecutorCreateOptions, ExecutorError, PromptChange,
    PromptCheckpoint, PromptExecutor, Verdict,
};
pub use plugin::{
    ContextItem, Extensions, Plugin, PluginRegistration, PrepareContext, Prepared, ProviderPlugin,
    SetupContext,
};
pub use prompt::{
    ErrorKind, FileOutput, ModelKind, Prompt, PromptOutput, PromptState, PromptUsage, TextOutput,
    ToolOutput, ToolResult,
};
pub use provider::{
    ChatMessage, ChatRole, CompletionService, ModelEvent, ModelProvider, ModelRequest,
    ModelResponse, ModelStream, ProviderError, ProviderFactory, ToolCallRequest, ToolSpec,
};
pub use recorder::PromptRecorder;
pub use runtime::{
    CANCELLED_TOOL_ERROR, Capabilities, ExecutorHandle, INTERRUPTED_TOOL_ERROR, LEFT_OUT_PLUGINS,
    ModeInfo, ModelNames, PromptOptions, PromptService, PromptServiceError, Runtime,
    RuntimeBuilder, Services, TAKEN_OVER_TOOL_ERROR, close_cancelled,
};
pub use state::State;
pub use tool::{
    Approval, Approver, FnTool, InputValidator, ScriptNames, Tool, ToolContext, ToolError, ToolSet,
    UserFileStore, UserFiles, define_tool, offered_schema, portable_schema, schema_of,
};

// Re-exported so that plugin crates can `inventory::submit!` without naming the version.
pub use inventory;

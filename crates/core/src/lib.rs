//! The contracts of agentic: prompts and their timeline, tools, plugins, execution modes,
//! events and model providers, plus the classic execution mode that every runtime has.
//!
//! Nothing here talks HTTP, opens a database or embeds a JavaScript engine; those live in
//! the crates around this one (see `docs/architecture.md`).
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod contract;
pub mod runtime;
pub mod telemetry;
pub mod typescript;

pub use contract::{
    config, event, mode, plugin, prompt, provider, replay, scope, services, state, tokens, tool,
};
pub use runtime::executor::{Driven, ExecutorBase, ModeDriver};
pub use runtime::{classic, history, recorder, text_calls};

pub use config::Config;
pub use event::{
    BatchedCall, Event, EventPayload, EventService, EventSubscription, Received, StreamProgress,
};
pub use mode::{
    ExecutionModeFactory, ExecutionModeService, ExecutorCreateOptions, ExecutorError, PromptChange,
    PromptCheckpoint, PromptExecutor, PromptOptions, Verdict, chosen_places,
};
pub use plugin::{
    ContextItem, Extensions, Plugin, PluginRegistration, PrepareContext, Prepared, ProviderPlugin,
    SetupContext,
};
pub use prompt::{
    DecidedBy, DecisionRecord, ErrorKind, FileOutput, ModelKind, Prompt, PromptOutput, PromptState,
    PromptUsage, Reasoning, ReasoningOutput, TextOutput, ToolOutput, ToolResult,
};
pub use provider::{
    ChatMessage, ChatRole, CompletionService, FailedCall, ModelEvent, ModelProvider, ModelRequest,
    ModelResponse, ModelStream, ProviderError, ProviderFactory, ResultFields, ToolCallRequest,
    ToolChoice, ToolSpec,
};
pub use recorder::PromptRecorder;
pub use runtime::{
    CANCELLED_TOOL_ERROR, ExecutorHandle, INTERRUPTED_TOOL_ERROR, PromptService,
    PromptServiceError, Runtime, RuntimeBuilder, TAKEN_OVER_TOOL_ERROR, close_cancelled,
};
pub use services::{Capabilities, LEFT_OUT_PLUGINS, ModeInfo, ModelNames, Services};
pub use state::State;
pub use tool::{
    Approval, Approver, FnTool, InputValidator, ProposedCall, ScriptNames, Tool, ToolContext,
    ToolError, ToolSet, UserFileStore, UserFiles, define_tool, offered_schema, portable_schema,
    schema_of,
};

// Re-exported so that plugin crates can `inventory::submit!` without naming the version.
pub use inventory;

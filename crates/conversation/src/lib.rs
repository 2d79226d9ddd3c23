//! Conversations that outlive the process.
//!
//! [`ConversationService`] keeps each user's conversations in a database — an embedded SQLite
//! file by default, PostgreSQL when `AGENTIC_DATABASE_URL=postgres://…` — through sea-orm with
//! the same migrations on both. Every output and state change of a prompt is committed before
//! the executor's next step (through [`agentic_core::PromptCheckpoint`]); at startup, prompts
//! the last process left `running` become `interrupted`, and prompts waiting for approval can
//! be approved as if nothing happened. When a conversation's history passes its token budget,
//! the oldest prompts are summarised and archived (see [`compress`]).
//!
//! Plugins add their own tables from `setup()` with [`register_migrations`], and hear about
//! compressed history with [`register_compression_hook`]. Work that runs beside a server (e.g. a
//! scheduler) registers with [`register_background_service`]; `agentic serve` starts it.
#![forbid(unsafe_code)]

pub mod background;
pub mod compress;
pub mod entity;
pub mod migration;
pub mod registry;
pub mod relay;
pub mod service;
pub mod store;
mod writes;

pub use background::{
    BackgroundService, BackgroundServices, BackgroundTasks, register_background_service,
    start_background_services,
};
pub use compress::{
    ArchivedHistory, ArchivedPrompt, CompressionHook, CompressionSettings,
    register_compression_hook,
};
pub use migration::{
    CreateTables, DatabaseSlot, PluginMigrations, attach_database, attach_scratch_database,
    database, register_migrations, tool_database,
};
pub use service::{
    Action, CancelOutcome, ConversationError, ConversationInstance, ConversationService, Decision,
    DecisionForwarder, PromptRequest, RecordedRun, StartedPrompt, WaitingCall, title_from_input,
};
pub use store::{
    Conversation, DATABASE_URL_ENV, Recovery, Store, StoredPrompt, database_url_from_env,
    default_database_path, sqlite_url,
};

/// The ORM, for plugins' own tables.
pub use sea_orm;
/// The migration API plugins implement, re-exported so they use the same version as we do.
pub use sea_orm_migration;

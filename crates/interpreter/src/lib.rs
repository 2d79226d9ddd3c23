//! Code mode: the model writes JavaScript, tools are plain functions in a Boa sandbox, and
//! each script runs in a worker process the host can kill.
//!
//! The `interpreter` plugin registers mode `code` and the `interpreter.run-code` tool. A
//! binary that hosts code mode calls [`run_worker_if_requested`] first thing in `main`, so it
//! can serve as its own sandbox worker.
#![forbid(unsafe_code)]

pub mod engine;
pub mod mode;
mod names;
pub mod plugin;
pub mod prompt;
pub mod protocol;
pub mod sandbox;
pub mod worker;

pub use mode::{CODE_MODE, CodeExecutor};
pub use names::{ToolNames, bindings, function_name};
pub use plugin::{InterpreterConfig, InterpreterPlugin, RUN_CODE_TOOL};
pub use sandbox::{Backend, Execution, Sandbox, SandboxConfig, SandboxError, SandboxEvent};
pub use worker::run_worker_if_requested;

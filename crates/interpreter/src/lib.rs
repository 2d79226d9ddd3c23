//! Code mode: the model writes JavaScript, tools are plain functions in a Boa sandbox, and
//! each script runs in a worker process the host can kill.
//!
//! The `interpreter` plugin registers mode `code` and the `interpreter.run-code` tool. A
//! binary that hosts code mode calls [`run_worker_if_requested`] first thing in `main`, so it
//! can serve as its own sandbox worker. What other crates use is public: the plugin, the
//! sandbox with its wire protocol (for tests and benches that drive scripts directly), and the
//! worker's entry points; the rest stays inside.
#![forbid(unsafe_code)]

mod dry_run;
mod engine;
mod explain;
mod got;
pub mod grammar;
mod history;
mod host;
mod journal;
mod mode;
mod names;
mod plan;
mod plugin;
mod prompt;
mod prose;
pub mod protocol;
mod rules;
mod sandbox;
mod sandbox_metrics;
pub mod shape;
#[cfg(test)]
mod testing;
mod worker;

pub use plugin::{InterpreterConfig, InterpreterPlugin, create_plugin};
pub use sandbox::{Backend, Execution, Sandbox, SandboxConfig, SandboxError, SandboxEvent};
pub use worker::{run_worker_if_requested, worker_process_main};

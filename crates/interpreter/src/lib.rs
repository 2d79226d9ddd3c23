//! Code mode: the model writes JavaScript, tools are plain functions in a Boa sandbox, and
//! each script runs in a worker process the host can kill.
#![forbid(unsafe_code)]

pub mod engine;
pub mod protocol;
pub mod sandbox;
pub mod worker;

pub use sandbox::{Backend, Execution, Sandbox, SandboxConfig, SandboxError, SandboxEvent};
pub use worker::run_worker_if_requested;

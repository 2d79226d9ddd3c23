//! The contract: what plugins, tools, execution modes and model providers implement, and
//! what they are handed. Nothing here names the runtime (`src/runtime/`); the tidy test
//! `the_contract_names_nothing_of_the_runtime` checks that.

pub mod config;
pub mod event;
pub(crate) mod legacy;
pub mod mode;
pub mod plugin;
pub mod prompt;
pub mod provider;
pub mod replay;
pub mod scope;
pub mod services;
pub mod state;
pub mod tokens;
pub mod tool;

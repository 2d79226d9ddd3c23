//! Tools called as a user would call them from a prompt, without a model.

use std::sync::Arc;

use agentic_core::{Config, Prepared, Runtime, Services, State, ToolContext, ToolError};
use serde_json::Value;

/// A runtime with every plugin linked into the test binary, on a database, whose tools are
/// called as `user` with a fresh `prepare()` per call, as each new prompt would.
pub struct ToolHarness {
    services: Arc<Services>,
    _runtime: Option<Runtime>,
}

impl std::fmt::Debug for ToolHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolHarness").finish_non_exhaustive()
    }
}

/// The prompt id tool calls are made under.
const PROMPT: &str = "p";

impl ToolHarness {
    /// A new runtime with `config` (a JSON object of config sections) on the database at
    /// `url`.
    pub async fn open(url: &str, config: Value) -> anyhow::Result<Self> {
        let runtime = Runtime::builder()
            .config(Config::from_value(config))
            .registered_plugins()
            .build()
            .await?;
        let services = runtime.services().clone();
        agentic_conversation::attach_database(&services, url).await?;
        Ok(Self {
            services,
            _runtime: Some(runtime),
        })
    }

    /// The tools of services that already have their database (a conversation service's).
    pub fn on(services: Arc<Services>) -> Self {
        Self {
            services,
            _runtime: None,
        }
    }

    pub fn services(&self) -> &Arc<Services> {
        &self.services
    }

    /// `user`'s tools, as a prompt of theirs gets them.
    pub async fn prepare(&self, user: &str) -> anyhow::Result<Prepared> {
        self.services
            .prepare(user, PROMPT, "classic", &State::default())
            .await
    }

    /// Calls `tool` as `user`, with a fresh `prepare()`.
    pub async fn call(&self, user: &str, tool: &str, input: Value) -> Result<Value, ToolError> {
        let prepared = self
            .prepare(user)
            .await
            .map_err(|error| ToolError::failed(format!("prepare failed: {error:#}")))?;
        self.call_with(&prepared, user, tool, input).await
    }

    /// Calls `tool` as `user` with tools prepared earlier (to see what a running prompt sees).
    pub async fn call_with(
        &self,
        prepared: &Prepared,
        user: &str,
        tool: &str,
        input: Value,
    ) -> Result<Value, ToolError> {
        let context = ToolContext::new(user, PROMPT, State::default(), self.services.clone());
        prepared.tools.invoke(context, tool, input).await
    }

    /// [`Self::call`] that must succeed: panics with the tool's error otherwise.
    pub async fn ok(&self, user: &str, tool: &str, input: Value) -> Value {
        match self.call(user, tool, input.clone()).await {
            Ok(output) => output,
            Err(error) => panic!("{tool} {input} failed: {error}"),
        }
    }

    /// [`Self::call`] that must fail: its error as text; panics if it succeeded.
    pub async fn refused(&self, user: &str, tool: &str, input: Value) -> String {
        match self.call(user, tool, input.clone()).await {
            Ok(output) => panic!("{tool} {input} should fail, gave {output}"),
            Err(error) => error.to_string(),
        }
    }
}

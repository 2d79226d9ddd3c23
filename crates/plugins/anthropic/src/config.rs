//! Provider settings: the `anthropic` config section, overridden by the usual environment
//! variables.

use agentic_core::Config;
use anyhow::Context as _;
use serde::{Deserialize, Serialize};

/// Settings of the Anthropic provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct AnthropicConfig {
    /// `ANTHROPIC_API_KEY`.
    pub api_key: Option<String>,
    /// `ANTHROPIC_BASE_URL`; the API's own address by default.
    pub base_url: String,
    /// What `normal` and `high` mean (`ANTHROPIC_MODEL`, `ANTHROPIC_MODEL_HIGH`).
    pub models: ModelNames,
    /// The most tokens an answer may have when a request does not say (the API requires a
    /// limit).
    pub max_tokens: u32,
    /// Sampling temperature; the API's default when not set. Not sent with `thinking`, which
    /// the API allows only at its default.
    pub temperature: Option<f32>,
    /// Extended thinking with this many tokens to think in (at least 1,024); off when not
    /// set. The thinking is recorded in the timeline and sent back within a tool loop, with
    /// its signature, as the API requires (`ANTHROPIC_THINKING`).
    pub thinking: Option<u32>,
    /// Mark the system prompt, the tool declarations and the conversation so far as cacheable
    /// (`cache_control`), so that the next call of a prompt reads them from the cache.
    pub cache: bool,
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// First retry delay; it doubles per retry up to `retry_max_delay_ms`.
    pub retry_base_delay_ms: u64,
    /// The longest delay between two attempts, unless the server asks for longer.
    pub retry_max_delay_ms: u64,
    /// A stream (or a wait for response headers) that is silent this long is an error.
    pub idle_timeout_ms: u64,
    /// How long connecting may take.
    pub connect_timeout_ms: u64,
}

/// The concrete models behind the two model classes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ModelNames {
    /// The model for ordinary work.
    pub normal: String,
    /// The model for hard work.
    pub high: String,
}

/// The API's address.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The fewest thinking tokens the API accepts.
pub const MIN_THINKING_BUDGET: u32 = 1_024;
/// The API version every request names.
pub const API_VERSION: &str = "2023-06-01";

impl Default for ModelNames {
    fn default() -> Self {
        Self {
            normal: "claude-sonnet-4-5".to_owned(),
            high: "claude-opus-4-1".to_owned(),
        }
    }
}

impl Default for AnthropicConfig {
    fn default() -> Self {
        Self {
            api_key: None,
            base_url: DEFAULT_BASE_URL.to_owned(),
            models: ModelNames::default(),
            max_tokens: 8_192,
            temperature: None,
            thinking: None,
            cache: true,
            max_retries: 2,
            retry_base_delay_ms: 500,
            retry_max_delay_ms: 8_000,
            idle_timeout_ms: 120_000,
            connect_timeout_ms: 10_000,
        }
    }
}

impl AnthropicConfig {
    /// The `anthropic` section of the shared config, with environment variables taking
    /// precedence.
    pub fn resolve(config: &Config) -> anyhow::Result<Self> {
        let mut settings: Self = config
            .plugin("anthropic")
            .context("invalid `anthropic` config section")?;
        let env = |name: &str| {
            std::env::var(name)
                .ok()
                .filter(|value| !value.trim().is_empty())
        };
        if let Some(key) = env("ANTHROPIC_API_KEY") {
            settings.api_key = Some(key);
        }
        if let Some(url) = env("ANTHROPIC_BASE_URL") {
            settings.base_url = url;
        }
        if let Some(model) = env("ANTHROPIC_MODEL") {
            settings.models.normal = model;
        }
        if let Some(model) = env("ANTHROPIC_MODEL_HIGH") {
            settings.models.high = model;
        }
        if let Some(budget) = env("ANTHROPIC_THINKING") {
            settings.thinking = Some(budget.trim().parse().with_context(|| {
                format!("ANTHROPIC_THINKING must be a number of tokens, not {budget:?}")
            })?);
        }
        if let Some(budget) = settings.thinking
            && budget < MIN_THINKING_BUDGET
        {
            anyhow::bail!(
                "anthropic thinking needs at least {MIN_THINKING_BUDGET} tokens to think in, not {budget}"
            );
        }
        Ok(settings)
    }

    /// Settings for a server at `base_url` with `api_key`, everything else default; for tests
    /// and embedding.
    pub fn for_base_url(base_url: &str, api_key: &str) -> Self {
        Self {
            base_url: base_url.to_owned(),
            api_key: Some(api_key.to_owned()),
            ..Self::default()
        }
    }

    /// True when a key was given: without one the API answers nothing.
    pub fn is_configured(&self) -> bool {
        self.api_key.is_some()
    }

    /// Where requests go.
    pub fn messages_url(&self) -> String {
        format!("{}/v1/messages", self.base_url.trim_end_matches('/'))
    }
}

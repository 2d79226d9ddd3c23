//! Provider settings: the `gemini` config section, overridden by the usual environment
//! variables.

use agentic_core::Config;
use anyhow::Context as _;
use serde::{Deserialize, Serialize};

/// Settings of the Gemini provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct GeminiConfig {
    /// `GEMINI_API_KEY`, else `GOOGLE_API_KEY`.
    pub api_key: Option<String>,
    /// `GEMINI_BASE_URL`; the API's own address (with its version, `/v1beta`) by default.
    pub base_url: String,
    /// What `normal` and `high` mean (`GEMINI_MODEL`, `GEMINI_MODEL_HIGH`).
    pub models: ModelNames,
    /// The most tokens an answer may have when a request does not say; the model's own limit
    /// when not set.
    pub max_tokens: Option<u32>,
    /// Sampling temperature; the API's default when not set.
    pub temperature: Option<f32>,
    /// Ask for the model's thought summaries, recorded as reasoning in the timeline.
    pub include_thoughts: bool,
    /// Tokens the model may think in (`thinkingBudget`; 0 turns thinking off where the model
    /// allows, -1 lets it choose); the model's default when not set (`GEMINI_THINKING`).
    pub thinking: Option<i32>,
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

/// The API's address, with the version its streaming and function calling are documented in.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";

impl Default for ModelNames {
    fn default() -> Self {
        Self {
            normal: "gemini-2.5-flash".to_owned(),
            high: "gemini-2.5-pro".to_owned(),
        }
    }
}

impl Default for GeminiConfig {
    fn default() -> Self {
        Self {
            api_key: None,
            base_url: DEFAULT_BASE_URL.to_owned(),
            models: ModelNames::default(),
            max_tokens: None,
            temperature: None,
            include_thoughts: true,
            thinking: None,
            max_retries: 2,
            retry_base_delay_ms: 500,
            retry_max_delay_ms: 8_000,
            idle_timeout_ms: 120_000,
            connect_timeout_ms: 10_000,
        }
    }
}

impl GeminiConfig {
    /// The `gemini` section of the shared config, with environment variables taking
    /// precedence.
    pub fn resolve(config: &Config) -> anyhow::Result<Self> {
        let mut settings: Self = config
            .plugin("gemini")
            .context("invalid `gemini` config section")?;
        let env = |name: &str| {
            std::env::var(name)
                .ok()
                .filter(|value| !value.trim().is_empty())
        };
        if let Some(key) = env("GEMINI_API_KEY").or_else(|| env("GOOGLE_API_KEY")) {
            settings.api_key = Some(key);
        }
        if let Some(url) = env("GEMINI_BASE_URL") {
            settings.base_url = url;
        }
        if let Some(model) = env("GEMINI_MODEL") {
            settings.models.normal = model;
        }
        if let Some(model) = env("GEMINI_MODEL_HIGH") {
            settings.models.high = model;
        }
        if let Some(budget) = env("GEMINI_THINKING") {
            settings.thinking = Some(budget.trim().parse().with_context(|| {
                format!("GEMINI_THINKING must be a number of tokens, not {budget:?}")
            })?);
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

    /// Where a streamed request for `model` goes.
    pub fn stream_url(&self, model: &str) -> String {
        let model = model.strip_prefix("models/").unwrap_or(model);
        format!(
            "{}/models/{model}:streamGenerateContent?alt=sse",
            self.base_url.trim_end_matches('/')
        )
    }
}

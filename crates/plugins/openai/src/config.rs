//! Provider settings: the `openai` config section, overridden by the usual environment
//! variables.

use agentic_core::Config;
use anyhow::Context as _;
use serde::{Deserialize, Serialize};

/// Settings of the OpenAI-compatible provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct OpenAiConfig {
    /// `OPENAI_API_KEY`; local servers usually need none.
    pub api_key: Option<String>,
    /// `OPENAI_BASE_URL`, e.g. `http://localhost:11434/v1` for Ollama.
    pub base_url: String,
    /// What `normal` and `high` mean (`OPENAI_MODEL`, `OPENAI_MODEL_HIGH`).
    pub models: ModelNames,
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// First retry delay; it doubles per retry up to `retry_max_delay_ms`.
    pub retry_base_delay_ms: u64,
    pub retry_max_delay_ms: u64,
    /// A stream (or a wait for response headers) that is silent this long is an error.
    pub idle_timeout_ms: u64,
    pub connect_timeout_ms: u64,
    /// Ask for a usage chunk (`stream_options.include_usage`); some servers reject it.
    pub stream_usage: bool,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    /// Which of OpenAI's APIs to speak: `chat` (Chat Completions, which every compatible
    /// server speaks) or `responses` (the Responses API, which sends reasoning back between
    /// the calls of a tool loop) (`OPENAI_API`). `AGENTIC_PROVIDER=openai-responses:<model>`
    /// picks the Responses API for one model whatever this says.
    pub api: Api,
    /// `reasoning.effort` for reasoning models on the Responses API (`low`, `medium`,
    /// `high`), with their reasoning summaries asked for; not sent when not set.
    pub reasoning_effort: Option<String>,
    /// Whether the base URL was set explicitly (config or environment).
    #[serde(skip)]
    base_url_set: bool,
}

/// One of OpenAI's APIs.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// Chat Completions (`/chat/completions`).
    #[default]
    Chat,
    /// The Responses API (`/responses`), used without storing anything at OpenAI.
    Responses,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ModelNames {
    pub normal: String,
    pub high: String,
}

pub(crate) const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

impl Default for ModelNames {
    fn default() -> Self {
        Self {
            normal: "gpt-4.1-mini".to_owned(),
            high: "gpt-4.1".to_owned(),
        }
    }
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        Self {
            api_key: None,
            base_url: DEFAULT_BASE_URL.to_owned(),
            models: ModelNames::default(),
            max_retries: 2,
            retry_base_delay_ms: 500,
            retry_max_delay_ms: 8_000,
            idle_timeout_ms: 120_000,
            connect_timeout_ms: 10_000,
            stream_usage: true,
            max_tokens: None,
            temperature: None,
            api: Api::Chat,
            reasoning_effort: None,
            base_url_set: false,
        }
    }
}

impl OpenAiConfig {
    /// The `openai` section of the shared config, with environment variables taking precedence.
    pub fn resolve(config: &Config) -> anyhow::Result<Self> {
        let section = config.section("openai");
        let base_url_in_config = section.get("baseUrl").is_some();
        let mut settings: Self = config
            .plugin("openai")
            .context("invalid `openai` config section")?;
        settings.base_url_set = base_url_in_config;
        let env = |name: &str| {
            std::env::var(name)
                .ok()
                .filter(|value| !value.trim().is_empty())
        };
        if let Some(key) = env("OPENAI_API_KEY") {
            settings.api_key = Some(key);
        }
        if let Some(url) = env("OPENAI_BASE_URL") {
            settings.base_url = url;
            settings.base_url_set = true;
        }
        if let Some(model) = env("OPENAI_MODEL") {
            settings.models.normal = model;
        }
        if let Some(model) = env("OPENAI_MODEL_HIGH") {
            settings.models.high = model;
        }
        if let Some(api) = env("OPENAI_API") {
            settings.api = match api.trim().to_ascii_lowercase().as_str() {
                "chat" => Api::Chat,
                "responses" => Api::Responses,
                other => anyhow::bail!("OPENAI_API must be `chat` or `responses`, not {other:?}"),
            };
        }
        Ok(settings)
    }

    /// Settings for a server at `base_url`, everything else default; for tests and embedding.
    pub fn for_base_url(base_url: &str) -> Self {
        Self {
            base_url: base_url.to_owned(),
            base_url_set: true,
            ..Self::default()
        }
    }

    /// True when a key or a server address was given, so this provider is what the user wants.
    pub fn is_configured(&self) -> bool {
        self.api_key.is_some() || self.base_url_set
    }

    pub fn chat_completions_url(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }

    /// Where Responses API requests go.
    pub fn responses_url(&self) -> String {
        format!("{}/responses", self.base_url.trim_end_matches('/'))
    }
}

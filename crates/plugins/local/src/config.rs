//! The `local` section of the shared config.

use std::path::PathBuf;

use agentic_core::Config;
use anyhow::Context;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::provider::Sampling;

/// Settings of the embedded local model (config section `local`).
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LocalConfig {
    /// A GGUF model file to run instead of the default Qwen2.5-Coder-1.5B-Instruct
    /// (`AGENTIC_LOCAL_MODEL` overrides it).
    pub model: Option<PathBuf>,
    /// 0 (the default) decodes greedily: the same prompt always gives the same answer.
    pub temperature: f64,
    /// Nucleus sampling: keep the most likely tokens up to this total probability.
    pub top_p: f64,
    /// Seed of the sampler when `temperature` is above 0. A request that brings a seed of its
    /// own (code mode's sampled programs, seeded per step) is drawn with that seed mixed with
    /// this one, so another value here draws other samples; the default leaves the request's
    /// seed as it is.
    pub seed: u64,
    /// Above 1, recently seen tokens are made less likely (small models loop without it).
    pub repeat_penalty: f32,
    /// How many recent tokens the repeat penalty looks at.
    pub repeat_last_n: usize,
    /// Tokens per answer when the request sets no limit.
    pub max_tokens: usize,
    /// Keep the keys and values of a long prompt's beginning (the system prompt, the tools) on
    /// disk, next to the models, so the next process starts from them instead of reading that
    /// part of the prompt again.
    pub prompt_cache: bool,
    /// Decode under the request's grammar: in classic mode a call names one of the offered
    /// tools and its arguments follow that tool's input schema; in code mode the program is
    /// JavaScript that calls only declared tools with their declared fields. Off decodes
    /// freely (to compare).
    pub constrain: bool,
    /// In classic mode, say the user's question again after tool results, asking for the
    /// answer from them or the next call (see `restate.rs`: a small model otherwise calls the
    /// same tool again). Off sends the conversation as it is (to compare).
    pub restate_question: bool,
}

impl Default for LocalConfig {
    fn default() -> Self {
        Self {
            model: None,
            temperature: 0.0,
            top_p: 0.9,
            seed: DEFAULT_SEED,
            repeat_penalty: 1.1,
            repeat_last_n: 64,
            max_tokens: 512,
            prompt_cache: true,
            constrain: true,
            restate_question: true,
        }
    }
}

/// The sampler's seed unless `[local] seed` says otherwise.
pub const DEFAULT_SEED: u64 = 42;

/// The environment variable that points at a GGUF file to use.
pub const MODEL_ENV: &str = "AGENTIC_LOCAL_MODEL";

impl LocalConfig {
    pub fn resolve(config: &Config) -> anyhow::Result<Self> {
        let settings: Self = config
            .plugin("local")
            .context("the `local` config section is invalid")?;
        anyhow::ensure!(
            settings.temperature >= 0.0 && settings.temperature.is_finite(),
            "local.temperature must be 0 or more"
        );
        anyhow::ensure!(
            settings.top_p > 0.0 && settings.top_p <= 1.0,
            "local.topP must be above 0 and at most 1"
        );
        anyhow::ensure!(settings.max_tokens > 0, "local.maxTokens must be above 0");
        Ok(settings)
    }

    pub fn sampling(&self) -> Sampling {
        Sampling {
            temperature: self.temperature,
            top_p: self.top_p,
            seed: self.seed,
            repeat_penalty: self.repeat_penalty,
            repeat_last_n: self.repeat_last_n,
            constrain: self.constrain,
        }
    }

    /// The model file to run: `AGENTIC_LOCAL_MODEL`, else `local.model`, else the default
    /// model's place in the data directory.
    pub fn model_path(&self) -> anyhow::Result<PathBuf> {
        if let Ok(path) = std::env::var(MODEL_ENV)
            && !path.trim().is_empty()
        {
            return Ok(PathBuf::from(path));
        }
        match &self.model {
            Some(path) => Ok(path.clone()),
            None => crate::pull::default_model_path(),
        }
    }
}

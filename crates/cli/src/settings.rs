//! Where settings come from: flags, then the environment, then `agentic.toml`, then defaults.
//!
//! `agentic.toml` is read from `--config <path>`, else `AGENTIC_CONFIG`, else `./agentic.toml`
//! when it exists. Its top level holds the CLI's own keys (`server`, `database`, `addr`,
//! `provider`); every table is a plugin's or service's config section (`[openai]`,
//! `[interpreter]`, `[conversation]`, `[api]`), passed to the runtime as is.

use std::path::{Path, PathBuf};

use agentic_core::Config;
use anyhow::Context as _;

/// The default address of `agentic serve`, the one the docs' curl examples use.
pub(crate) const DEFAULT_ADDR: &str = "127.0.0.1:4000";

#[derive(Debug, Default)]
pub(crate) struct Settings {
    /// The whole file, as the runtime's config.
    pub config: Config,
}

impl Settings {
    pub(crate) fn load(flag: Option<&Path>) -> anyhow::Result<Self> {
        let path = match flag {
            Some(path) => Some(path.to_path_buf()),
            None => match std::env::var_os("AGENTIC_CONFIG") {
                Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
                _ => Some(PathBuf::from("agentic.toml")).filter(|path| path.is_file()),
            },
        };
        let Some(path) = path else {
            return Ok(Self::default());
        };
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("could not read {}", path.display()))?;
        let value: toml::Value = toml::from_str(&text)
            .with_context(|| format!("{} is not valid TOML", path.display()))?;
        let json = serde_json::to_value(value)?;
        Ok(Self {
            config: Config::from_value(json).with_origin(path.display().to_string()),
        })
    }

    fn key(&self, name: &str) -> Option<String> {
        self.config
            .get(name)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
            .filter(|value| !value.is_empty())
    }

    /// `--server`, else `AGENTIC_SERVER`, else `server` in the file.
    pub(crate) fn server(&self, flag: Option<&str>) -> Option<String> {
        flag.map(str::to_owned)
            .or_else(|| env("AGENTIC_SERVER"))
            .or_else(|| self.key("server"))
    }

    /// `AGENTIC_DATABASE_URL`, else `database` in the file, else the default SQLite file.
    pub(crate) fn database_url(&self) -> anyhow::Result<String> {
        match env(agentic_conversation::DATABASE_URL_ENV).or_else(|| self.key("database")) {
            Some(url) => Ok(url),
            None => agentic_conversation::database_url_from_env(),
        }
    }

    /// Whether spans carry prompts, answers, model messages and tool arguments and results:
    /// `AGENTIC_TRACE_PAYLOADS` (`1`/`true`), else `recordPayloads` in `[telemetry]`.
    pub(crate) fn record_payloads(&self) -> bool {
        match env("AGENTIC_TRACE_PAYLOADS") {
            Some(value) => matches!(value.to_ascii_lowercase().as_str(), "1" | "true" | "yes"),
            None => self
                .config
                .get("telemetry")
                .and_then(|section| section.get("recordPayloads"))
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false),
        }
    }

    /// `--addr`, else `AGENTIC_ADDR`, else `addr` in the file, else 127.0.0.1:4000.
    pub(crate) fn addr(&self, flag: Option<&str>) -> String {
        flag.map(str::to_owned)
            .or_else(|| env("AGENTIC_ADDR"))
            .or_else(|| self.key("addr"))
            .unwrap_or_else(|| DEFAULT_ADDR.to_owned())
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

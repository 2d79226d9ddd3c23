//! Configuration shared by the runtime and its plugins: one JSON object, a section per plugin id.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// Settings for the runtime (top-level keys) and for each plugin (the section named by its id).
#[derive(Debug, Clone, Default)]
pub struct Config {
    root: Map<String, Value>,
}

/// Limits and switches of the runtime itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeLimits {
    /// Characters of one tool result sent to the model; the timeline keeps the whole result.
    pub tool_result_limit: usize,
    /// Model rounds of one classic prompt.
    pub max_rounds: u32,
}

impl Default for RuntimeLimits {
    fn default() -> Self {
        Self {
            tool_result_limit: 50_000,
            max_rounds: 25,
        }
    }
}

impl Config {
    pub fn from_value(value: Value) -> Self {
        match value {
            Value::Object(root) => Self { root },
            _ => Self::default(),
        }
    }

    /// Adds a section unless the config already has one by that id: defaults that depend on
    /// how agentic runs (e.g. `agentic serve` gives every user their own files directory).
    pub fn with_default_section(mut self, id: &str, value: Value) -> Self {
        self.root.entry(id.to_owned()).or_insert(value);
        self
    }

    /// The section of one plugin, or `null` when there is none.
    pub fn section(&self, id: &str) -> Value {
        self.root.get(id).cloned().unwrap_or(Value::Null)
    }

    /// The section of one plugin decoded into its config type; a missing section decodes from `{}`.
    pub fn plugin<T: DeserializeOwned>(&self, id: &str) -> Result<T, serde_json::Error> {
        match self.root.get(id) {
            Some(section) => serde_json::from_value(section.clone()),
            None => serde_json::from_value(Value::Object(Map::new())),
        }
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.root.get(key)
    }

    /// Tool ids (or `prefix.*` patterns) whose calls need approval: the `requireApproval` key.
    pub fn require_approval(&self) -> Vec<String> {
        self.root
            .get("requireApproval")
            .and_then(Value::as_array)
            .map(|patterns| {
                patterns
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn limits(&self) -> RuntimeLimits {
        let defaults = RuntimeLimits::default();
        let number = |key: &str| self.root.get(key).and_then(Value::as_u64);
        RuntimeLimits {
            tool_result_limit: number("toolResultLimit")
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(defaults.tool_result_limit),
            max_rounds: number("maxRounds")
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(defaults.max_rounds),
        }
    }
}

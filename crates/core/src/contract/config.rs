//! Configuration shared by the runtime and its plugins: one JSON object, a section per plugin id.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::prompt::PromptUsage;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// Settings for the runtime (top-level keys) and for each plugin (the section named by its id).
#[derive(Debug, Clone, Default)]
pub struct Config {
    root: Map<String, Value>,
    /// Where it was read from (`agentic.toml`), for errors that name a key.
    origin: Option<String>,
}

/// What a model's tokens cost, per million, in the price table's currency.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ModelPrice {
    /// The price of a million input tokens.
    pub input: f64,
    /// The price of a million output tokens.
    pub output: f64,
    /// The price of a million input tokens read from the provider's prompt cache; the input
    /// price when not given.
    #[serde(default)]
    pub cache_read: Option<f64>,
    /// The price of a million input tokens written to the provider's prompt cache; the input
    /// price when not given.
    #[serde(default)]
    pub cache_write: Option<f64>,
}

impl ModelPrice {
    /// What `input_tokens` and `output_tokens` cost at this price together, none of them
    /// cached.
    pub fn cost(&self, input_tokens: u64, output_tokens: u64) -> f64 {
        let (input, output) = self.costs(&PromptUsage::tokens(input_tokens, output_tokens));
        input + output
    }

    /// What `usage` costs at this price, its input (cache reads and writes at their own
    /// prices) and its output apart.
    pub fn costs(&self, usage: &PromptUsage) -> (f64, f64) {
        let cached = usage.cache_read_tokens + usage.cache_write_tokens;
        let uncached = usage.input_tokens.saturating_sub(cached);
        // Token counts stay far below 2^53, where f64 stops being exact.
        #[allow(clippy::cast_precision_loss)]
        let input = uncached as f64 * self.input
            + usage.cache_read_tokens as f64 * self.cache_read.unwrap_or(self.input)
            + usage.cache_write_tokens as f64 * self.cache_write.unwrap_or(self.input);
        #[allow(clippy::cast_precision_loss)]
        let output = usage.output_tokens as f64 * self.output;
        (input / 1_000_000.0, output / 1_000_000.0)
    }
}

/// The price table, by model name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prices {
    models: BTreeMap<String, ModelPrice>,
}

impl Prices {
    /// The price of `model`: its own entry, else the longest entry that is a prefix of it
    /// ending at a `-`, `:`, `@` or `/` of the name.
    pub fn of(&self, model: &str) -> Option<ModelPrice> {
        if let Some(price) = self.models.get(model) {
            return Some(*price);
        }
        self.models
            .iter()
            .filter(|(name, _)| {
                model.starts_with(name.as_str())
                    && model[name.len()..].starts_with(['-', ':', '@', '/'])
            })
            .max_by_key(|(name, _)| name.len())
            .map(|(_, price)| *price)
    }

    /// The cost of the tokens of one call to `model`, if it has a price.
    pub fn cost(&self, model: &str, input_tokens: u64, output_tokens: u64) -> Option<f64> {
        self.of(model)
            .map(|price| price.cost(input_tokens, output_tokens))
    }

    /// True when no model has a price.
    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }
}

/// Limits and switches of the runtime itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeLimits {
    /// Characters of one tool result sent to the model; the timeline keeps the whole result.
    pub tool_result_limit: usize,
    /// Model rounds of one classic prompt.
    pub max_rounds: u32,
    /// How many more replies a mode may sample from a model that can answer differently
    /// ([`crate::ModelProvider::samples`]) in place of one it would not use (code mode's
    /// program that would fail). 0 turns it off; at most [`crate::provider::MAX_CANDIDATES`].
    pub candidates: u32,
    /// How many more replies a mode may sample to vote on an answer it would give (code
    /// mode's program that computed its answer from what it read): the first that agrees
    /// keeps it, two that agree with each other and not with it take its place. 0 (the
    /// default) turns it off; at most [`crate::provider::MAX_CANDIDATES`].
    pub votes: u32,
    /// Whether a mode shows the model what its reads gave before an answer computed from
    /// data it has not seen stands (code mode: the program is written again with that data
    /// in view, and the one written then runs when it passes its check). On by default;
    /// it asks a model that can answer differently one more time in such a turn.
    pub review: bool,
}

impl Default for RuntimeLimits {
    fn default() -> Self {
        Self {
            tool_result_limit: 50_000,
            max_rounds: 25,
            candidates: 3,
            votes: 0,
            review: true,
        }
    }
}

impl Config {
    /// The config held in a JSON object; any other value gives an empty config.
    pub fn from_value(value: Value) -> Self {
        match value {
            Value::Object(root) => Self { root, origin: None },
            _ => Self::default(),
        }
    }

    /// The config, said to come from `origin` (a file's path) in the errors about it.
    #[must_use]
    pub fn with_origin(mut self, origin: impl Into<String>) -> Self {
        self.origin = Some(origin.into());
        self
    }

    /// Checks plugin `id`'s section, if there is one, against the plugin's `schema`; the
    /// error names the key, the problem and where the config came from.
    pub fn check_section(&self, id: &str, schema: &Value) -> anyhow::Result<()> {
        let Some(section) = self.root.get(id) else {
            return Ok(());
        };
        let validator = match jsonschema::validator_for(schema) {
            Ok(validator) => validator,
            // A plugin's broken schema is not the user's mistake.
            Err(error) => {
                tracing::warn!(plugin = id, %error, "a plugin's config schema does not compile");
                return Ok(());
            }
        };
        let problems: Vec<String> = validator
            .iter_errors(section)
            .map(|error| {
                let pointer = error.instance_path().to_string();
                let key = pointer.trim_start_matches('/').replace('/', ".");
                let key = if key.is_empty() {
                    id.to_owned()
                } else {
                    format!("{id}.{key}")
                };
                format!("`{key}`: {error}")
            })
            .collect();
        if problems.is_empty() {
            return Ok(());
        }
        let origin = self.origin.as_deref().unwrap_or("the config");
        anyhow::bail!("{origin}: section [{id}]: {}", problems.join("; "))
    }

    /// Adds a section unless the config already has one by that id: defaults that depend on
    /// how agentic runs (e.g. `agentic serve` gives every user their own files directory).
    pub fn with_default_section(mut self, id: &str, value: Value) -> Self {
        self.root.entry(id.to_owned()).or_insert(value);
        self
    }

    /// Sets a section, replacing the one the config had by that id.
    pub fn with_section(mut self, id: &str, value: Value) -> Self {
        self.root.insert(id.to_owned(), value);
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

    /// The whole config: top-level keys and sections.
    pub fn as_map(&self) -> &Map<String, Value> {
        &self.root
    }

    /// The value of a top-level key or section.
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

    /// Plugins whose tools and context prompts leave out unless a prompt says otherwise (see
    /// [`crate::LEFT_OUT_PLUGINS`]): the `leaveOut` key.
    pub fn left_out_plugins(&self) -> Vec<String> {
        self.root
            .get("leaveOut")
            .and_then(Value::as_array)
            .map(|ids| {
                ids.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The price table: the `prices` key, a table per model name. A model name matches its
    /// own entry, else the longest entry it starts with followed by `-`, `:`, `@` or `/`
    /// (`gpt-4o-mini` prices `gpt-4o-mini-2024-07-18`).
    pub fn prices(&self) -> anyhow::Result<Prices> {
        let Some(table) = self.root.get("prices") else {
            return Ok(Prices::default());
        };
        let models: BTreeMap<String, ModelPrice> = serde_json::from_value(table.clone())
            .map_err(|error| anyhow::anyhow!("the price table (`prices`) is invalid: {error}"))?;
        for (model, price) in &models {
            let prices = [
                ("input", Some(price.input)),
                ("output", Some(price.output)),
                ("cacheRead", price.cache_read),
                ("cacheWrite", price.cache_write),
            ];
            for (what, value) in prices
                .into_iter()
                .filter_map(|(what, value)| value.map(|value| (what, value)))
            {
                if !value.is_finite() || value < 0.0 {
                    anyhow::bail!(
                        "the price table gives {model} an {what} price of {value}; prices are \
                         numbers of at least 0, per million tokens"
                    );
                }
            }
        }
        Ok(Prices { models })
    }

    /// The runtime's limits: the `toolResultLimit`, `maxRounds`, `candidates`, `votes` and
    /// `review` keys, else their defaults.
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
            candidates: number("candidates")
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(defaults.candidates)
                .min(crate::provider::MAX_CANDIDATES),
            votes: number("votes")
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(defaults.votes)
                .min(crate::provider::MAX_CANDIDATES),
            review: self
                .root
                .get("review")
                .and_then(Value::as_bool)
                .unwrap_or(defaults.review),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Config;

    fn prices(table: serde_json::Value) -> anyhow::Result<super::Prices> {
        Config::from_value(json!({ "prices": table })).prices()
    }

    #[test]
    fn a_model_takes_its_own_price_else_the_longest_prefix_at_a_separator() {
        let prices = prices(json!({
            "gpt-4o": { "input": 2.5, "output": 10.0 },
            "gpt-4o-mini": { "input": 0.15, "output": 0.6 },
            "qwen": { "input": 0, "output": 0 },
        }))
        .unwrap();
        assert_eq!(prices.of("gpt-4o").unwrap().input, 2.5);
        assert_eq!(prices.of("gpt-4o-mini-2024-07-18").unwrap().input, 0.15);
        assert_eq!(prices.of("gpt-4o-2024-08-06").unwrap().input, 2.5);
        assert_eq!(prices.of("qwen:7b").unwrap().output, 0.0);
        // A prefix that does not end at a separator is another model.
        assert!(prices.of("gpt-4omega").is_none());
        assert!(prices.of("qwenlong").is_none());
        assert!(prices.of("llama3").is_none());
        let cost = prices.cost("gpt-4o-mini", 1_000_000, 500_000).unwrap();
        assert!((cost - 0.45).abs() < 1e-12, "{cost}");
        assert!(prices.cost("llama3", 10, 10).is_none());
    }

    #[test]
    fn cached_input_costs_its_own_price_and_the_input_price_without_one() {
        let prices = prices(json!({
            "claude": { "input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75 },
            "plain": { "input": 2.0, "output": 8.0 },
        }))
        .unwrap();
        // 10,000 tokens read: 1,000 fresh, 8,000 from the cache, 1,000 written to it.
        let mut usage = crate::PromptUsage::tokens(10_000, 1_000);
        usage.cache_read_tokens = 8_000;
        usage.cache_write_tokens = 1_000;
        let (input, output) = prices.of("claude").unwrap().costs(&usage);
        let expected = (1_000.0 * 3.0 + 8_000.0 * 0.3 + 1_000.0 * 3.75) / 1e6;
        assert!((input - expected).abs() < 1e-12, "{input} vs {expected}");
        assert!((output - 0.015).abs() < 1e-12, "{output}");
        // Without cache prices, cached tokens cost what any input token does.
        let (input, _) = prices.of("plain").unwrap().costs(&usage);
        assert!((input - 0.02).abs() < 1e-12, "{input}");
    }

    #[test]
    fn a_bad_price_table_is_refused_with_what_is_wrong() {
        for (table, says) in [
            (json!({ "m": { "input": -1, "output": 1 } }), "at least 0"),
            (json!({ "m": { "input": 1 } }), "missing field `output`"),
            (
                json!({ "m": { "input": 1, "output": 1, "cached": 1 } }),
                "unknown field `cached`",
            ),
            (
                json!({ "m": { "input": "cheap", "output": 1 } }),
                "invalid type",
            ),
            (json!(["m"]), "invalid type"),
            (
                json!({ "m": { "input": 1, "output": 1, "cacheRead": -0.5 } }),
                "cacheRead price of -0.5",
            ),
        ] {
            let error = prices(table.clone()).unwrap_err().to_string();
            assert!(error.contains(says), "{table}: {error}");
            assert!(error.contains("price"), "{error}");
        }
        assert!(Config::default().prices().unwrap().is_empty());
    }
}

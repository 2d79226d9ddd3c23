//! The timeline snapshot helper: run a prompt against scripted model turns and capture the
//! whole timeline (the prompt, its events in order, and every request the model received)
//! as one redacted value to snapshot with insta.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use agentic_core::{Config, Plugin, Runtime};
use anyhow::{Context as _, bail};
use regex::Regex;
use serde::Serialize;
use serde_json::Value;

pub use agentic_plugin_script::{Expect, HistoryPrompt, Recording, TimelineCase};

/// What a scenario produced, ids and timestamps redacted. Serialize it with insta.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timeline {
    /// The final prompt.
    pub prompt: Value,
    /// Every event published while the prompt ran, in order (`seq` and user left out).
    pub events: Vec<Value>,
    /// Every request the model received, as messages and offered tool names.
    pub requests: Vec<Value>,
    /// Model turns the scenario scripted but the prompt never asked for.
    pub unused_turns: usize,
}

/// Runs [`TimelineCase`]s. By default every plugin linked into the test binary takes part.
#[derive(Clone)]
pub struct TimelineRunner {
    plugins: Vec<Arc<dyn Plugin>>,
    registered: bool,
    masks: Vec<(Regex, String)>,
    redacted_keys: Vec<String>,
    user_id: String,
    temporary_database: bool,
}

impl std::fmt::Debug for TimelineRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimelineRunner")
            .field("registered", &self.registered)
            .finish_non_exhaustive()
    }
}

impl Default for TimelineRunner {
    fn default() -> Self {
        Self::new()
    }
}

impl TimelineRunner {
    /// A runner over every linked plugin. Tool-call ids that code mode makes up for calls from
    /// the sandbox (`call_` and 32 hex digits) are masked as `call_[random]`, and code mode's
    /// system prompt (its rules, example and tool declarations, up to the context items) as
    /// `[code-mode system prompt]`: rewording it or declaring another tool then leaves every
    /// timeline alone. [`Self::keep_code_mode_system_prompt`] shows it.
    pub fn new() -> Self {
        Self {
            plugins: Vec::new(),
            registered: true,
            masks: standard_masks(&[
                (r"call_[0-9a-f]{32}", "call_[random]"),
                (CODE_MODE_SYSTEM_PROMPT, "[code-mode system prompt]$1"),
            ]),
            redacted_keys: Vec::new(),
            user_id: "alice".to_owned(),
            temporary_database: false,
        }
    }

    /// Shows code mode's system prompt whole instead of masking it, for the one snapshot that
    /// is about it.
    pub fn keep_code_mode_system_prompt(mut self) -> Self {
        self.masks
            .retain(|(regex, _)| regex.as_str() != CODE_MODE_SYSTEM_PROMPT);
        self
    }

    /// Gives each case a database of its own, a SQLite file removed after the case, for
    /// plugins that keep tables.
    pub fn with_temporary_database(mut self) -> Self {
        self.temporary_database = true;
        self
    }

    /// Adds a plugin by value, e.g. one defined in the test itself.
    pub fn plugin(mut self, plugin: Arc<dyn Plugin>) -> Self {
        self.plugins.push(plugin);
        self
    }

    /// Leaves out the plugins linked through `inventory`; only [`Self::plugin`]s take part.
    pub fn only_given_plugins(mut self) -> Self {
        self.registered = false;
        self
    }

    /// Replaces every match of `pattern` in any string of the timeline, for values that change
    /// from run to run (clock readings, temporary paths).
    pub fn mask(mut self, pattern: &str, replacement: &str) -> anyhow::Result<Self> {
        let regex = Regex::new(pattern).with_context(|| format!("bad mask pattern {pattern}"))?;
        self.masks.push((regex, replacement.to_owned()));
        Ok(self)
    }

    /// Replaces every occurrence of `text` itself, such as a path that differs per checkout.
    pub fn mask_text(mut self, text: &str, replacement: &str) -> Self {
        // An escaped text always compiles.
        if let (false, Ok(regex)) = (text.is_empty(), Regex::new(&regex::escape(text))) {
            self.masks.push((regex, replacement.to_owned()));
        }
        self
    }

    /// Masks UUIDs as `[uuid]`: the ids of rows that plugins return.
    pub fn mask_uuids(mut self) -> Self {
        self.masks.extend(standard_masks(&[(
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "[uuid]",
        )]));
        self
    }

    /// Masks RFC 3339 times as `[time]`: creation times and clock readings.
    pub fn mask_times(mut self) -> Self {
        self.masks.extend(standard_masks(&[(
            r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})",
            "[time]",
        )]));
        self
    }

    /// Replaces the value of every object key named here with `"[redacted]"`.
    pub fn redact_keys(mut self, keys: &[&str]) -> Self {
        self.redacted_keys
            .extend(keys.iter().map(|key| (*key).to_owned()));
        self
    }

    /// Reads a case from YAML and runs it.
    pub async fn run_file(&self, path: &Path) -> anyhow::Result<Timeline> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("could not read {}", path.display()))?;
        let case: TimelineCase = serde_yaml_ng::from_str(&text)
            .with_context(|| format!("invalid timeline case {}", path.display()))?;
        self.run(&case).await
    }

    /// [`Self::run_file`] on its own tokio runtime, for `insta::glob!` closures.
    pub fn run_file_blocking(&self, path: &Path) -> anyhow::Result<Timeline> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?
            .block_on(self.run_file(path))
    }

    pub async fn run(&self, case: &TimelineCase) -> anyhow::Result<Timeline> {
        let provider = agentic_plugin_script::provider_of(case);
        let mut builder = Runtime::builder()
            .config(Config::from_value(Value::Object(case.config.clone())))
            .provider(provider.clone());
        if self.registered {
            builder = builder.registered_plugins();
        }
        for plugin in &self.plugins {
            builder = builder.plugin(plugin.clone());
        }
        // Made before the runtime, so the file outlives every connection to it.
        let database = match self.temporary_database {
            true => Some(crate::TestDatabase::sqlite()?),
            false => None,
        };
        let runtime = builder.build().await?;
        if let Some(database) = &database {
            agentic_conversation::attach_database(runtime.services(), &database.url).await?;
        }
        let played = agentic_plugin_script::play(case, &runtime, &provider, &self.user_id).await?;
        if !played.divergences.is_empty() {
            let list: Vec<String> = played.divergences.iter().map(ToString::to_string).collect();
            bail!(
                "the run made calls its recording does not have (nothing was run for them):\n  {}",
                list.join("\n  ")
            );
        }
        if let Some(expect) = &case.expect {
            expect.check(&played.prompt)?;
        }
        let prompt = played.prompt;
        let events = played
            .events
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<Vec<_>, _>>()?;
        let requests = played
            .requests
            .iter()
            .map(|request| {
                let mut seen = serde_json::json!({
                    "messages": request.messages,
                    "tools": request.tools.iter().map(|tool| tool.name.clone()).collect::<Vec<_>>(),
                });
                if let Some(floor) = request.min_temperature {
                    // As the f32 reads (0.7), not as its f64 widening (0.699999988…).
                    seen["minTemperature"] =
                        serde_json::from_str(&floor.to_string()).unwrap_or_default();
                }
                if let Some(seed) = request.seed {
                    seen["seed"] = seed.into();
                }
                if !request.failed_calls.is_empty() {
                    seen["failedCalls"] = serde_json::json!(request.failed_calls);
                }
                seen
            })
            .collect();
        let mut timeline = Timeline {
            prompt: serde_json::to_value(&prompt)?,
            events,
            requests,
            unused_turns: provider.remaining(),
        };
        self.redact(&mut timeline);
        Ok(timeline)
    }

    fn redact(&self, timeline: &mut Timeline) {
        let mut redactor = Redactor {
            ids: HashMap::new(),
            masks: &self.masks,
            redacted_keys: &self.redacted_keys,
        };
        redactor.value(&mut timeline.prompt);
        for value in timeline
            .events
            .iter_mut()
            .chain(timeline.requests.iter_mut())
        {
            redactor.value(value);
        }
    }
}

/// Snapshots a [`Timeline`] as YAML with insta; takes the same arguments as
/// `insta::assert_yaml_snapshot!`.
#[macro_export]
macro_rules! assert_timeline_snapshot {
    ($($arguments:tt)*) => {
        $crate::__insta::assert_yaml_snapshot!($($arguments)*)
    };
}

/// Code mode's system prompt up to its context items (`\n\n## title`) or its end.
const CODE_MODE_SYSTEM_PROMPT: &str = r"(?s)You work by writing JavaScript\..*?(\n\n## |\z)";

const ID_KEYS: &[&str] = &["id", "promptId", "toolCallId", "conversationId"];
const TIME_KEYS: &[&str] = &["start", "end", "createdAt", "updatedAt", "decidedAt"];

/// Ids become `[id:N]`, numbered by first appearance so links between them stay visible;
/// timestamps become `[ts]`.
struct Redactor<'a> {
    ids: HashMap<String, usize>,
    masks: &'a [(Regex, String)],
    redacted_keys: &'a [String],
}

impl Redactor<'_> {
    fn value(&mut self, value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, child) in map.iter_mut() {
                    if self.redacted_keys.iter().any(|redacted| redacted == key) {
                        *child = Value::String("[redacted]".to_owned());
                        continue;
                    }
                    match child {
                        Value::String(text) if ID_KEYS.contains(&key.as_str()) => {
                            *text = self.id(text);
                        }
                        Value::String(text) if TIME_KEYS.contains(&key.as_str()) => {
                            *text = "[ts]".to_owned();
                        }
                        other => self.value(other),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.value(item)),
            Value::String(text) => {
                for (regex, replacement) in self.masks {
                    if regex.is_match(text) {
                        *text = regex.replace_all(text, replacement.as_str()).into_owned();
                    }
                }
            }
            _ => {}
        }
    }

    fn id(&mut self, id: &str) -> String {
        let next = self.ids.len() + 1;
        let number = *self.ids.entry(id.to_owned()).or_insert(next);
        format!("[id:{number}]")
    }
}

/// Masks built from patterns known to compile.
fn standard_masks(patterns: &[(&str, &str)]) -> Vec<(Regex, String)> {
    patterns
        .iter()
        .filter_map(|(pattern, replacement)| {
            Regex::new(pattern)
                .ok()
                .map(|regex| (regex, (*replacement).to_owned()))
        })
        .collect()
}

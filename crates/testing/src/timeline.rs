//! The timeline snapshot helper: run a prompt against scripted model turns and capture the
//! whole timeline (the prompt, its events in order, and every request the model received)
//! as one redacted value to snapshot with insta.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use agentic_core::{
    Config, EventPayload, ModelKind, Plugin, PromptOptions, PromptState, Received, Runtime, State,
};
use anyhow::{Context as _, bail};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use agentic_plugin_script::{ScriptedProvider, Turn};

/// One scenario, usually read from a YAML file next to the test.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimelineCase {
    /// What the case shows, for the reader; not used otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Earlier prompts of the same conversation, run first; their timelines become history.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryPrompt>,
    pub input: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default)]
    pub model: ModelKind,
    /// Runtime config (top-level keys and plugin sections).
    #[serde(default)]
    pub config: Map<String, Value>,
    /// Overrides the mode's round limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rounds: Option<u32>,
    /// Answers to approval requests, in the order they are asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "yaml_verdicts")]
    pub decisions: Vec<agentic_core::Verdict>,
    /// What the case says it shows, checked before the snapshot is compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Expect>,
    /// The model's turns, for the history prompts first and then this one.
    pub turns: Vec<Turn>,
}

/// How a case must end: checked by the runner, so a snapshot accepted by mistake cannot
/// contradict the case's own description.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    /// The prompt's final state (`completed`, `failed`, `waiting_for_approval`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<PromptState>,
    /// The rules' notices of the turn's tool errors, in order (`repeated`, `afresh`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notices: Option<Vec<String>>,
    /// Words the last text shown to the user contains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

impl Expect {
    /// What of this `prompt` differs from the expectation, if anything.
    fn check(&self, prompt: &agentic_core::Prompt) -> anyhow::Result<()> {
        if let Some(state) = self.state {
            anyhow::ensure!(
                prompt.state == state,
                "the case expects the prompt {}, but it ended {} ({:?})",
                state.as_str(),
                prompt.state.as_str(),
                prompt.error
            );
        }
        if let Some(notices) = &self.notices {
            let found: Vec<&str> = prompt
                .output
                .iter()
                .filter_map(|output| match output {
                    agentic_core::PromptOutput::Tool(tool) => tool.result.notice(),
                    _ => None,
                })
                .collect();
            anyhow::ensure!(
                found == *notices,
                "the case expects the notices {notices:?}, but the turn has {found:?}"
            );
        }
        if let Some(answer) = &self.answer {
            let last = prompt.output.iter().rev().find_map(|output| match output {
                agentic_core::PromptOutput::Text(text) => Some(text.content.as_str()),
                _ => None,
            });
            anyhow::ensure!(
                last.is_some_and(|text| text.contains(answer.as_str())),
                "the case expects the last text to say {answer:?}, but it is {last:?}"
            );
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HistoryPrompt {
    pub input: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

/// A case's decisions as YAML writes them: `approve`, `reject`, or `reject: <reason>`.
mod yaml_verdicts {
    use agentic_core::Verdict;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Written {
        Word(String),
        Reject { reject: Option<String> },
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<Verdict>, D::Error> {
        Vec::<Written>::deserialize(deserializer)?
            .into_iter()
            .map(|written| match written {
                Written::Word(word) if word == "approve" => Ok(Verdict::Approve),
                Written::Word(word) if word == "reject" => Ok(Verdict::Reject { reason: None }),
                Written::Word(word) => Err(serde::de::Error::custom(format!(
                    "unknown decision \"{word}\", expected approve, reject or reject: <reason>"
                ))),
                Written::Reject { reject } => Ok(Verdict::Reject { reason: reject }),
            })
            .collect()
    }

    pub(super) fn serialize<S: Serializer>(
        verdicts: &[Verdict],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        verdicts
            .iter()
            .map(|verdict| match verdict {
                Verdict::Approve => Written::Word("approve".to_owned()),
                Verdict::Reject { reason } => Written::Reject {
                    reject: reason.clone(),
                },
            })
            .collect::<Vec<_>>()
            .serialize(serializer)
    }
}

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
        let provider = Arc::new(ScriptedProvider::new(case.turns.clone()));
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
        let prompts = runtime.prompts();
        let mut subscription = runtime.services().events.subscribe(Some(&self.user_id));
        let state = State::default();

        let mut history = Vec::new();
        for earlier in &case.history {
            let prompt = prompts
                .create_and_run(PromptOptions {
                    user_id: self.user_id.clone(),
                    input: Some(earlier.input.clone()),
                    mode: earlier.mode.clone(),
                    model: case.model,
                    history: history.clone(),
                    state: state.clone(),
                    ..PromptOptions::default()
                })
                .await?;
            history.push(prompt);
        }
        // Only the scenario's own prompt is snapshotted.
        while subscription.try_next().is_some() {}
        let requests_before = provider.requests().len();

        let handle = prompts.create(PromptOptions {
            user_id: self.user_id.clone(),
            input: Some(case.input.clone()),
            mode: case.mode.clone(),
            model: case.model,
            history,
            state,
            max_rounds: case.max_rounds,
            ..PromptOptions::default()
        })?;
        let mut prompt = prompts.run(&handle).await?;
        let mut decisions = case.decisions.iter();
        let mut events = Vec::new();
        loop {
            let mut waiting = None;
            while let Some(received) = subscription.try_next() {
                match received {
                    Received::Event(event) => {
                        if let EventPayload::ApprovalRequested { tool_call_id, .. } = &event.payload
                        {
                            waiting = Some(tool_call_id.clone());
                        }
                        events.push(serde_json::to_value(&event.payload)?);
                    }
                    Received::Lagged(missed) => bail!("the timeline lost {missed} events"),
                }
            }
            if prompt.state != PromptState::WaitingForApproval {
                break;
            }
            let waiting =
                waiting.context("prompt waits for approval but no approval was requested")?;
            prompt = match decisions.next() {
                Some(verdict) => prompts.decide(&prompt.id, &waiting, verdict).await?,
                None => break,
            };
        }
        if decisions.next().is_some() {
            bail!("the case has more decisions than the prompt asked for");
        }
        if let Some(expect) = &case.expect {
            expect.check(&prompt)?;
        }

        let requests = provider.requests()[requests_before..]
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
const TIME_KEYS: &[&str] = &["start", "end", "createdAt", "updatedAt"];

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

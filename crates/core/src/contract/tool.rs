//! Tools: what a model can call. Schemas come from Rust types, input is validated before a
//! tool runs, and every failure (bad input, unknown tool, error, panic) becomes a result the
//! model can read instead of taking the process down.

use std::any::TypeId;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use async_trait::async_trait;
use chrono::Utc;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::prompt::FileOutput;
use crate::services::Services;
use crate::state::State;

mod fn_tool;
mod input;
mod offered;
mod set;

pub use fn_tool::{FnTool, define_tool};
pub use offered::{offered_schema, portable_schema};
pub use set::ToolSet;

/// A callable tool. Most tools are built with [`define_tool`]; implement this by hand only
/// when the schema is not known at compile time.
#[async_trait]
pub trait Tool: Send + Sync {
    /// Dotted id, e.g. `time.now`; the part before the first dot names the plugin.
    fn id(&self) -> &str;
    /// What the tool does, as the model reads it.
    fn description(&self) -> &str;
    /// JSON Schema of the tool's input.
    fn input_schema(&self) -> &Value;
    /// [`Tool::input_schema`] as offered to a model ([`offered_schema`]), shared, for
    /// requests that offer the tool. The default makes it afresh; [`define_tool`]'s tools share
    /// one per input type.
    fn shared_input_schema(&self) -> Arc<Value> {
        Arc::new(offered_schema(self.input_schema()))
    }
    /// JSON Schema of the tool's output, when it has one.
    fn output_schema(&self) -> Option<&Value> {
        None
    }
    /// The input schema compiled for validation, when the tool keeps one: [`define_tool`]
    /// compiles it once per input type, so a prompt does not recompile every tool's schema.
    /// `None` (the default) makes the tool set compile [`Tool::input_schema`] itself.
    fn input_validator(&self) -> Option<InputValidator> {
        None
    }
    /// Other names a mode may offer the tool under besides its id, e.g. `storeArtifact` for
    /// `artifact.store` in code mode. A mode drops any alias that would shadow a name it
    /// already has.
    fn aliases(&self) -> &[String] {
        &[]
    }
    /// Whether this call needs a person's approval before it runs.
    fn approval(&self, _input: &Value) -> Approval {
        Approval::NotRequired
    }
    /// Whether some calls of this tool may need approval, for people browsing the tools (the
    /// call's own [`Tool::approval`] decides).
    fn may_need_approval(&self) -> bool {
        false
    }
    /// Whether running a call twice does no more than running it once (a read, a lookup), so
    /// a call whose process died before its result was stored may simply run again. A tool
    /// that is not idempotent gets an error result saying it was interrupted instead: it
    /// may or may not have taken effect.
    fn idempotent(&self) -> bool {
        false
    }
    /// Whether a call changes nothing (a read, a listing, a lookup): a dry run may run it
    /// for real. A read-only tool is idempotent too.
    fn read_only(&self) -> bool {
        false
    }
    /// What a call would change, for a person deciding about it before it runs (a file
    /// write's diff); `None` when there is nothing more to show than the input.
    async fn preview(&self, _context: ToolContext, _input: &Value) -> Option<String> {
        None
    }
    /// Runs the tool on input that already passed [`Tool::input_schema`].
    async fn invoke(&self, context: ToolContext, input: Value) -> Result<Value, ToolError>;
}

/// Whether a tool call needs a person's approval before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Approval {
    /// It runs without asking.
    NotRequired,
    /// It waits for a person's decision.
    Required {
        /// Why, as the person is shown it.
        reason: String,
    },
}

/// Why a tool call failed; its words are what the model reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// No tool of the set has this id.
    #[error("unknown tool \"{0}\"")]
    UnknownTool(String),
    /// The input does not fit the tool's schema or input type.
    #[error("invalid input for {tool}: {message}")]
    InvalidInput {
        /// The tool's id.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// The tool ran and failed.
    #[error("{0}")]
    Failed(String),
    /// A replayed run has no recorded answer to this call, so nothing was run.
    #[error("{0}")]
    NotRecorded(String),
    /// The tool panicked; the panic was caught.
    #[error("tool \"{tool}\" panicked: {message}")]
    Panicked {
        /// The tool's id.
        tool: String,
        /// The panic's message.
        message: String,
    },
}

impl ToolError {
    /// A plain failure with a message the model will read.
    pub fn failed(message: impl std::fmt::Display) -> Self {
        Self::Failed(message.to_string())
    }
}

impl From<anyhow::Error> for ToolError {
    fn from(error: anyhow::Error) -> Self {
        Self::Failed(format!("{error:#}"))
    }
}

/// What a tool gets besides its input.
#[derive(Clone)]
pub struct ToolContext {
    /// The user on whose behalf the tool runs.
    pub user_id: String,
    /// The prompt that made the call, or a stand-in id for a call made outside one.
    pub prompt_id: String,
    /// The state the tool may read and write.
    pub state: State,
    /// The runtime's services.
    pub services: Arc<Services>,
    /// The call being run, when it came from a prompt's timeline.
    pub tool_call_id: Option<String>,
    files: Arc<Mutex<Vec<FileOutput>>>,
    /// Who can be asked to approve the calls this call makes (a script's), if anyone.
    approver: Option<Arc<dyn Approver>>,
}

/// Someone who can approve a tool call while another call runs, such as the client of
/// `agentic mcp serve` through MCP elicitation: code run by `interpreter.run-code` asks them
/// instead of refusing calls that need approval.
#[async_trait]
pub trait Approver: Send + Sync {
    /// Asks whether `tool` may run with `input` (it needs approval because of `reason`);
    /// `Err(why)` when it may not, or nobody answered.
    async fn approve(&self, tool: &str, reason: &str, input: &Value) -> Result<(), String>;

    /// Asks once about the calls a program plans to make (`summary` says what they come to):
    /// the places (from 0) of those approved, none when the person refused them all. `Err`
    /// when nobody answered. The default asks about each call in turn.
    async fn approve_plan(
        &self,
        summary: &str,
        calls: &[ProposedCall],
    ) -> Result<Vec<usize>, String> {
        let _ = summary;
        let mut approved = Vec::new();
        for (index, call) in calls.iter().enumerate() {
            if self
                .approve(&call.tool, &call.reason, &call.input)
                .await
                .is_ok()
            {
                approved.push(index);
            }
        }
        Ok(approved)
    }
}

/// A call of a plan put to a person ([`Approver::approve_plan`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProposedCall {
    /// The dotted id of its tool.
    pub tool: String,
    /// The call's input.
    pub input: Value,
    /// Why it needs approval.
    pub reason: String,
    /// The line of the program that makes it, when one line plainly does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// What it would change (a file write's diff), when its tool can say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
}

/// How scripts call each tool (`fs.list`, `everything.getSum`, `tools["some id"]`), by tool id.
/// The code-mode plugin puts it in the extensions, so that whoever shows a tool's declaration
/// outside a script (`agentic.search_tools`) names the function a script calls.
#[derive(Clone, Copy)]
pub struct ScriptNames(pub fn(&ToolSet) -> HashMap<String, String>);

impl std::fmt::Debug for ScriptNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptNames").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("user_id", &self.user_id)
            .field("prompt_id", &self.prompt_id)
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    /// A context without a call id or an approver (see [`ToolContext::for_call`] and
    /// [`ToolContext::with_approver`]).
    pub fn new(user_id: &str, prompt_id: &str, state: State, services: Arc<Services>) -> Self {
        Self {
            user_id: user_id.to_owned(),
            prompt_id: prompt_id.to_owned(),
            state,
            services,
            tool_call_id: None,
            files: Arc::default(),
            approver: None,
        }
    }

    /// The same context, whose call's own calls `approver` approves.
    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Who can approve calls made under this one, if anyone.
    pub fn approver(&self) -> Option<&Arc<dyn Approver>> {
        self.approver.as_ref()
    }

    /// The same context (files emitted go to the same list) for one call of the timeline.
    pub fn for_call(&self, tool_call_id: &str) -> Self {
        Self {
            tool_call_id: Some(tool_call_id.to_owned()),
            ..self.clone()
        }
    }

    /// Publishes live output of the running call as `prompt.stream` (with the call's id),
    /// e.g. a shell command's output while it runs. The tool's result is what gets recorded.
    pub fn stream(&self, delta: &str) {
        self.publish_stream(delta, None);
    }

    /// [`Self::stream`] with the tool's count of how far it is, which clients may show as
    /// progress (and `agentic mcp serve` passes on as MCP progress).
    pub fn progress(&self, delta: &str, progress: crate::event::StreamProgress) {
        self.publish_stream(delta, Some(progress));
    }

    fn publish_stream(&self, delta: &str, progress: Option<crate::event::StreamProgress>) {
        self.services.events.publish(
            &self.user_id,
            crate::event::EventPayload::PromptStream {
                prompt_id: self.prompt_id.clone(),
                delta: delta.to_owned(),
                tool_call_id: self.tool_call_id.clone(),
                progress,
            },
        );
    }

    /// Adds a file to the prompt's timeline once the tool call finishes.
    pub fn emit_file(&self, path: &str, mime_type: &str, description: Option<&str>) {
        let now = Utc::now();
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(FileOutput {
                id: uuid::Uuid::new_v4().to_string(),
                path: path.to_owned(),
                mime_type: mime_type.to_owned(),
                description: description.map(str::to_owned),
                start: now,
                end: Some(now),
            });
    }

    /// Takes the files emitted so far.
    pub fn take_files(&self) -> Vec<FileOutput> {
        std::mem::take(&mut *self.files.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Where a plugin puts a file a user should find among their own files (an MCP tool's image,
/// say), and reads one back. The fs plugin provides it in the extensions as [`UserFiles`];
/// without it there is no such place.
#[async_trait]
pub trait UserFileStore: Send + Sync {
    /// Writes `bytes` at `relative` among `user_id`'s files, creating directories; answers
    /// with the path as that user's tools name it.
    async fn save(
        &self,
        user_id: &str,
        relative: &str,
        bytes: Vec<u8>,
    ) -> Result<String, ToolError>;

    /// The bytes of the file at `relative` among `user_id`'s files, when it has at most
    /// `limit` of them.
    async fn read(&self, user_id: &str, relative: &str, limit: u64) -> Result<Vec<u8>, ToolError>;
}

/// The extension that holds the user files' place: `services.extensions.get::<UserFiles>()`.
pub struct UserFiles(pub Arc<dyn UserFileStore>);

impl std::fmt::Debug for UserFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserFiles").finish_non_exhaustive()
    }
}

/// How well a tool matches a search for `query`: each word of the query that meets a word of
/// the tool's `names` (its id, the names it is called by) counts 3, one that meets a word of
/// its `description` 1. A word meets a word it starts or that starts it, so `todos` and `todo`
/// meet. 0 when nothing matches. Code mode's `searchTools` and MCP's `agentic.search_tools`
/// rank by it.
pub fn search_score(query: &str, names: &str, description: &str) -> usize {
    let meets =
        |a: &str, b: &str| a.len() >= 2 && b.len() >= 2 && (a.starts_with(b) || b.starts_with(a));
    let names = search_words(names);
    let description = search_words(description);
    search_words(query)
        .iter()
        .map(|word| {
            3 * usize::from(names.iter().any(|name| meets(name, word)))
                + usize::from(description.iter().any(|other| meets(other, word)))
        })
        .sum()
}

/// Words of a text, lower case, split at anything that is not a letter or digit and between
/// a lower-case letter and an upper-case one (so `fs.readFile` gives `fs`, `read`, `file`).
fn search_words(text: &str) -> Vec<String> {
    let mut spaced = String::new();
    let mut previous_lower = false;
    for c in text.chars() {
        if c.is_uppercase() && previous_lower {
            spaced.push(' ');
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        spaced.push(if c.is_alphanumeric() { c } else { ' ' });
    }
    spaced.split_whitespace().map(str::to_lowercase).collect()
}

/// The JSON Schema of a Rust type, as tools and plugin configs publish it.
pub fn schema_of<T: JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null)
}

/// What a refused input's error adds for the model, after what was wrong: how to do what
/// the input tried (`id`'s input `input`, against its `schema`). Core's words are plain; a
/// mode whose model writes code gives its own ([`ToolSet::with_input_advice`]).
pub type InputAdvice = fn(id: &str, input: &Value, schema: &Value) -> String;

/// The plain advice: a list where one object is expected, and a database-style query
/// operator (`amount: {"$gt": 30000}`), habits of models that tools do not share.
pub fn plain_input_advice(id: &str, input: &Value, schema: &Value) -> String {
    if input.is_array() && schema.get("type").and_then(Value::as_str) == Some("object") {
        return format!(
            " ({id} takes one object per call; for several items, call it once for each)"
        );
    }
    match query_operator(input) {
        Some(QueryOperator { field, value, .. }) => format!(
            " (`{field}: {value}` is a query operator, which tools do not take; a plain value \
             matches only itself. To compare, leave `{field}` out and compare the results)"
        ),
        None => String::new(),
    }
}

/// A field whose value is a database-style query operator (`amount: {"$gt": 30000}`).
#[derive(Debug, Clone, Copy)]
pub struct QueryOperator<'a> {
    /// The field's name.
    pub field: &'a str,
    /// Its value, the operator object (`{"$gt": 30000}`).
    pub value: &'a Value,
    /// The comparison it stands for in code (`>`) and its operand, for the usual six.
    pub comparison: Option<(&'static str, &'a Value)>,
}

/// The first field of `input` that holds a query operator.
pub fn query_operator(input: &Value) -> Option<QueryOperator<'_>> {
    input.as_object()?.iter().find_map(|(field, value)| {
        let operators = value.as_object()?;
        let (operator, operand) = operators.iter().next()?;
        if !operators.keys().all(|key| key.starts_with('$')) {
            return None;
        }
        let comparison = match operator.as_str() {
            "$gt" => Some(">"),
            "$gte" => Some(">="),
            "$lt" => Some("<"),
            "$lte" => Some("<="),
            "$ne" => Some("!=="),
            "$eq" => Some("==="),
            _ => None,
        };
        Some(QueryOperator {
            field,
            value,
            comparison: comparison.map(|comparison| (comparison, operand)),
        })
    })
}

/// A tool's input schema compiled for validation (or why it does not compile).
#[derive(Clone)]
pub struct InputValidator(Result<Arc<jsonschema::Validator>, String>);

impl InputValidator {
    /// Compiles `schema`. A schema that does not compile is kept as such, and every input
    /// checked against it is refused, saying why.
    pub fn compile(schema: &Value) -> Self {
        Self(
            jsonschema::validator_for(schema)
                .map(Arc::new)
                .map_err(|error| error.to_string()),
        )
    }
}

impl std::fmt::Debug for InputValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Ok(_) => f.write_str("InputValidator"),
            Err(error) => write!(f, "InputValidator(broken: {error})"),
        }
    }
}

/// Renders a tool's value as the text a model reads, cut to `limit` characters with a marker
/// saying how much was left out.
pub fn result_text_for_model(value: &Value, limit: usize) -> String {
    let text = match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    cap_text(&text, limit)
}

/// Serialises a time as RFC 3339 in UTC with exactly three fractional digits
/// (`#[serde(serialize_with = "agentic_core::tool::rfc3339_millis")]`). chrono's default
/// writes as many digits as the clock gave (none, 3, 6 or 9), so a tool result would change
/// length with the clock and the database: what a model reads, and what a timeline's token
/// counts measure, should not.
pub fn rfc3339_millis<S: serde::Serializer>(
    time: &chrono::DateTime<Utc>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// Cuts text to `limit` characters, saying how many were cut.
pub fn cap_text(text: &str, limit: usize) -> String {
    let total = text.chars().count();
    if total <= limit {
        return text.to_owned();
    }
    let kept: String = text.chars().take(limit).collect();
    format!(
        "{kept}\n[truncated: {} of {total} characters cut]",
        total - limit
    )
}

/// What a caught panic said (its `&str` or `String` payload).
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(message) = panic.downcast_ref::<&str>() {
        (*message).to_owned()
    } else if let Some(message) = panic.downcast_ref::<String>() {
        message.clone()
    } else {
        "unknown panic".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_text_says_how_much_was_cut() {
        assert_eq!(cap_text("abcdef", 10), "abcdef");
        assert_eq!(
            cap_text("abcdef", 4),
            "abcd\n[truncated: 2 of 6 characters cut]"
        );
        assert_eq!(
            result_text_for_model(&serde_json::json!({"a": 1}), 100),
            r#"{"a":1}"#
        );
    }

    /// A field the tool does not know, which another tool's input has, names that tool: the
    /// model picked the wrong one (`shell.exec({ command, timezone })` for the time in Tokyo).
    #[test]
    fn an_unknown_field_names_the_tools_that_take_it() {
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Command {
            command: String,
        }
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Clock {
            timezone: Option<String>,
        }
        let ok = |_cx: ToolContext, _input: Command| async move { Ok::<_, ToolError>(()) };
        let clock = |_cx: ToolContext, _input: Clock| async move { Ok::<_, ToolError>(()) };
        let tools = ToolSet::new(vec![
            define_tool("shell.exec", "Runs a command", ok).into_arc(),
            define_tool("time.now", "The time", clock).into_arc(),
        ]);
        let error = tools
            .validate(
                "shell.exec",
                &serde_json::json!({ "command": "date", "timezone": "Asia/Tokyo" }),
            )
            .unwrap_err()
            .to_string();
        assert!(
            error.ends_with(
                ". Another tool takes `timezone`: time.now(input?: { timezone?: string | null })"
            ),
            "{error}"
        );
        // A field no other tool has adds nothing.
        let error = tools
            .validate(
                "shell.exec",
                &serde_json::json!({ "command": "date", "colour": "red" }),
            )
            .unwrap_err()
            .to_string();
        assert!(!error.contains("Another tool"), "{error}");
    }

    /// Seen with Qwen2.5-Coder-1.5B (eval, remember-birthday, tuning split): `label: "Lena's
    /// Birthday"`, sent six times over on the regex alone.
    #[test]
    fn a_pattern_error_says_it_in_words_and_offers_a_value_that_would_do() {
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Note {
            /// A label: letters, digits and `-`.
            #[schemars(regex(pattern = "^[A-Za-z0-9][A-Za-z0-9-]{0,63}$"))]
            label: String,
            /// Three digits.
            #[schemars(regex(pattern = "^[0-9]{3}$"))]
            code: Option<String>,
        }
        let ok = |_cx: ToolContext, _input: Note| async move { Ok::<_, ToolError>(()) };
        let tools = ToolSet::new(vec![define_tool("note.save", "Saves", ok).into_arc()]);
        let error = |input: Value| tools.validate("note.save", &input).unwrap_err().to_string();
        let wrong = error(serde_json::json!({ "label": "Lena's Birthday" }));
        assert!(
            wrong.starts_with(
                "invalid input for note.save: /label: \"Lena's Birthday\" does not match \
                 ^[A-Za-z0-9][A-Za-z0-9-]{0,63}$: A label: letters, digits and `-`. \
                 \"Lenas-Birthday\" would do. Expected"
            ),
            "{wrong}"
        );
        // No value is offered when none is easy to find.
        let wrong = error(serde_json::json!({ "label": "a", "code": "12a" }));
        assert!(
            wrong.contains("/code: \"12a\" does not match ^[0-9]{3}$: Three digits. Expected"),
            "{wrong}"
        );
    }

    #[test]
    fn aliases_are_kept_in_the_order_given_and_default_to_none() {
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        struct Nothing {}
        let plain = define_tool("demo.save", "Saves", |_cx, _input: Nothing| async move {
            Ok::<_, ToolError>(())
        });
        assert!(plain.aliases().is_empty());
        let aliased = plain.alias("saveDemo").alias("keep").into_arc();
        assert_eq!(aliased.aliases(), ["saveDemo", "keep"]);
    }
}

//! [`ToolSet`]: the tools one prompt may call, found by id or wire name, validated, approved
//! and invoked, every failure turned into a result the model can read.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt as _;
use tracing::Instrument as _;

use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

use super::input;
use super::{
    Approval, InputAdvice, InputValidator, Tool, ToolContext, ToolError, panic_message,
    plain_input_advice,
};
use crate::telemetry;

/// The tools one prompt may call, with their compiled input validators.
#[derive(Clone)]
pub struct ToolSet {
    tools: BTreeMap<String, PreparedTool>,
    /// Tool ids (or `prefix.*` patterns) that need approval whatever the tool says.
    require_approval: Vec<String>,
    /// What a refused input's error adds for the model.
    advice: InputAdvice,
    /// A recorded run that answers the calls of tools that are not live.
    replay: Option<Arc<crate::replay::Replay>>,
}

impl Default for ToolSet {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

#[derive(Clone)]
struct PreparedTool {
    tool: Arc<dyn Tool>,
    validator: InputValidator,
}

impl std::fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

impl ToolSet {
    /// Builds the set; a later tool with an id already present replaces the earlier one.
    pub fn new(tools: Vec<Arc<dyn Tool>>) -> Self {
        let tools = tools
            .into_iter()
            .map(|tool| {
                let validator = tool
                    .input_validator()
                    .unwrap_or_else(|| InputValidator::compile(tool.input_schema()));
                let prepared = PreparedTool {
                    tool: tool.clone(),
                    validator,
                };
                (tool.id().to_owned(), prepared)
            })
            .collect();
        Self {
            tools,
            require_approval: Vec::new(),
            advice: plain_input_advice,
            replay: None,
        }
    }

    /// The set with `advice` in refused inputs' errors instead of the plain words: a mode
    /// whose model writes code shows it how in that code.
    #[must_use]
    pub fn with_input_advice(mut self, advice: InputAdvice) -> Self {
        self.advice = advice;
        self
    }

    /// The set answering calls from `replay` instead of running them, except calls of the
    /// tools it names live. Inputs are still checked against the tools' schemas first.
    #[must_use]
    pub fn replaying(mut self, replay: Arc<crate::replay::Replay>) -> Self {
        self.replay = Some(replay);
        self
    }

    /// Makes calls of these tools wait for approval: exact ids, or `prefix.*` for every tool
    /// whose id starts with `prefix.` (the `requireApproval` config key).
    pub fn with_required_approval(mut self, patterns: Vec<String>) -> Self {
        self.require_approval = patterns;
        self
    }

    fn approval_required_by_config(&self, id: &str) -> bool {
        self.require_approval
            .iter()
            .any(|pattern| crate::replay::tool_matches(pattern, id))
    }

    /// Tools sorted by id.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.values().map(|prepared| &prepared.tool)
    }

    /// The tool with this id.
    pub fn get(&self, id: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(id).map(|prepared| &prepared.tool)
    }

    /// How many tools the set holds.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// True when the set holds no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Checks input against the tool's schema, naming every problem and where it is.
    pub fn validate(&self, id: &str, input: &Value) -> Result<(), ToolError> {
        let prepared = self
            .tools
            .get(id)
            .ok_or_else(|| ToolError::UnknownTool(id.to_owned()))?;
        let invalid = |message: String| ToolError::InvalidInput {
            tool: id.to_owned(),
            message,
        };
        let validator = match &prepared.validator.0 {
            Ok(validator) => validator,
            Err(reason) => {
                return Err(invalid(format!(
                    "the tool's input schema is broken: {reason}"
                )));
            }
        };
        let schema = prepared.tool.input_schema();
        let problems: Vec<String> = validator
            .iter_errors(input)
            .map(|error| {
                let path = error.instance_path().to_string();
                // `… is not valid under any of the schemas listed in the 'oneOf' keyword`
                // says nothing a model can act on; the allowed values do.
                let allowed = crate::typescript::allowed_values(schema, &path);
                let problem = if let ValidationErrorKind::Pattern { pattern } = error.kind() {
                    // A regex says less to a model than the field's own words, and a value
                    // that would do says more than both.
                    let mut problem = match crate::typescript::description_at(schema, &path) {
                        Some(words) => {
                            format!("{} does not match {pattern}: {words}", error.instance())
                        }
                        None => error.to_string(),
                    };
                    if let Some(fixed) = error
                        .instance()
                        .as_str()
                        .and_then(|text| pattern_fix(validator, input, &path, text))
                    {
                        problem.push_str(&format!(". {} would do", Value::String(fixed)));
                    }
                    problem
                } else if allowed.is_empty() {
                    error.to_string()
                } else {
                    let values: Vec<String> = allowed.iter().map(Value::to_string).collect();
                    format!(
                        "{} is not one of the allowed values: {}",
                        error.instance(),
                        values.join(", ")
                    )
                };
                if path.is_empty() {
                    problem
                } else {
                    format!("{path}: {problem}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            let tool = &prepared.tool;
            let mut problems = problems.join("; ");
            problems.push_str(&(self.advice)(id, input, schema));
            Err(invalid(format!(
                "{problems}. Expected {}. Example: {}{}",
                crate::typescript::call_signature(id, schema),
                crate::typescript::example_call(id, tool.input_schema()),
                self.owners_of_unknown_fields(id, input),
            )))
        }
    }

    /// `. Another tool takes `timezone`: time.now(…)`: for each field of `input` that tool
    /// `id` does not know, the other tools whose input has a field of that name. A model that
    /// passes `timezone` to `shell.exec` picked the wrong tool, and the field names the right
    /// one. Empty when no field is unknown or no other tool has it.
    fn owners_of_unknown_fields(&self, id: &str, input: &Value) -> String {
        /// Tools named per field, so a common field (`path`) does not list every tool.
        const MOST: usize = 3;
        let takes = |tool: &PreparedTool, field: &str| {
            tool.tool
                .input_schema()
                .get("properties")
                .and_then(Value::as_object)
                .is_some_and(|fields| fields.contains_key(field))
        };
        let (Some(input), Some(own)) = (input.as_object(), self.tools.get(id)) else {
            return String::new();
        };
        let mut hints = String::new();
        for field in input.keys().filter(|field| !takes(own, field)) {
            let owners: Vec<(&String, &PreparedTool)> = self
                .tools
                .iter()
                .filter(|(other, tool)| *other != id && takes(tool, field))
                .take(MOST + 1)
                .collect();
            match owners.as_slice() {
                [] => {}
                [(other, tool)] => hints.push_str(&format!(
                    ". Another tool takes `{field}`: {}",
                    crate::typescript::call_signature(other, tool.tool.input_schema())
                )),
                several => {
                    let names: Vec<&str> = several
                        .iter()
                        .take(MOST)
                        .map(|(other, _)| other.as_str())
                        .collect();
                    let more = if several.len() > MOST { ", …" } else { "" };
                    hints.push_str(&format!(
                        ". Other tools take `{field}`: {}{more}",
                        names.join(", ")
                    ));
                }
            }
        }
        hints
    }

    /// The input as the tool takes it. A bare string for a tool whose input has exactly one
    /// required field, a string, is that field: models write `todoCreate("buy milk")` for
    /// `{title: "buy milk"}`. An optional field sent as `null` (small models write
    /// `{unit: null}` for "no unit") is absent, unless its schema takes `null`. Any other
    /// input is returned as it is, for validation to judge.
    pub fn shorthand_input(&self, id: &str, input: Value) -> Value {
        let Value::String(text) = input else {
            let mut input = input;
            if let Some(tool) = self.get(id) {
                input::drop_null_optionals(tool.input_schema(), &mut input);
            }
            return input;
        };
        let field = self.get(id).and_then(|tool| {
            let schema = tool.input_schema();
            let [Value::String(name)] = schema.get("required")?.as_array()?.as_slice() else {
                return None;
            };
            let kind = schema.get("properties")?.get(name)?.get("type")?;
            (kind == "string").then(|| name.clone())
        });
        match field {
            Some(name) => {
                let mut object = serde_json::Map::new();
                object.insert(name, Value::String(text));
                Value::Object(object)
            }
            None => Value::String(text),
        }
    }

    /// Whether some calls of tool `id` may need approval: the tool says so, or the
    /// configuration requires it.
    pub fn may_need_approval(&self, id: &str) -> bool {
        self.get(id)
            .is_some_and(|tool| tool.may_need_approval() || self.approval_required_by_config(id))
    }

    /// Whether tool `id` says a call may run twice ([`Tool::idempotent`]); unknown tools
    /// do not.
    pub fn idempotent(&self, id: &str) -> bool {
        self.get(id).is_some_and(|tool| tool.idempotent())
    }

    /// Whether a dry run runs a call of tool `id` for real: it needs no approval, and its
    /// tool is read-only or idempotent ([`Tool::read_only`], [`Tool::idempotent`]).
    pub fn runs_in_dry_run(&self, id: &str, input: &Value) -> bool {
        self.get(id)
            .is_some_and(|tool| tool.read_only() || tool.idempotent())
            && matches!(self.approval(id, input), Approval::NotRequired)
    }

    /// What a call would change, as its tool previews it ([`Tool::preview`]).
    pub async fn preview(&self, context: ToolContext, id: &str, input: &Value) -> Option<String> {
        self.get(id)?.preview(context, input).await
    }

    /// The approval a call needs; unknown tools need none (they fail anyway).
    pub fn approval(&self, id: &str, input: &Value) -> Approval {
        let Some(tool) = self.get(id) else {
            return Approval::NotRequired;
        };
        match tool.approval(input) {
            Approval::NotRequired if self.approval_required_by_config(id) => Approval::Required {
                reason: "the configuration requires approval for this tool".to_owned(),
            },
            approval => approval,
        }
    }

    /// Validates and runs one call, as an `execute_tool` span that counts in the tool-call
    /// metrics. A panic inside the tool becomes [`ToolError::Panicked`].
    pub async fn invoke(
        &self,
        context: ToolContext,
        id: &str,
        input: Value,
    ) -> Result<Value, ToolError> {
        let known = self.get(id).is_some();
        let label = if known { id } else { telemetry::UNKNOWN_TOOL };
        let span = telemetry::tool_span(label, context.tool_call_id.as_deref());
        if telemetry::record_payloads() {
            span.record("gen_ai.tool.call.arguments", input.to_string());
        }
        let start = std::time::Instant::now();
        let result = self
            .validate_and_invoke(context, id, input, false)
            .instrument(span.clone())
            .await;
        let seconds = start.elapsed().as_secs_f64();
        match &result {
            Ok(value) => telemetry::tool_called(&span, label, seconds, Ok(value)),
            Err(error) => telemetry::tool_called(&span, label, seconds, Err(error)),
        }
        result
    }

    /// Validates and runs one call of a dry run ([`ToolSet::runs_in_dry_run`]): as
    /// [`ToolSet::invoke`], except that a replayed run answers it from the recording without
    /// using the recorded call up, as the real run makes it again.
    pub async fn invoke_dry(
        &self,
        context: ToolContext,
        id: &str,
        input: Value,
    ) -> Result<Value, ToolError> {
        self.validate_and_invoke(context, id, input, true).await
    }

    async fn validate_and_invoke(
        &self,
        context: ToolContext,
        id: &str,
        input: Value,
        dry: bool,
    ) -> Result<Value, ToolError> {
        let recorded = self
            .replay
            .as_ref()
            .filter(|replay| !replay.is_live(id))
            .map(|replay| (replay.clone(), input.clone()));
        let input = self.shorthand_input(id, input);
        self.validate(id, &input)?;
        if let Some((replay, as_made)) = recorded {
            return if dry {
                replay.peek(id, &as_made)
            } else {
                replay.answer(id, &as_made)
            };
        }
        let tool = self
            .get(id)
            .ok_or_else(|| ToolError::UnknownTool(id.to_owned()))?
            .clone();
        match AssertUnwindSafe(tool.invoke(context, input))
            .catch_unwind()
            .await
        {
            Ok(result) => result,
            Err(panic) => Err(ToolError::Panicked {
                tool: id.to_owned(),
                message: panic_message(panic.as_ref()),
            }),
        }
    }
}

/// A value like `text` that the field at `path` of `input` takes, when one is easy to find:
/// `text` with the characters identifiers leave out dropped (`'`) or turned into `-` or `_`
/// (`Lena's Birthday` → `Lenas-Birthday`). Checked against the schema itself, so it is only
/// offered when the field's error goes away with it.
fn pattern_fix(
    validator: &jsonschema::Validator,
    input: &Value,
    path: &str,
    text: &str,
) -> Option<String> {
    let word = |separator: char| {
        let mut out = String::new();
        for c in text
            .chars()
            .filter(|c| !matches!(c, '\'' | '\u{2019}' | '"'))
        {
            if c.is_ascii_alphanumeric() {
                out.push(c);
            } else if !out.is_empty() && !out.ends_with(separator) {
                out.push(separator);
            }
        }
        out.trim_end_matches(separator).to_owned()
    };
    let candidates = [word('-'), word('_'), word('-').to_lowercase()];
    candidates.into_iter().find(|candidate| {
        if candidate.is_empty() || candidate == text {
            return false;
        }
        let mut fixed = input.clone();
        match fixed.pointer_mut(path) {
            Some(slot) => *slot = Value::String(candidate.clone()),
            None => return false,
        }
        !validator
            .iter_errors(&fixed)
            .any(|error| error.instance_path().to_string() == path)
    })
}

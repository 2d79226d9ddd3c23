//! Plans: a program that will make calls needing approval runs first as a dry run, and the
//! person approves what it would do at once. What the dry run runs, what it answers in place
//! of the calls it does not run, and how the real run is held to the approved plan live here;
//! the mode's side (running the dry run, asking, deciding) is `mode/plan.rs`.
//!
//! The plan is a promise about the calls that need approval, never about the program: the
//! real run makes its own calls, and each one needing approval runs only if it matches an
//! approved call of the plan (same tool, same input, each planned call once). Any other call
//! is put to the person as before, saying how it differs.

use std::collections::VecDeque;

use agentic_core::{DecidedBy, Verdict};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The tool output a plan is recorded as: its input is a [`PlanInput`], and it waits for a
/// person like any call that needs approval.
pub(crate) const CODE_PLAN: &str = "code.plan";

/// What a dry run answers in place of a call it does not run: every string of the placeholder
/// starts with this, so that a later call built from it can be told apart.
const PLACEHOLDER_MARK: &str = "<not run yet: ";

/// The deepest a placeholder follows a schema.
const MAX_DEPTH: usize = 8;

/// A call of the plan: one that needs approval, as the dry run made it.
pub(crate) type PlannedCall = agentic_core::ProposedCall;

/// The input of a `code.plan` output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PlanInput {
    /// The `code.execute` output the plan is of.
    pub execution: String,
    pub calls: Vec<PlannedCall>,
    /// Why the real run may not follow the plan, found in the dry run: a call whose input was
    /// built from a placeholder, a dry run that ended in an error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caveats: Vec<String>,
}

impl PlanInput {
    /// What the person is shown as the reason the prompt waits.
    pub(crate) fn reason(&self) -> String {
        let mut tools: Vec<(String, usize)> = Vec::new();
        for call in &self.calls {
            match tools.iter_mut().find(|(tool, _)| *tool == call.tool) {
                Some((_, count)) => *count += 1,
                None => tools.push((call.tool.clone(), 1)),
            }
        }
        let tools: Vec<String> = tools
            .into_iter()
            .map(|(tool, count)| {
                if count == 1 {
                    tool
                } else {
                    format!("{tool} ×{count}")
                }
            })
            .collect();
        let calls = if self.calls.len() == 1 {
            "1 call that needs".to_owned()
        } else {
            format!("{} calls that need", self.calls.len())
        };
        format!("the program plans {calls} approval: {}", tools.join(", "))
    }
}

/// Which placeholder a dry run answers with. A program is dry-run with the first; when it goes
/// on calling tools after a placeholder, again with the second, which differs in every value
/// it can: a program that then makes other calls does different things depending on what
/// the calls not run return, and the plan cannot stand for what it does after that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Guess {
    /// Declared fields, empty lists, zero, `true`, the first of an enum, marked strings.
    First,
    /// Declared fields, lists of two, seven, `false`, the last of an enum, other marked
    /// strings.
    Second,
}

/// A placeholder of the value `schema` declares, for a call of `tool` the dry run did not run.
pub(crate) fn placeholder(schema: Option<&Value>, tool: &str, guess: Guess) -> Value {
    match schema {
        Some(schema) => value_of(schema, schema, tool, guess, 0),
        None => marked(tool, guess),
    }
}

fn marked(tool: &str, guess: Guess) -> Value {
    Value::String(match guess {
        Guess::First => format!("{PLACEHOLDER_MARK}{tool}>"),
        Guess::Second => format!("{PLACEHOLDER_MARK}{tool}> (another guess)"),
    })
}

/// `value` as dry runs with either guess compare it: the strings built from a placeholder are
/// the same.
pub(crate) fn without_guesses(value: &Value) -> Value {
    match value {
        Value::String(text) if text.contains(PLACEHOLDER_MARK) => {
            Value::String(PLACEHOLDER_MARK.to_owned())
        }
        Value::Array(items) => Value::Array(items.iter().map(without_guesses).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(name, field)| (name.clone(), without_guesses(field)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn value_of(schema: &Value, root: &Value, tool: &str, guess: Guess, depth: usize) -> Value {
    let Some(object) = schema.as_object() else {
        return marked(tool, guess);
    };
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    if let Some(target) = object.get("$ref").and_then(Value::as_str) {
        return crate::shape::resolve(target, root).map_or(Value::Null, |target| {
            value_of(target, root, tool, guess, depth + 1)
        });
    }
    for union in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = object
            .get(union)
            .and_then(Value::as_array)
            .and_then(|variants| {
                variants
                    .iter()
                    .find(|variant| variant.get("type").and_then(Value::as_str) != Some("null"))
            })
        {
            return value_of(first, root, tool, guess, depth + 1);
        }
    }
    if let Some(value) = object.get("const") {
        return value.clone();
    }
    if let Some(values) = object.get("enum").and_then(Value::as_array)
        && let Some(value) = match guess {
            Guess::First => values.first(),
            Guess::Second => values.last(),
        }
    {
        return value.clone();
    }
    let kind = match object.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|kind| *kind != "null")
            .unwrap_or("null"),
        _ if object.contains_key("properties") => "object",
        _ => "string",
    };
    match kind {
        "object" => {
            let mut fields = Map::new();
            if let Some(properties) = object.get("properties").and_then(Value::as_object) {
                for (name, field) in properties {
                    fields.insert(name.clone(), value_of(field, root, tool, guess, depth + 1));
                }
            }
            Value::Object(fields)
        }
        "array" => match guess {
            Guess::First => Value::Array(Vec::new()),
            Guess::Second => {
                let item = match object.get("items") {
                    Some(items) => value_of(items, root, tool, guess, depth + 1),
                    None => marked(tool, guess),
                };
                Value::Array(vec![item.clone(), item])
            }
        },
        "integer" | "number" => Value::from(match guess {
            Guess::First => 0,
            Guess::Second => 7,
        }),
        "boolean" => Value::Bool(guess == Guess::First),
        "null" => Value::Null,
        _ => marked(tool, guess),
    }
}

/// Whether `value` holds a placeholder's string: it was built from a call the dry run did not
/// run, so the real run's value will differ.
pub(crate) fn holds_placeholder(value: &Value) -> bool {
    match value {
        Value::String(text) => text.contains(PLACEHOLDER_MARK),
        Value::Array(items) => items.iter().any(holds_placeholder),
        Value::Object(fields) => fields.values().any(holds_placeholder),
        _ => false,
    }
}

/// The line of `code` that makes a call of `names` (how the program may call the tool), when
/// exactly one line does.
pub(crate) fn line_of(code: &str, names: &[String]) -> Option<usize> {
    let mut lines = code.lines().enumerate().filter(|(_, line)| {
        names
            .iter()
            .any(|name| line.contains(&format!("{name}(")) || line.contains(&format!("{name}\"")))
    });
    let (index, _) = lines.next()?;
    lines.next().is_none().then_some(index + 1)
}

/// A plan a person decided: which of its calls may run, taken in the order the real run
/// makes them.
#[derive(Debug, Clone)]
pub(crate) struct DecidedPlan {
    calls: Vec<Planned>,
    /// Who decided, and when: the record each matched call carries.
    pub by: DecidedBy,
    pub decided_at: DateTime<Utc>,
    /// The person's reason for the calls left out, if they gave one.
    rejection: Option<String>,
    /// Why the plan no longer stands, once the real run left it: from then on every call that
    /// needs approval is asked about on its own.
    broken: Option<String>,
    /// What the dry run's reads answered, in order, to notice an answer that changed.
    reads: VecDeque<(String, Value, u64)>,
}

#[derive(Debug, Clone)]
struct Planned {
    tool: String,
    input: Value,
    approved: bool,
    used: bool,
}

/// What the plan says of a call of the real run that needs approval.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Held {
    /// Planned and approved: it runs, as call `index` of the plan.
    Approved { index: usize },
    /// Planned and left out: it fails as rejected, for the person's reason if they gave one.
    Rejected {
        index: usize,
        reason: Option<String>,
    },
    /// Not in the plan, or the plan no longer stands: asked about, saying why.
    Ask(String),
}

impl DecidedPlan {
    pub(crate) fn new(
        input: &PlanInput,
        verdict: &Verdict,
        by: DecidedBy,
        decided_at: DateTime<Utc>,
    ) -> Self {
        let calls = input
            .calls
            .iter()
            .enumerate()
            .map(|(index, call)| Planned {
                tool: call.tool.clone(),
                input: call.input.clone(),
                approved: verdict.rejection_at(index).is_none(),
                used: false,
            })
            .collect();
        let rejection = match verdict {
            Verdict::Reject { reason } | Verdict::ApproveOnly { reason, .. } => reason.clone(),
            Verdict::Approve => None,
        };
        Self {
            calls,
            by,
            decided_at,
            rejection,
            broken: None,
            reads: VecDeque::new(),
        }
    }

    /// With the answers of the dry run's reads, to compare the real run's with.
    pub(crate) fn with_reads(mut self, reads: VecDeque<(String, Value, u64)>) -> Self {
        self.reads = reads;
        self
    }

    /// The places of the approved calls.
    pub(crate) fn approved(&self) -> Vec<usize> {
        (0..self.calls.len())
            .filter(|index| self.calls[*index].approved)
            .collect()
    }

    /// Why the plan no longer stands, if it does not.
    #[cfg(test)]
    pub(crate) fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// What the plan says of a call needing approval; a planned call is taken once.
    pub(crate) fn hold(&mut self, tool: &str, input: &Value) -> Held {
        if let Some(broken) = &self.broken {
            return Held::Ask(format!(
                "asked on its own: the program left its approved plan ({broken})"
            ));
        }
        let found = self
            .calls
            .iter()
            .position(|call| !call.used && call.tool == tool && call.input == *input);
        if let Some(index) = found {
            let call = &mut self.calls[index];
            call.used = true;
            return if call.approved {
                Held::Approved { index }
            } else {
                Held::Rejected {
                    index,
                    reason: self.rejection.clone(),
                }
            };
        }
        let why = self.difference(tool, input);
        self.broken = Some(why.clone());
        Held::Ask(format!("not in the approved plan: {why}"))
    }

    /// How a call that matches no unused planned call differs from the plan.
    fn difference(&self, tool: &str, input: &Value) -> String {
        let described = describe(tool, input);
        let same_tool: Vec<&Planned> = self
            .calls
            .iter()
            .filter(|call| call.tool == tool && !call.used)
            .collect();
        match same_tool.first() {
            Some(next) => format!(
                "the program called {described}; the plan's next {tool} call is {}",
                describe(&next.tool, &next.input)
            ),
            None if self.calls.iter().any(|call| call.tool == tool) => format!(
                "the program called {described}; every {tool} call of the plan was made already"
            ),
            None => format!("the program called {described}; the plan has no {tool} call"),
        }
    }

    /// Notes the answer of a read the real run made; the plan stops standing when it differs
    /// from what the dry run read, as the program may then do other things than it planned.
    pub(crate) fn saw_read(&mut self, tool: &str, input: &Value, result: &Result<Value, String>) {
        if self.broken.is_some() {
            return;
        }
        let Some(position) = self
            .reads
            .iter()
            .position(|(read, read_input, _)| read == tool && read_input == input)
        else {
            return;
        };
        let Some((_, _, answered)) = self.reads.remove(position) else {
            return;
        };
        if answered != fingerprint(result) {
            self.broken = Some(format!(
                "{} answered differently than in the dry run",
                describe(tool, input)
            ));
        }
    }
}

/// A call as the person reads it: `fs.write({"path":"a.txt",…})`, cut short.
pub(crate) fn describe(tool: &str, input: &Value) -> String {
    agentic_core::replay::describe(tool, input, 160)
}

/// A read's answer, as compared between the dry run and the real run.
pub(crate) fn fingerprint(result: &Result<Value, String>) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    match result {
        Ok(value) => value.to_string().hash(&mut hasher),
        Err(error) => error.hash(&mut hasher),
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn plan_of(calls: &[(&str, Value)]) -> PlanInput {
        PlanInput {
            execution: "x".to_owned(),
            calls: calls
                .iter()
                .map(|(tool, input)| PlannedCall {
                    tool: (*tool).to_owned(),
                    input: input.clone(),
                    reason: "writes".to_owned(),
                    line: None,
                    preview: None,
                })
                .collect(),
            caveats: Vec::new(),
        }
    }

    fn decided(input: &PlanInput, verdict: Verdict) -> DecidedPlan {
        let by = DecidedBy::User {
            user_id: "alice".to_owned(),
        };
        DecidedPlan::new(input, &verdict, by, Utc::now())
    }

    #[test]
    fn a_placeholder_has_the_declared_fields() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "bytes": {"type": "integer"},
                "lines": {"type": "array", "items": {"type": "string"}},
                "entry": {"$ref": "#/$defs/Entry"},
                "maybe": {"anyOf": [{"type": "null"}, {"type": "boolean"}]}
            },
            "$defs": {"Entry": {"type": "object", "properties": {"kind": {"enum": ["file", "dir"]}}}}
        });
        let value = placeholder(Some(&schema), "fs.write", Guess::First);
        assert_eq!(
            value,
            json!({
                "path": "<not run yet: fs.write>",
                "bytes": 0,
                "lines": [],
                "entry": {"kind": "file"},
                "maybe": true
            })
        );
        assert!(holds_placeholder(
            &json!({"content": format!("{}", value["path"])})
        ));
        assert!(!holds_placeholder(&json!({"content": "fine"})));
    }

    #[test]
    fn the_real_run_runs_only_what_was_approved_and_once() {
        let input = plan_of(&[
            ("fs.write", json!({"path": "a"})),
            ("fs.write", json!({"path": "b"})),
        ]);
        let mut plan = decided(&input, Verdict::Approve);
        assert_eq!(
            plan.hold("fs.write", &json!({"path": "a"})),
            Held::Approved { index: 0 }
        );
        // The same call again is not in the plan any more.
        let Held::Ask(why) = plan.hold("fs.write", &json!({"path": "a"})) else {
            panic!("a second write of a was run");
        };
        assert!(why.contains("the plan's next fs.write call is"), "{why}");
        // Once the program left the plan, a planned call is asked about too.
        assert!(matches!(
            plan.hold("fs.write", &json!({"path": "b"})),
            Held::Ask(_)
        ));
    }

    #[test]
    fn a_partial_approval_rejects_the_calls_left_out() {
        let input = plan_of(&[
            ("fs.write", json!({"path": "a"})),
            ("shell.exec", json!({"command": "rm -rf x"})),
        ]);
        let verdict = Verdict::ApproveOnly {
            calls: vec![0],
            reason: Some("not that".to_owned()),
        };
        let mut plan = decided(&input, verdict);
        assert_eq!(plan.approved(), vec![0]);
        assert_eq!(
            plan.hold("shell.exec", &json!({"command": "rm -rf x"})),
            Held::Rejected {
                index: 1,
                reason: Some("not that".to_owned())
            }
        );
        assert_eq!(
            plan.hold("fs.write", &json!({"path": "a"})),
            Held::Approved { index: 0 }
        );
        let Held::Ask(why) = plan.hold("fs.delete", &json!({"path": "a"})) else {
            panic!("an unplanned tool ran");
        };
        assert!(why.contains("the plan has no fs.delete call"), "{why}");
    }

    #[test]
    fn a_read_that_answers_differently_breaks_the_plan() {
        let input = plan_of(&[("fs.write", json!({"path": "a"}))]);
        let read = json!({"path": "n"});
        let reads = VecDeque::from([(
            "fs.read".to_owned(),
            read.clone(),
            fingerprint(&Ok(json!("old"))),
        )]);
        let mut plan = decided(&input, Verdict::Approve).with_reads(reads);
        plan.saw_read("fs.read", &read, &Ok(json!("new")));
        assert!(plan.broken().is_some());
        assert!(matches!(
            plan.hold("fs.write", &json!({"path": "a"})),
            Held::Ask(_)
        ));
    }

    #[test]
    fn a_line_is_named_only_when_one_line_calls_the_tool() {
        let names = vec!["fs.write".to_owned()];
        assert_eq!(line_of("const a = 1;\nfs.write({path})\n", &names), Some(2));
        assert_eq!(line_of("fs.write(a)\nfs.write(b)\n", &names), None);
    }
}

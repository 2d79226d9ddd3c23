//! Calls of names nobody declared, and calls that failed this turn, taken back while the
//! program is written. A grammar cannot know which names a program declares (that depends on
//! what came before), so code mode's grammar lets a program call any name; a 1.5B model then
//! writes module loaders under names of its own (`requireArtifact('fs')`) that throw a
//! `ReferenceError` when it runs. With the names the request says a program may call without
//! declaring them (`ModelRequest::callable`), each `(` the model writes is checked
//! (`agentic-jscalls`): a call of a bare name that is neither one of them nor declared earlier
//! in the program is taken back to the name's first token, that token is not chosen again at
//! that place, and decoding goes on from there, so the model writes a name that exists (or
//! something else).
//!
//! Measured (round 22, `docs/benchmarks.md`): undefined calls 2 → 0 on the tuning split;
//! json-to-csv passes (the model declared the reader it had been importing), csv-sum lost;
//! tuning 21 → 21/24, held-out 6 → 6/12 task for task.
//!
//! In the same way, a call the request lists as failed this turn
//! (`ModelRequest::failed_calls`: `fs.list({ path: "data.csv" })` on a file) is taken back
//! to its method's name when the model writes it again with the same literal input, and the
//! method's first token is not chosen again there: once a small model has seen its program,
//! it writes the failing call again in every sample (round 23: csv-sum, 3 samples of 3).
//! While such a call is being written, nothing of it goes out.
//!
//! Measured (round 24, `docs/benchmarks.md`): fired in csv-sum alone (`fs.list` taken back,
//! the model wrote `fs.read`; the task fails further on, as before); tuning 21 → 21/24 task for
//! task, held-out 6 → 5/12 (dentist-done, where it did not fire: sampling variance).
//!
//! And a read of a field of a `const` bound to a tool's call (`const r = fs.read({…});` then
//! `r.entries`) is taken back to the field when the result does not have it
//! (`ModelRequest::result_fields`), as soon as no field it has starts with what is written:
//! the grammar checks a read chained on the call, but cannot know which names a program binds.

use std::collections::{HashMap, HashSet};

use agentic_core::{FailedCall, ModelRequest};
use agentic_jscalls::{Argument, bound_reads, literal_calls, undecided_pattern};
use serde_json::Value;

/// The most names taken back in one answer; past it the answer is left as the model writes
/// it (the sandbox still says what was wrong when it runs).
const MAX_TAKEN_BACK: usize = 24;

/// The call check of one answer.
#[derive(Debug)]
pub struct CallGuard {
    /// The names a program may call without declaring them, when the request says.
    known: Option<HashSet<String>>,
    failed: Vec<FailedCall>,
    /// The fields a read of each function's result may name (`ModelRequest::result_fields`).
    results: HashMap<String, HashSet<String>>,
    /// Tokens not to choose again, by the number of tokens before them in the answer.
    banned: Vec<(usize, u32)>,
    taken_back: usize,
}

impl CallGuard {
    /// The guard of an answer to `request`: `None` when it names no callable names, failed
    /// calls or result fields.
    pub fn new(request: &ModelRequest) -> Option<Self> {
        if request.callable.is_none()
            && request.failed_calls.is_empty()
            && request.result_fields.is_empty()
        {
            return None;
        }
        Some(Self {
            known: request
                .callable
                .as_ref()
                .map(|names| names.iter().cloned().collect()),
            failed: request.failed_calls.clone(),
            results: request
                .result_fields
                .iter()
                .map(|result| {
                    (
                        result.callee.clone(),
                        result.fields.iter().cloned().collect(),
                    )
                })
                .collect(),
            banned: Vec::new(),
            taken_back: 0,
        })
    }

    /// Where what is to be taken back starts in `text`, when the text from byte `from` on
    /// (what the last token added) makes a call of a name neither known nor declared (its
    /// name), a failed call again (its method's name), or a read of a field that the result
    /// bound to a `const` does not have (the field; while it is being written, as soon as no
    /// field it has starts so).
    pub fn to_take_back(&self, text: &str, from: usize) -> Option<usize> {
        let added = &text[from..];
        let start = program_start(text)?;
        let program = &text[start..];
        let from = from.saturating_sub(start);
        if (added.contains('(') || added.contains(')'))
            && let Some(at) = self.call_to_take_back(program, from)
        {
            return Some(start + at);
        }
        if self.results.is_empty() {
            return None;
        }
        let reads = bound_reads(program, &|callee| self.results.contains_key(callee));
        reads.into_iter().find_map(|read| {
            let fields = self.results.get(&read.callee)?;
            // A pattern that takes a field the result does not have: back to its `{`, where
            // the model may bind the result whole instead.
            if let Some(open) = read.pattern {
                if fields.contains(&read.field) {
                    return None;
                }
                tracing::debug!(callee = %read.callee, field = %read.field, "a pattern's field the result does not have, taken back");
                return Some(start + open);
            }
            // Only a read the last token wrote or ended.
            if read.start + read.field.len() < from {
                return None;
            }
            let has = if read.complete {
                fields.contains(&read.field)
            } else {
                fields.iter().any(|field| field.starts_with(&read.field))
            };
            if has {
                return None;
            }
            tracing::debug!(callee = %read.callee, field = %read.field, "a field the result does not have, taken back");
            Some(start + read.start)
        })
    }

    /// Where a call of a name neither known nor declared, or a failed call again, starts in
    /// `program` (see `to_take_back`).
    fn call_to_take_back(&self, program: &str, from: usize) -> Option<usize> {
        if let Some(known) = &self.known
            && let Some(call) =
                agentic_jscalls::undeclared_call(program, from, &|name| known.contains(name))
        {
            tracing::debug!(name = %call.name, "a call of an undeclared name, taken back");
            return Some(call.start);
        }
        self.failed.iter().find_map(|failed| {
            literal_calls(program, &failed.callee)
                .into_iter()
                .find(|call| match &call.argument {
                    Argument::Literal { value, end } => {
                        *end > from && same_input(value, &failed.input)
                    }
                    _ => false,
                })
                .map(|call| {
                    tracing::debug!(callee = %failed.callee, "a failed call again, taken back");
                    call.method
                })
        })
    }

    /// Notes that `token`, chosen after `position` tokens of the answer, is taken back; the
    /// bans past that place no longer apply. False once 24 names have been (`MAX_TAKEN_BACK`).
    pub fn take_back(&mut self, position: usize, token: u32) -> bool {
        if self.taken_back >= MAX_TAKEN_BACK {
            return false;
        }
        self.taken_back += 1;
        self.banned.retain(|(at, _)| *at <= position);
        self.banned.push((position, token));
        true
    }

    /// Whether a token taken back at `position` (the number of tokens so far) is ruled out.
    pub fn bans_at(&self, position: usize) -> bool {
        self.banned.iter().any(|(at, _)| *at == position)
    }

    /// Rules out the tokens taken back at `position` (the number of tokens so far).
    pub fn ban(&self, position: usize, logits: &mut [f32]) {
        for (at, token) in &self.banned {
            if *at == position
                && let Some(logit) = logits.get_mut(*token as usize)
            {
                *logit = f32::NEG_INFINITY;
            }
        }
    }

    /// How much of `text` may go out: not the name (and the blanks and dots after it) it
    /// ends with, which a `(` may still make a call to take back, nor a call of a failed
    /// function whose argument is still being written, nor an object pattern whose call is
    /// not yet told.
    pub fn settled(&self, text: &str) -> usize {
        let mut settled = text
            .trim_end_matches(|c: char| {
                c.is_alphanumeric() || c == '_' || c == '$' || c == '.' || c.is_whitespace()
            })
            .len();
        if let Some(start) = program_start(text) {
            for failed in &self.failed {
                for call in literal_calls(&text[start..], &failed.callee) {
                    if call.argument == Argument::Unfinished {
                        settled = settled.min(start + call.start);
                    }
                }
            }
            if !self.results.is_empty()
                && let Some(open) =
                    undecided_pattern(&text[start..], &|callee| self.results.contains_key(callee))
            {
                // The blank before it too: the token the `{` is in may begin with it.
                settled = settled.min(text[..start + open].trim_end().len());
            }
        }
        settled
    }
}

/// Whether a program's literal `written` is the input `failed`: numbers by value, and a
/// field set to `null` (or `undefined`) as one left out.
fn same_input(written: &Value, failed: &Value) -> bool {
    let present = |object: &serde_json::Map<String, Value>| {
        object.iter().filter(|(_, value)| !value.is_null()).count()
    };
    match (written, failed) {
        (Value::Object(written), Value::Object(failed)) => {
            present(written) == present(failed)
                && written
                    .iter()
                    .filter(|(_, value)| !value.is_null())
                    .all(|(key, value)| {
                        failed
                            .get(key)
                            .is_some_and(|other| same_input(value, other))
                    })
        }
        (Value::Object(object), Value::Null) | (Value::Null, Value::Object(object)) => {
            present(object) == 0
        }
        (Value::Array(written), Value::Array(failed)) => {
            written.len() == failed.len()
                && written
                    .iter()
                    .zip(failed)
                    .all(|(value, other)| same_input(value, other))
        }
        (Value::Number(written), Value::Number(failed)) => written.as_f64() == failed.as_f64(),
        _ => written == failed,
    }
}

/// Where the program of a reply starts: after the line that opens its fence (```` ```js ````
/// at the start of a line, the first line or after a line of words), else at the start.
/// `None` while the fence's line is not yet finished. A closing fence reads as a template
/// literal to the scanner, so what follows it holds no calls.
fn program_start(text: &str) -> Option<usize> {
    let fence = if text.starts_with("```") {
        Some(0)
    } else {
        text.find("\n```").map(|at| at + 1)
    };
    match fence {
        None => Some(0),
        Some(at) => text[at..].find('\n').map(|end| at + end + 1),
    }
}

#[cfg(test)]
mod tests {
    use agentic_core::{FailedCall, ModelKind, ModelRequest};
    use serde_json::json;

    use super::CallGuard;

    fn guard(callable: &[&str], failed: &[(&str, serde_json::Value)]) -> CallGuard {
        let mut request = ModelRequest::new(ModelKind::Normal, Vec::new());
        request.callable = Some(callable.iter().map(|name| (*name).to_owned()).collect());
        request.failed_calls = failed
            .iter()
            .map(|(callee, input)| FailedCall {
                callee: (*callee).to_owned(),
                input: input.clone(),
            })
            .collect();
        CallGuard::new(&request).unwrap()
    }

    #[test]
    fn a_guard_needs_callable_names_or_failed_calls() {
        let request = ModelRequest::new(ModelKind::Normal, Vec::new());
        assert!(CallGuard::new(&request).is_none());
    }

    #[test]
    fn an_undeclared_call_is_found_only_in_what_the_last_token_added() {
        let guard = guard(&["parseInt", "done"], &[]);
        let text = "const read = requireArtifact(";
        assert_eq!(guard.to_take_back(text, text.len() - 1), Some(13));
        // A token without `(` adds no call.
        assert_eq!(guard.to_take_back("const read = requireArtifact", 20), None);
        assert_eq!(guard.to_take_back("const n = parseInt(", 17), None);
        // In a fence, alone or after a line of words.
        for text in [
            "```javascript\nconst read = requireArtifact(",
            "Here is the code:\n```js\nconst read = requireArtifact(",
        ] {
            let start = text.find("requireArtifact").unwrap();
            assert_eq!(
                guard.to_take_back(text, text.len() - 1),
                Some(start),
                "{text}"
            );
        }
        assert_eq!(guard.to_take_back("```js\ndone(parseInt(", 17), None);
    }

    #[test]
    fn a_failed_call_written_again_is_taken_back_to_its_method() {
        let guard = guard(
            &["done"],
            &[("fs.list", json!({ "path": "timesheet.csv" }))],
        );
        let text = "```js\nconst rows = fs.list({ path: 'timesheet.csv', recursive: null })";
        let method = text.find("list").unwrap();
        assert_eq!(guard.to_take_back(text, text.len() - 1), Some(method));
        // Only when its `)` is new.
        assert_eq!(guard.to_take_back(&format!("{text};"), text.len()), None);
        // Another input, another function, an input that is not a literal: written.
        for other in [
            "fs.list({ path: \"data\" })",
            "fs.list({ path: \"timesheet.csv\", recursive: true })",
            "fs.read({ path: \"timesheet.csv\" })",
            "fs.list({ path: name })",
        ] {
            assert_eq!(guard.to_take_back(other, other.len() - 1), None, "{other}");
        }
    }

    #[test]
    fn a_field_the_bound_result_does_not_have_is_taken_back() {
        let mut request = ModelRequest::new(ModelKind::Normal, Vec::new());
        request.result_fields = vec![agentic_core::ResultFields {
            callee: "fs.read".to_owned(),
            fields: vec!["content".to_owned(), "toString".to_owned()],
        }];
        let guard = CallGuard::new(&request).unwrap();
        let program = "```js\nconst r = fs.read({ path: 'a.csv' });\nconst rows = r.";
        // As soon as no field starts so.
        let text = format!("{program}entries");
        let field = program.len();
        assert_eq!(guard.to_take_back(&text, text.len() - 3), Some(field));
        // A field it has, whole or begun; only what the last token wrote is judged.
        for (text, from) in [
            (format!("{program}cont"), program.len()),
            (format!("{program}content.split"), program.len() + 8),
            (format!("{program}toString()"), program.len() + 8),
            (format!("{program}entries;\nlog(1)"), program.len() + 10),
        ] {
            assert_eq!(guard.to_take_back(&text, from), None, "{text}");
        }
        // Ended by what follows.
        let text = format!("{program}contents;");
        assert_eq!(guard.to_take_back(&text, text.len() - 1), Some(field));
        // A pattern: back to its `{` once the call is told, held back until then.
        let text = "const { area } = fs.read({ path: 'a' })";
        assert_eq!(guard.to_take_back(text, text.len() - 1), None);
        assert_eq!(guard.settled(text), "const".len());
        let text = format!("{text};");
        assert_eq!(
            guard.to_take_back(&text, text.len() - 1),
            Some("const ".len())
        );
        let text = "const { content } = fs.read({ path: 'a' });";
        assert_eq!(guard.to_take_back(text, text.len() - 1), None);
        assert_eq!(guard.settled(text), text.len());
    }

    #[test]
    fn inputs_are_the_same_by_value() {
        for (written, failed, same) in [
            (json!({ "n": 2.0 }), json!({ "n": 2 }), true),
            (json!({ "a": null }), json!({}), true),
            (json!({}), serde_json::Value::Null, true),
            (
                json!({ "a": [1, { "b": "x" }] }),
                json!({ "a": [1, { "b": "x" }] }),
                true,
            ),
            (json!({ "a": [1] }), json!({ "a": [1, 2] }), false),
            (json!({ "a": 1 }), json!({ "a": 1, "b": 2 }), false),
            (json!({ "a": "1" }), json!({ "a": 1 }), false),
        ] {
            assert_eq!(
                super::same_input(&written, &failed),
                same,
                "{written} {failed}"
            );
        }
    }

    #[test]
    fn taken_back_tokens_are_ruled_out_at_their_place_only() {
        let mut guard = guard(&[], &[]);
        assert!(guard.take_back(5, 2));
        assert!(guard.take_back(7, 1));
        let mut logits = vec![0.0; 4];
        guard.ban(5, &mut logits);
        assert_eq!(logits, [0.0, 0.0, f32::NEG_INFINITY, 0.0]);
        // Taken back to an earlier place: the later ban goes.
        assert!(guard.take_back(3, 0));
        let mut logits = vec![0.0; 4];
        guard.ban(7, &mut logits);
        assert_eq!(logits, [0.0; 4]);
        for _ in 0..super::MAX_TAKEN_BACK {
            guard.take_back(1, 3);
        }
        assert!(!guard.take_back(1, 3));
    }

    #[test]
    fn a_name_at_the_end_or_a_failed_call_being_written_is_not_settled() {
        let guard = guard(&[], &[("fs.list", json!({ "path": "a" }))]);
        assert_eq!(guard.settled("const x = requireArt"), "const x =".len());
        assert_eq!(guard.settled("const x = fs."), "const x =".len());
        assert_eq!(guard.settled("done(x);\n"), "done(x);".len());
        assert_eq!(guard.settled("log(1)"), "log(1)".len());
        assert_eq!(
            guard.settled("log(1);\nconst x = fs.list({ path: \"a"),
            "log(1);\nconst x = ".len()
        );
        assert_eq!(
            guard.settled("const x = fs.list({ path: \"b\" })"),
            "const x = fs.list({ path: \"b\" })".len()
        );
    }
}

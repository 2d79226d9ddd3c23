//! Durable code mode: what an execution journals besides the timeline, and the replay that
//! brings its script back to where it stood, in a fresh worker.
//!
//! The timeline already holds every tool call a script made, with its input and, once it
//! finished, its result. The journal adds the rest of what the script read: the seed of
//! `Math.random()`, the times `Date` returned, and the answers of `llm()`. Replaying runs the
//! same code again and answers each request from these records, in order, without running a
//! tool or asking the model, until they run out; then the script goes on live.

use std::collections::VecDeque;

use agentic_core::prompt::{PromptOutput, ToolOutput};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::protocol::{CodePath, HostReply};

/// One journal entry. `execution` is the id of the execution's `code.execute` output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub(crate) enum Entry {
    /// An execution started: how its code was taken, its `Math.random()` seed, and the
    /// `store()` values it was given.
    Start {
        execution: String,
        path: CodePath,
        seed: u64,
        store: Map<String, Value>,
    },
    /// Times `Date` read from the live clock, before a request.
    Clock { execution: String, values: Vec<i64> },
    /// An `llm()` or `llmJson()` call and its answer.
    Llm {
        execution: String,
        prompt: String,
        json: bool,
        reply: HostReply,
    },
    /// An execution ended with these `store()` values.
    End {
        execution: String,
        store: Map<String, Value>,
    },
    /// Programs were checked before one of them ran (`mode/candidates.rs`): whether each
    /// one checked passed, the model's own first. A replay takes these verdicts instead of
    /// checking again: its reads are not in the recording. `further`: when none passed, the
    /// place in `passed` of the sample that ran instead of the model's own program, as its
    /// dry run got further (`mode/candidates.rs`).
    Checked {
        passed: Vec<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        further: Option<usize>,
        /// The vote on the answer of a program that passed (`mode/votes.rs`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        voted: Option<crate::mode::Voted>,
        /// A program that passed was written again with what its reads gave in view
        /// (`mode/review.rs`): whether the program written then ran in its place.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reviewed: Option<bool>,
    },
}

impl Entry {
    pub(crate) fn execution(&self) -> &str {
        match self {
            Self::Start { execution, .. }
            | Self::Clock { execution, .. }
            | Self::Llm { execution, .. }
            | Self::End { execution, .. } => execution,
            Self::Checked { .. } => "",
        }
    }
}

/// What a resumed execution answers from, in order.
#[derive(Debug)]
pub(crate) struct Replay {
    /// The script's tool calls as the timeline has them.
    pub(crate) calls: VecDeque<ToolOutput>,
    /// Calls answered from the journal so far: the position a divergence is reported at.
    pub(crate) matched: usize,
    /// `llm()` prompts with their answers.
    pub(crate) llm: VecDeque<(String, bool, HostReply)>,
    /// `output()` texts the timeline already shows; the replay does not show them again.
    pub(crate) outputs: usize,
    /// The prompt waited for a person when its process stopped: calls of the waiting
    /// request that had not run then had not started either.
    pub(crate) was_waiting: bool,
}

impl Replay {
    /// Nothing left to answer from: the script is live from here.
    pub(crate) fn is_spent(&self) -> bool {
        self.calls.is_empty() && self.llm.is_empty() && self.outputs == 0
    }
}

/// What a journal holds for one execution.
#[derive(Debug, Default)]
pub(crate) struct ExecutionRecord {
    pub(crate) path: Option<CodePath>,
    pub(crate) seed: Option<u64>,
    pub(crate) store: Option<Map<String, Value>>,
    pub(crate) clock: Vec<i64>,
    pub(crate) llm: VecDeque<(String, bool, HostReply)>,
}

/// The record of `execution` in `entries`.
pub(crate) fn record_of(entries: &[Entry], execution: &str) -> ExecutionRecord {
    let mut record = ExecutionRecord::default();
    for entry in entries
        .iter()
        .filter(|entry| entry.execution() == execution)
    {
        match entry {
            Entry::Start {
                path, seed, store, ..
            } => {
                record.path = Some(*path);
                record.seed = Some(*seed);
                record.store = Some(store.clone());
            }
            Entry::Clock { values, .. } => record.clock.extend(values),
            Entry::Llm {
                prompt,
                json,
                reply,
                ..
            } => record.llm.push_back((prompt.clone(), *json, reply.clone())),
            Entry::End { .. } | Entry::Checked { .. } => {}
        }
    }
    record
}

/// The `store()` values the prompt had after its last execution that ended.
pub(crate) fn last_store(entries: &[Entry]) -> Option<Map<String, Value>> {
    entries.iter().rev().find_map(|entry| match entry {
        Entry::End { store, .. } => Some(store.clone()),
        _ => None,
    })
}

/// The `output()` texts recorded after the output at `index`.
pub(crate) fn texts_after(output: &[PromptOutput], index: usize) -> usize {
    output
        .iter()
        .skip(index + 1)
        .filter(|output| matches!(output, PromptOutput::Text(_)))
        .count()
}

/// A short rendering of a call for a divergence message.
pub(crate) fn describe_call(tool: &str, input: &Value) -> String {
    agentic_core::replay::describe(tool, input, 120)
}

/// Why a replay stopped: the script did something else than its journal says at call
/// `position` (counted from 1).
pub(crate) fn diverged(position: usize, did: &str, journal: &str) -> String {
    format!(
        "the script diverged from its journal at call {position}: it called {did}, where the \
         journal has {journal}. A resumed script must make the same calls in the same order \
         as before (see docs/code-mode.md); it was stopped there. Tool calls before call \
         {position} did run. Continue the task from their results with a new program."
    )
}

#[cfg(test)]
mod tests {
    use super::Entry;

    #[test]
    fn a_check_journaled_before_samples_could_run_for_getting_further_still_reads() {
        let old: Entry =
            serde_json::from_str(r#"{"type":"checked","passed":[false,true]}"#).unwrap();
        assert_eq!(
            old,
            Entry::Checked {
                passed: vec![false, true],
                further: None,
                voted: None,
                reviewed: None,
            }
        );
        // `further` is written only when a sample ran for it, so older readers read the rest.
        assert_eq!(
            serde_json::to_string(&old).unwrap(),
            r#"{"type":"checked","passed":[false,true]}"#
        );
        let further = Entry::Checked {
            passed: vec![false, false, false],
            further: Some(1),
            voted: None,
            reviewed: None,
        };
        let text = serde_json::to_string(&further).unwrap();
        assert_eq!(
            text,
            r#"{"type":"checked","passed":[false,false,false],"further":1}"#
        );
        assert_eq!(serde_json::from_str::<Entry>(&text).unwrap(), further);
        let voted = Entry::Checked {
            passed: vec![true, true, true],
            further: None,
            voted: Some(crate::mode::Voted {
                asked: 2,
                chosen: 1,
            }),
            reviewed: None,
        };
        let text = serde_json::to_string(&voted).unwrap();
        assert_eq!(
            text,
            r#"{"type":"checked","passed":[true,true,true],"voted":{"asked":2,"chosen":1}}"#
        );
        assert_eq!(serde_json::from_str::<Entry>(&text).unwrap(), voted);
        let reviewed = Entry::Checked {
            passed: vec![true],
            further: None,
            voted: None,
            reviewed: Some(true),
        };
        let text = serde_json::to_string(&reviewed).unwrap();
        assert_eq!(
            text,
            r#"{"type":"checked","passed":[true],"reviewed":true}"#
        );
        assert_eq!(serde_json::from_str::<Entry>(&text).unwrap(), reviewed);
    }
}

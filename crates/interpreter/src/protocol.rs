//! Messages between the host and a sandbox worker. The isolated backend sends them as JSON
//! lines over the worker's stdin and stdout; the in-process backend passes them over channels.

pub use crate::shape::Shape;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Host → worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ToWorker {
    Execute(Box<ExecuteRequest>),
    /// The answer to a [`HostRequest`] with the same id.
    Reply {
        id: u64,
        reply: HostReply,
    },
}

/// Worker → host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ToHost {
    /// A fresh context is prepared and waits for code.
    Ready,
    /// The script is blocked until the host replies.
    Request {
        id: u64,
        request: HostRequest,
        /// The times (ms since the epoch) `Date` read from the live clock since the previous
        /// request: what a journal keeps so that a replay reads the same times.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        clock: Vec<i64>,
    },
    /// `output(text)`, sent the moment it is called.
    Output {
        text: String,
    },
    /// `log(...)`, sent the moment it is called.
    Log {
        text: String,
    },
    Finished(Box<ExecutionOutcome>),
}

/// One script to run, with everything it may use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecuteRequest {
    pub code: String,
    pub tools: Vec<ToolBinding>,
    /// Bound to the global `input`; without one the script has no `input`.
    #[serde(default)]
    pub input: Option<Value>,
    /// What `store()` kept in earlier iterations of the turn.
    #[serde(default)]
    pub store: Map<String, Value>,
    pub limits: ScriptLimits,
    /// `tools` is left empty because they are the same as in this worker's previous script;
    /// saves sending and parsing them again on every iteration.
    #[serde(default)]
    pub same_tools_as_before: bool,
    /// What makes the run repeatable: `Math.random()`'s seed, and the times `Date` reads
    /// first (a replay's journaled readings).
    #[serde(default)]
    pub determinism: Determinism,
}

/// The inputs of a script that are not its code: with the same ones and the same host
/// replies, a script does the same thing again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Determinism {
    /// Seeds `Math.random()`; without one the worker picks a seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Times (ms since the epoch) `Date` returns, in order, before it reads the live clock
    /// again. Live readings are reported with each request ([`ToHost::Request`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clock: Vec<i64>,
}

/// A tool as the sandbox sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolBinding {
    /// Dotted id, e.g. `trigger.create`.
    pub id: String,
    /// Global function name, e.g. `triggerCreate`; `None` when it would collide.
    pub function: Option<String>,
    /// More global names for the same function, e.g. `storeArtifact`; only those that collide
    /// with nothing (see `names::bindings`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    /// `namespace.method` when the tool is also reachable through its plugin's global object,
    /// e.g. `fs.list` (see `names::bindings`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    pub description: String,
    /// The shape its result is declared to have; reading a field it does not declare throws.
    #[serde(default, skip_serializing_if = "Shape::is_any")]
    pub result: Shape,
}

impl ToolBinding {
    /// How code calls the tool: `fs.list`, else its global function, else `tools["id"]`.
    pub fn call_name(&self) -> String {
        self.member
            .clone()
            .or_else(|| self.function.clone())
            .unwrap_or_else(|| format!("tools[{}]", Value::String(self.id.clone())))
    }

    /// The plugin object and method it is bound as (`fs.list` → `fs`, `list`), if any.
    pub fn namespace_and_method(&self) -> Option<(&str, &str)> {
        self.member.as_deref()?.split_once('.')
    }
}

/// Limits the worker enforces itself; wall time and memory are enforced around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScriptLimits {
    /// Characters of `output()` and `log()` text together.
    pub max_output_chars: usize,
    pub max_tool_calls: u32,
    /// JavaScript call depth.
    pub recursion_limit: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum HostRequest {
    CallTool {
        tool: String,
        input: Value,
    },
    /// Calls run concurrently on the host; each result is the value or `{error}`.
    Parallel {
        calls: Vec<ParallelCall>,
    },
    Llm {
        prompt: String,
        json: bool,
    },
    ToolSchema {
        tool: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParallelCall {
    pub tool: String,
    #[serde(default)]
    pub input: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum HostReply {
    Value {
        value: Value,
    },
    /// Thrown inside the script as an `Error` with this message.
    Error {
        message: String,
    },
    /// A dry run's placeholder for a call it did not run: read like `Value`, and the
    /// outcome's `guesses_read` says whether the program looked inside it.
    Guess {
        value: Value,
    },
}

/// How the model's reply was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CodePath {
    /// The reply was JavaScript as it stood.
    Plain,
    /// The reply had a fenced code block; that block ran.
    Fenced,
    /// The reply was prose, taken as the final answer.
    Prose,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionOutcome {
    pub path: CodePath,
    /// The script's value (its `return`, or its last expression), or why it failed.
    pub result: Result<Value, ScriptError>,
    /// `done()` or `complete()` was called.
    pub done: bool,
    /// The argument of `complete()`, if it was called.
    pub complete: Option<Value>,
    pub store: Map<String, Value>,
    /// The times `Date` read from the live clock after the script's last request: journaled
    /// with the rest, so that a recorded run replays them too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clock: Vec<i64>,
    /// The program read a field of a placeholder (a [`HostReply::Guess`]): what it did next
    /// may depend on what the call returns for real.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub guesses_read: bool,
    /// A string search of the program missed what it looked for in another case, or further
    /// in than the end it searched (the sandbox refuses an answer after it and notes it on a
    /// log line): the data was read wrong.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub misread: bool,
    /// A string search of the program was given several texts and matched none of them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub searched_in_vain: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScriptError {
    pub kind: ScriptErrorKind,
    pub message: String,
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// The line of code the error points at.
    pub source_line: Option<String>,
    /// What to do instead, when the mistake is a known habit (e.g. `require`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ScriptErrorKind {
    Syntax,
    Runtime,
    /// A sandbox limit ended the script.
    Limit,
    /// No worker could run the script at all (the worker program is missing or will not
    /// start). Not the model's fault, and retrying will not help.
    Unavailable,
}

impl ScriptError {
    /// The text the model reads: message, position and the offending line.
    pub fn describe(&self) -> String {
        let mut text = self.message.clone();
        if let Some(line) = self.line {
            text.push_str(&format!(" (line {line}"));
            if let Some(column) = self.column {
                text.push_str(&format!(", column {column}"));
            }
            text.push(')');
        }
        if let Some(source_line) = &self.source_line {
            text.push_str(&format!("\n> {}", source_line.trim_end()));
        }
        if let Some(hint) = &self.hint {
            text.push('\n');
            text.push_str(hint);
        }
        text
    }
}

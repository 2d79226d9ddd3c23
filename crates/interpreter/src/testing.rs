//! Helpers the unit tests share: a context with the sandbox functions, and a run of
//! a program against two tools whose every call returns the same result.

use crate::engine::{EngineOptions, HostLink, execute, prepare_context};
use crate::protocol::{
    ExecuteRequest, ExecutionOutcome, HostReply, HostRequest, ScriptLimits, ToHost, ToolBinding,
};
use crate::shape::Shape;
use boa_engine::Context;
use serde_json::{Value, json};

/// Answers every tool call with the same result.
struct Answers(Value);

impl HostLink for Answers {
    fn request(&mut self, _request: HostRequest, _clock: Vec<i64>) -> HostReply {
        HostReply::Value {
            value: self.0.clone(),
        }
    }
    fn notify(&mut self, _message: ToHost) {}
}

/// A fresh context with the sandbox functions and code mode's explanations, no tools.
pub(crate) fn context() -> Context {
    let options = EngineOptions {
        loop_iteration_limit: None,
        explain: &crate::explain::ForModels,
    };
    prepare_context(options, Some(&[])).unwrap().into_context()
}

/// What `code` ends with, run as [`run`] does with tools that return no entries: its value,
/// or its error's message.
pub(crate) fn outcome(code: &str) -> Result<Value, String> {
    run(code, json!({ "entries": [] }))
        .result
        .map_err(|error| error.message)
}

/// Runs `code` with two tools, `fs.list` and `todo.list` with the shapes of their
/// schemas, whose every call returns `result`.
pub(crate) fn run(code: &str, result: Value) -> ExecutionOutcome {
    let schema = json!({
        "type": "object",
        "properties": {
            "entries": { "type": "array", "items": { "type": "object", "properties": {
                "path": { "type": "string" },
                "kind": { "type": "string", "enum": ["file", "dir"] },
                "size": { "type": "integer" }
            } } },
            "truncated": { "type": "boolean" },
            "note": { "type": "string" }
        }
    });
    let tools = vec![
        ToolBinding {
            id: "fs.list".into(),
            function: Some("fsList".into()),
            aliases: Vec::new(),
            member: Some("fs.list".into()),
            description: String::new(),
            result: Shape::of_schema(&schema),
        },
        ToolBinding {
            id: "todo.list".into(),
            function: Some("todoList".into()),
            aliases: Vec::new(),
            member: Some("todo.list".into()),
            description: String::new(),
            result: Shape::of_schema(&json!({
                "type": "object", "properties": { "todos": { "type": "array" } }
            })),
        },
    ];
    let options = EngineOptions {
        loop_iteration_limit: None,
        explain: &crate::explain::ForModels,
    };
    let prepared = prepare_context(options, None).unwrap();
    let request = ExecuteRequest {
        code: code.to_owned(),
        tools,
        input: None,
        store: Default::default(),
        limits: ScriptLimits {
            max_output_chars: 10_000,
            max_tool_calls: 10,
            recursion_limit: 100,
        },
        same_tools_as_before: false,
        determinism: Default::default(),
    };
    execute(prepared, request, Box::new(Answers(result)))
}

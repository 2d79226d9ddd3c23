//! The grammar of a classic-mode answer: free text, in which a `<tool_call>` tag (Qwen's and
//! Hermes' call syntax) starts a call that must be a JSON object naming one of the offered
//! tools, with that tool's input schema for its arguments. Text stays free until the model
//! writes the tag, so the choice between answering and calling is the model's. An answer that
//! opens with a JSON object, bare or in a ```json fence, is a call written without the tag: it
//! is held to the same schemas (and read as a call by `agentic_core::text_calls`), and so are
//! the calls that follow it, fenced or bare, or in a JSON array.

use agentic_core::ToolSpec;
use serde_json::{Map, Value, json};

/// The tag that starts a call.
pub const OPEN: &str = "<tool_call>";
/// The tag that ends it.
pub const CLOSE: &str = "</tool_call>";

/// The Lark grammar (llguidance's dialect) of an answer that may call `tools`, or, when
/// `required`, that calls them and says nothing else (`ToolChoice::Required`); `None` when
/// none is offered, since free text needs no grammar.
pub fn tool_call_grammar(tools: &[ToolSpec], required: bool) -> Option<String> {
    if tools.is_empty() {
        return None;
    }
    let mut grammar = String::new();
    if required {
        // One call as a JSON object (bare or fenced), or calls in tags, and nothing around.
        grammar.push_str(&format!(
            "start: bare_call | (SPACE? {} call_body)+ SPACE?\n",
            lark_string(OPEN)
        ));
    } else {
        // `lead` is lazy: it ends at the first tag, so a tag always starts a call. A reply that
        // opens with a JSON object, bare or in a ```json fence, is a call too (small models
        // write one more often than the tag, and classic mode reads it as one): held to the
        // same schema.
        grammar.push_str(
            "start: bare_call | first_lead call_body (lead call_body)* PROSE | OPENING\n",
        );
    }
    grammar.push_str(&format!(
        "first_lead[lazy]: OPENING {}\n",
        lark_string(OPEN)
    ));
    grammar.push_str(&format!("lead[lazy]: PROSE {}\n", lark_string(OPEN)));
    grammar.push_str("PROSE: /(?s:.*)/\n");
    grammar.push_str(
        "OPENING: /(?s:.*)/ & ~/[ \\t\\r\\n]*(\\{|\\[[ \\t\\r\\n]*\\{|```json)(?s:.*)/\n",
    );
    // Several calls may follow one another, each fenced or bare, or stand in one JSON array: a
    // model writes its second call the way it wrote its first. With room for one call only,
    // Qwen2.5-Coder-1.5B wrote blank lines where it wanted the second (BFCL v4 `parallel`:
    // one call of two, in all three tasks run).
    grammar.push_str("bare_call: SPACE? bare_item (SPACE? bare_item)* SPACE?\n");
    grammar.push_str("bare_item: \"```json\" SPACE? calls SPACE? (\"```\")? | calls\n");
    grammar.push_str("calls: call | \"[\" SPACE? call (SPACE? \",\" SPACE? call)* SPACE? \"]\"\n");
    grammar.push_str("SPACE: /[ \\t\\r\\n]+/\n");
    grammar.push_str(&format!(
        "call_body: SPACE? call SPACE? {}\n",
        lark_string(CLOSE)
    ));
    let alternatives: Vec<String> = (0..tools.len())
        .map(|index| format!("call_{index}"))
        .collect();
    grammar.push_str(&format!("call: {}\n", alternatives.join(" | ")));
    for (index, tool) in tools.iter().enumerate() {
        grammar.push_str(&format!(
            "call_{index}: %json {}\n",
            call_schema(&tool.name, &tool.parameters)
        ));
    }
    Some(grammar)
}

/// `{"name": <the tool>, "arguments": <its input>}`, in that order, nothing else. The input
/// schema's definitions move to the root so its `#/$defs/…` references still resolve, and an
/// input object that does not say otherwise takes no fields beyond its properties.
fn call_schema(name: &str, parameters: &Value) -> Value {
    let mut arguments = match parameters {
        Value::Object(object) => object.clone(),
        _ => Map::new(),
    };
    let mut root = Map::new();
    // Unknown formats and keywords are ignored rather than failing the whole grammar.
    root.insert("x-guidance".into(), json!({ "lenient": true }));
    for key in ["$defs", "definitions"] {
        if let Some(definitions) = arguments.remove(key) {
            root.insert(key.into(), definitions);
        }
    }
    arguments.remove("$schema");
    if arguments.contains_key("properties") && !arguments.contains_key("additionalProperties") {
        arguments.insert("additionalProperties".into(), Value::Bool(false));
    }
    if arguments.is_empty() {
        arguments.insert("type".into(), json!("object"));
    }
    root.insert("type".into(), json!("object"));
    root.insert(
        "properties".into(),
        json!({ "name": { "const": name }, "arguments": Value::Object(arguments) }),
    );
    root.insert("required".into(), json!(["name", "arguments"]));
    root.insert("additionalProperties".into(), Value::Bool(false));
    Value::Object(root)
}

/// `text` as a Lark string literal.
fn lark_string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

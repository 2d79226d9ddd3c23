//! The functions the sandbox defines itself: `output`, `log`, `done`, `complete`, `store`,
//! `recall`, the tool discovery functions, `parallel`, `llm`, `require`, and the list view of
//! a result with one list field.

use boa_engine::{Context, JsNativeError, JsObject, JsResult, JsString, JsValue, Source};
use serde_json::{Map, Value};

use crate::protocol::{HostReply, HostRequest, ToHost};

use super::*;

pub(super) fn text_of(value: Option<&JsValue>, context: &mut Context) -> JsResult<String> {
    match value {
        None => Ok(String::new()),
        Some(value) if value.is_string() => Ok(value
            .as_string()
            .map(|text| text.to_std_string_escaped())
            .unwrap_or_default()),
        Some(value) if value.is_undefined() => Ok("undefined".to_owned()),
        Some(value) => Ok(to_json(value, context)?.to_string()),
    }
}

/// Spends output budget on `text`; returns what may still be sent.
pub(super) fn spend_output(text: String) -> JsResult<Option<String>> {
    with_engine(|state| {
        if state.output_cut {
            return None;
        }
        let length = text.chars().count();
        let left = state
            .limits
            .max_output_chars
            .saturating_sub(state.output_used);
        if length <= left {
            state.output_used += length;
            return Some(text);
        }
        state.output_cut = true;
        state.output_used = state.limits.max_output_chars;
        let kept: String = text.chars().take(left).collect();
        Some(format!(
            "{kept}\n[output truncated: the limit is {} characters per execution]",
            state.limits.max_output_chars
        ))
    })
}

pub(super) fn notify(message: ToHost) -> JsResult<()> {
    with_engine(|state| state.link.notify(message))
}

pub(super) fn output(
    _this: &JsValue,
    arguments: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let text = text_of(arguments.first(), context)?;
    super::absent::check_output(&text)?;
    super::caught::check("the text given to output()", &text)?;
    if let Some(text) = spend_output(text)? {
        notify(ToHost::Output { text })?;
    }
    Ok(JsValue::undefined())
}

pub(super) fn log(
    _this: &JsValue,
    arguments: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let mut parts = Vec::with_capacity(arguments.len());
    for argument in arguments {
        parts.push(text_of(Some(argument), context)?);
    }
    let text = super::silent::annotate_log(super::pieces::annotate_log(parts.join(" "))?)?;
    if let Some(text) = spend_output(text)? {
        notify(ToHost::Log { text })?;
    }
    Ok(JsValue::undefined())
}

/// `done()` ends the turn; `done(value)` ends it with `value` as the answer, as
/// `complete(value)` does (models write both).
pub(super) fn done(
    _this: &JsValue,
    arguments: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let given = arguments.first();
    let nothing = given.is_some_and(JsValue::is_null_or_undefined);
    // `done(output(text))`: the answer was shown with output(), and output() gives nothing.
    let shown = with_engine(|state| state.output_used > 0)?;
    let completion = match given {
        Some(_) if nothing && shown => None,
        // `done(latest)` with a `latest` that stayed null: the answer the program meant has
        // no value.
        Some(value) if nothing => {
            let what = if value.is_null() { "null" } else { "undefined" };
            return Err(JsNativeError::typ()
                .with_message(format!(
                    "the answer given to done() is {what}, so nothing was shown to the user: \
                     {}",
                    super::absent::NO_VALUE
                ))
                .into());
        }
        Some(value) => Some(completion_of(to_json(value, context)?, "done")?),
        // `done()` alone ends the turn after what was shown.
        None => None,
    };
    if let Some(response) = completion
        .as_ref()
        .and_then(|completion| completion.get("response"))
        .and_then(Value::as_str)
    {
        super::absent::check_answer("done()", response)?;
        super::caught::check("the answer given to done()", response)?;
        super::silent::check_answer("done()")?;
        super::pieces::check_answer("done()", response)?;
    }
    with_engine(|state| {
        state.done = true;
        if completion.is_some() {
            state.complete = completion;
        }
    })?;
    Ok(JsValue::undefined())
}

pub(super) fn complete(
    _this: &JsValue,
    arguments: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let value = match arguments.first() {
        Some(value) if !value.is_undefined() => to_json(value, context)?,
        _ => Value::Object(Map::new()),
    };
    let value = completion_of(value, "complete")?;
    if let Some(response) = value.get("response").and_then(Value::as_str) {
        super::absent::check_answer("complete()", response)?;
        super::caught::check("the answer given to complete()", response)?;
        super::silent::check_answer("complete()")?;
        super::pieces::check_answer("complete()", response)?;
    }
    with_engine(|state| {
        state.done = true;
        state.complete = Some(value);
    })?;
    Ok(JsValue::undefined())
}

/// The `{response, data?, followUp?}` object for what a script passed to `done` or
/// `complete`: a string or number is the response itself.
pub(super) fn completion_of(value: Value, function: &str) -> JsResult<Value> {
    match value {
        Value::String(response) => Ok(serde_json::json!({ "response": response })),
        Value::Number(_) | Value::Bool(_) => {
            Ok(serde_json::json!({ "response": value.to_string() }))
        }
        Value::Object(_) => Ok(value),
        Value::Null => Ok(Value::Object(Map::new())),
        Value::Array(_) => Err(JsNativeError::typ()
            .with_message(format!(
                "{function}() takes the answer as a string, or {{response, data?, followUp?}}"
            ))
            .into()),
    }
}

pub(super) fn store(
    _this: &JsValue,
    arguments: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let key = key_argument(arguments.first(), "store")?;
    let value = match arguments.get(1) {
        Some(value) if !value.is_undefined() => to_json(value, context)?,
        _ => Value::Null,
    };
    with_engine(|state| state.store.insert(key, value))?;
    Ok(JsValue::undefined())
}

pub(super) fn recall(
    _this: &JsValue,
    arguments: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let key = key_argument(arguments.first(), "recall")?;
    match with_engine(|state| state.store.get(&key).cloned())? {
        Some(value) => from_json(&value, context),
        None => Ok(JsValue::undefined()),
    }
}

pub(super) fn key_argument(value: Option<&JsValue>, function: &str) -> JsResult<String> {
    value
        .and_then(JsValue::as_string)
        .map(|key| key.to_std_string_escaped())
        .ok_or_else(|| {
            JsNativeError::typ()
                .with_message(format!("{function}() needs a string key"))
                .into()
        })
}

pub(super) fn discover_tools(
    _this: &JsValue,
    _arguments: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let tools = with_engine(|state| state.tools.clone())?;
    let list: Vec<Value> = tools
        .iter()
        .map(|tool| {
            let mut entry = serde_json::json!({
                "name": tool.function,
                "id": tool.id,
                "call": tool.call_name(),
                "description": tool.description,
            });
            if !tool.aliases.is_empty() {
                entry["aliases"] = serde_json::json!(tool.aliases);
            }
            entry
        })
        .collect();
    from_json(&Value::Array(list), context)
}

pub(super) fn tool_schema(
    _this: &JsValue,
    arguments: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let tool = key_argument(arguments.first(), "toolSchema")?;
    reply_to_js(host_request(HostRequest::ToolSchema { tool })?, context)
}

/// `describeTool(id)`: the tool's declaration, as the system prompt shows it.
pub(super) fn describe_tool(
    _this: &JsValue,
    arguments: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let tool = key_argument(arguments.first(), "describeTool")?;
    reply_to_js(host_request(HostRequest::ToolSchema { tool })?, context)
}

/// Most tools `searchTools` answers with.
pub(super) const SEARCH_RESULTS: usize = 10;

/// `searchTools(query)`: the tools whose id, names or description share the most words with
/// the query, best first, as `{id, call, description}`.
pub(super) fn search_tools(
    _this: &JsValue,
    arguments: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let query = text_of(arguments.first(), context)?;
    let tools = with_engine(|state| state.tools.clone())?;
    let results: Vec<Value> = crate::names::rank_tools(&tools, &query)
        .into_iter()
        .take(SEARCH_RESULTS)
        .map(|tool| {
            serde_json::json!({
                "id": tool.id,
                "call": tool.call_name(),
                "description": tool.description.lines().next().unwrap_or_default(),
            })
        })
        .collect();
    from_json(&Value::Array(results), context)
}

pub(super) fn parallel(
    _this: &JsValue,
    arguments: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let calls = match arguments.first() {
        Some(value) => to_json(value, context)?,
        None => Value::Array(Vec::new()),
    };
    let calls: Vec<crate::protocol::ParallelCall> =
        serde_json::from_value(calls).map_err(|_| {
            JsNativeError::typ().with_message("parallel() takes an array of {tool, input}")
        })?;
    for call in &calls {
        super::absent::check_input(&call.tool, &call.input)?;
        super::caught::check_input(&call.tool, &call.input)?;
    }
    count_tool_calls(u32::try_from(calls.len()).unwrap_or(u32::MAX))?;
    let reply = host_request(HostRequest::Parallel { calls })?;
    if let HostReply::Value { value } = &reply {
        super::received(value);
    }
    reply_to_js(reply, context)
}

pub(super) fn llm(
    _this: &JsValue,
    arguments: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let prompt = text_of(arguments.first(), context)?;
    reply_to_js(
        host_request(HostRequest::Llm {
            prompt,
            json: false,
        })?,
        context,
    )
}

pub(super) fn llm_json(
    _this: &JsValue,
    arguments: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let prompt = text_of(arguments.first(), context)?;
    reply_to_js(
        host_request(HostRequest::Llm { prompt, json: true })?,
        context,
    )
}

/// The field of a tool result that is its one list: `todos` of `{todos: [...]}`, `entries`
/// of `{entries: [...], truncated: false}`. Models iterate such results as the list itself.
pub(super) fn list_field_of(reply: &HostReply) -> Option<String> {
    let (HostReply::Value {
        value: Value::Object(map),
    }
    | HostReply::Guess {
        value: Value::Object(map),
    }) = reply
    else {
        return None;
    };
    let mut lists = map.iter().filter(|(_, value)| value.is_array());
    match (lists.next(), lists.next()) {
        (Some((field, _)), None) => Some(field.clone()),
        _ => None,
    }
}

/// Array methods a result with one list field answers for that list.
/// Not `entries`, `keys` or `values`: those are field names too (`fs.list` has `entries`),
/// and a program reading `artifact.list({}).entries` means the field, so it must get the
/// typed error naming the fields, not an array method.
pub(super) const LIST_METHODS: &str = "at, concat, every, filter, find, findIndex, findLast, \
    findLastIndex, flat, flatMap, forEach, includes, indexOf, join, lastIndexOf, map, reduce, \
    reduceRight, slice, some, toReversed, toSorted";

/// The prototype that makes a result with the list field `field` iterable, with `length` and
/// the array methods of that list. The result's own fields come first, so `entries` of
/// `{entries: [...]}` is still the field. Built once per script and field.
pub(super) fn list_prototype(field: &str, context: &mut Context) -> JsResult<JsObject> {
    if let Some(prototype) = with_engine(|state| state.list_prototypes.get(field).cloned())? {
        return Ok(prototype);
    }
    let key = serde_json::to_string(field).unwrap_or_default();
    let source = format!(
        "(() => {{\n\
           const key = {key};\n\
           const prototype = {{}};\n\
           for (const name of \"{LIST_METHODS}\".split(\", \")) {{\n\
             const method = Array.prototype[name];\n\
             if (typeof method !== \"function\") continue;\n\
             Object.defineProperty(prototype, name, {{ value: function (...args) {{ return method.apply(this[key], args); }}, writable: true, configurable: true }});\n\
           }}\n\
           Object.defineProperty(prototype, \"length\", {{ get() {{ return this[key].length; }}, configurable: true }});\n\
           Object.defineProperty(prototype, Symbol.iterator, {{ value: function () {{ return this[key][Symbol.iterator](); }}, writable: true, configurable: true }});\n\
           return prototype;\n\
         }})()"
    );
    let prototype = context
        .eval(Source::from_bytes(source.as_bytes()))?
        .as_object()
        .ok_or_else(|| JsNativeError::error().with_message("the list prototype is no object"))?;
    with_engine(|state| {
        state
            .list_prototypes
            .insert(field.to_owned(), prototype.clone())
    })?;
    Ok(prototype)
}

/// `require("fs")` is the `fs` namespace: models write Node's `const fs = require("fs")`
/// before calling `fs.list(...)`. `node:`, `./` and `.js` around the name are ignored. Any
/// other module does not exist, and the error says what to use instead.
pub(super) fn require(
    _this: &JsValue,
    arguments: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let requested = text_of(arguments.first(), context)?;
    let name = requested.trim();
    let name = name.strip_prefix("node:").unwrap_or(name);
    let name = name.strip_prefix("./").unwrap_or(name);
    let name = name.strip_suffix(".js").unwrap_or(name);
    let is_namespace = with_engine(|state| {
        state.tools.iter().any(|tool| {
            tool.namespace_and_method()
                .is_some_and(|(ns, _)| ns == name)
        })
    })?;
    if is_namespace {
        return context.global_object().get(JsString::from(name), context);
    }
    Err(JsNativeError::reference()
        .with_message(format!("{NO_MODULE}{requested:?}"))
        .into())
}

/// How the error of `require` for a module that does not exist starts.
pub(crate) const NO_MODULE: &str = "there is no module ";

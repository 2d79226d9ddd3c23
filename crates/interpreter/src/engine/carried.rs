//! Top-level variables carried from one program of a turn to the next, as a notebook keeps
//! them: small models write a program that reads a file into `const config`, and then a
//! second one that goes on with `config` as if it were still there. Each program still runs
//! in a fresh engine; what carries over is the JSON value of each top-level variable the turn's
//! programs declared (not functions, nothing over [`MAX_CARRIED_BYTES`] in all), kept with the
//! `store()` values under [`CARRIED_KEY`], so it is journaled, and resumed, with them.

use boa_engine::object::builtins::JsArray;
use boa_engine::property::{Attribute, PropertyKey};
use boa_engine::{Context, JsString, JsValue, Source};
use serde_json::{Map, Value};

use super::values::{MAX_VALUE_DEPTH, from_json, to_json};

/// The `store()` key the carried variables are kept under; `recall()` cannot ask for it
/// (store keys are plain words).
pub(crate) const CARRIED_KEY: &str = "@variables";

/// Most bytes of JSON carried over in all; a variable that does not fit is left behind, and a
/// program that reads it gets `declared_earlier`'s explanation.
pub(crate) const MAX_CARRIED_BYTES: usize = 64 * 1024;

/// Makes the variables an earlier program left global properties of `context`: readable and
/// assignable, and shadowed by a program that declares its own of the same name.
pub(super) fn bind(context: &mut Context, store: &Map<String, Value>) {
    let Some(Value::Object(variables)) = store.get(CARRIED_KEY) else {
        return;
    };
    for (name, value) in variables {
        if let Ok(value) = from_json(value, context) {
            let _ = context.register_global_property(
                JsString::from(name.as_str()),
                value,
                Attribute::all(),
            );
        }
    }
}

/// After a program: the values of the variables the turn carries, those it had plus those
/// this program declared at its top level, into `store`.
pub(super) fn collect(context: &mut Context, code: &str, store: &mut Map<String, Value>) {
    let mut names: Vec<String> = match store.get(CARRIED_KEY) {
        Some(Value::Object(variables)) => variables.keys().cloned().collect(),
        _ => Vec::new(),
    };
    for word in crate::names::declared_names(code) {
        if !word.starts_with(|c: char| c.is_ascii_digit()) && !names.iter().any(|name| name == word)
        {
            names.push(word.to_owned());
        }
    }
    let mut carried = Map::new();
    let mut bytes = 0;
    for name in names {
        // A name in a block or function is no global: `typeof` says undefined and it is left.
        let read = format!("typeof {name} === 'function' ? undefined : {name}");
        let Ok(value) = context.eval(Source::from_bytes(read.as_bytes())) else {
            continue;
        };
        if value.is_undefined() {
            continue;
        }
        // A value too big to carry is ruled out before it is converted: a program that built
        // 100,000 objects would otherwise pay for their JSON at its end, only to drop it.
        let room = MAX_CARRIED_BYTES.saturating_sub(bytes + name.len());
        if json_at_least(&value, context, room, 0) > room {
            continue;
        }
        let Ok(json) = to_json(&value, context) else {
            continue;
        };
        let size = json.to_string().len() + name.len();
        if bytes + size > MAX_CARRIED_BYTES {
            continue;
        }
        bytes += size;
        carried.insert(name, json);
    }
    if carried.is_empty() {
        store.remove(CARRIED_KEY);
    } else {
        store.insert(CARRIED_KEY.to_owned(), Value::Object(carried));
    }
}

/// A lower bound of the length of `value`'s JSON, counted no further than just past `limit`:
/// each element and key counts its smallest encoding, so ruling out a large value visits at
/// most about `limit / 2` of its parts, whatever its size.
fn json_at_least(value: &JsValue, context: &mut Context, limit: usize, depth: usize) -> usize {
    if depth > MAX_VALUE_DEPTH {
        // `to_json` refuses it anyway.
        return limit.saturating_add(1);
    }
    if let Some(text) = value.as_string() {
        return text.len() + 2;
    }
    let Some(object) = value.as_object() else {
        return 1;
    };
    if object.is_callable() {
        return 0;
    }
    let mut total = 2;
    if object.is_array() {
        let Ok(array) = JsArray::from_object(object.clone()) else {
            return total;
        };
        let length = array.length(context).unwrap_or(0);
        for index in 0..length {
            if total > limit {
                break;
            }
            let item = array.get(index, context).unwrap_or_default();
            total += 1 + json_at_least(&item, context, limit - total, depth + 1);
        }
        return total;
    }
    let Ok(keys) = object.own_property_keys(context) else {
        return total;
    };
    for key in keys {
        if total > limit {
            break;
        }
        let name_length = match &key {
            PropertyKey::String(name) => name.len(),
            PropertyKey::Index(_) => 1,
            PropertyKey::Symbol(_) => continue,
        };
        let item = object.get(key, context).unwrap_or_default();
        // What `to_json` leaves out counts nothing.
        if item.is_undefined() || item.is_symbol() || item.as_callable().is_some() {
            continue;
        }
        total += name_length + 4 + json_at_least(&item, context, limit - total, depth + 1);
    }
    total
}

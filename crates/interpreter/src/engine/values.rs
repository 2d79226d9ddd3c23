//! Values between JSON and JavaScript, depth-limited both ways.

use boa_engine::builtins::object::OrdinaryObject;
use boa_engine::object::ObjectInitializer;
use boa_engine::object::builtins::JsArray;
use boa_engine::property::{PropertyDescriptor, PropertyKey};
use boa_engine::{Context, JsNativeError, JsResult, JsString, JsValue, js_string};
use serde_json::{Map, Value};

/// The texts (strings) `value` holds, at any depth, in order; keys aside.
pub(crate) fn texts_in(value: &Value) -> Vec<&str> {
    fn walk<'a>(value: &'a Value, found: &mut Vec<&'a str>) {
        match value {
            Value::String(text) => found.push(text),
            Value::Array(items) => items.iter().for_each(|item| walk(item, found)),
            Value::Object(fields) => fields.values().for_each(|field| walk(field, found)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    walk(value, &mut found);
    found
}

/// Deepest value converted between JavaScript and JSON.
pub(super) const MAX_VALUE_DEPTH: usize = 100;

/// JSON → JavaScript value. Objects start from the realm's shared root shape, so building the
/// same kind of object again follows cached shape transitions; Boa's own `from_json` gives
/// every object a unique shape, which costs twice as much per tool result.
pub(super) fn from_json(value: &Value, context: &mut Context) -> JsResult<JsValue> {
    from_json_at(value, context, 0)
}

pub(super) fn from_json_at(
    value: &Value,
    context: &mut Context,
    depth: usize,
) -> JsResult<JsValue> {
    if depth > MAX_VALUE_DEPTH {
        return Err(JsNativeError::range()
            .with_message(format!(
                "value is nested deeper than {MAX_VALUE_DEPTH} levels"
            ))
            .into());
    }
    Ok(match value {
        Value::Null => JsValue::null(),
        Value::Bool(boolean) => JsValue::from(*boolean),
        Value::Number(number) => match number.as_i64().map(i32::try_from) {
            Some(Ok(small)) => JsValue::from(small),
            _ => JsValue::from(number.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(text) => JsValue::from(JsString::from(text.as_str())),
        Value::Array(items) => {
            let items = items
                .iter()
                .map(|item| from_json_at(item, context, depth + 1))
                .collect::<JsResult<Vec<_>>>()?;
            JsArray::from_iter(items, context).into()
        }
        Value::Object(map) => {
            let object = ObjectInitializer::with_native_data(OrdinaryObject, context).build();
            for (key, item) in map {
                let item = from_json_at(item, context, depth + 1)?;
                object.insert_property(
                    JsString::from(key.as_str()),
                    PropertyDescriptor::builder()
                        .value(item)
                        .writable(true)
                        .enumerable(true)
                        .configurable(true),
                );
            }
            object.into()
        }
    })
}

/// JavaScript value → JSON, depth-limited so hostile values cannot overflow the native stack.
pub(super) fn to_json(value: &JsValue, context: &mut Context) -> JsResult<Value> {
    to_json_at(value, context, 0).map(|value| value.unwrap_or(Value::Null))
}

pub(super) fn to_json_at(
    value: &JsValue,
    context: &mut Context,
    depth: usize,
) -> JsResult<Option<Value>> {
    if depth > MAX_VALUE_DEPTH {
        return Err(JsNativeError::range()
            .with_message(format!(
                "value is nested deeper than {MAX_VALUE_DEPTH} levels (or refers to itself)"
            ))
            .into());
    }
    if value.is_null() {
        return Ok(Some(Value::Null));
    }
    if value.is_undefined() || value.is_symbol() {
        return Ok(None);
    }
    if let Some(boolean) = value.as_boolean() {
        return Ok(Some(Value::Bool(boolean)));
    }
    if let Some(text) = value.as_string() {
        return Ok(Some(Value::String(text.to_std_string_escaped())));
    }
    if let Some(number) = value.as_number() {
        let json = if number.fract() == 0.0 && number.abs() < 9.0e15 {
            Value::from(number as i64)
        } else {
            serde_json::Number::from_f64(number).map_or(Value::Null, Value::Number)
        };
        return Ok(Some(json));
    }
    if value.is_bigint() {
        return Ok(Some(Value::String(
            value.to_string(context)?.to_std_string_escaped(),
        )));
    }
    let Some(object) = value.as_object() else {
        return Ok(None);
    };
    if object.is_callable() {
        return Ok(None);
    }
    if object.is_array() {
        let array = JsArray::from_object(object.clone())?;
        let length = array.length(context)?;
        let mut items = Vec::with_capacity(usize::try_from(length.min(1 << 20)).unwrap_or(0));
        for index in 0..length {
            let item = array.get(index, context)?;
            items.push(to_json_at(&item, context, depth + 1)?.unwrap_or(Value::Null));
        }
        return Ok(Some(Value::Array(items)));
    }
    let to_json_method = object.get(js_string!("toJSON"), context)?;
    if to_json_method.as_callable().is_some() {
        let converted = to_json_method
            .as_callable()
            .map(|method| method.call(value, &[], context))
            .transpose()?
            .unwrap_or_default();
        return to_json_at(&converted, context, depth + 1);
    }
    let mut map = Map::new();
    // Own string keys in property order. Enumerability is not checked: the objects scripts
    // build are plain objects, and checking costs a JS array per object on every tool call.
    for key in object.own_property_keys(context)? {
        let name = match &key {
            PropertyKey::String(name) => name.to_std_string_escaped(),
            PropertyKey::Index(index) => index.get().to_string(),
            PropertyKey::Symbol(_) => continue,
        };
        let item = object.get(key, context)?;
        if let Some(item) = to_json_at(&item, context, depth + 1)? {
            map.insert(name, item);
        }
    }
    Ok(Some(Value::Object(map)))
}

/// The first `chars` characters of `text` as a JSON string, then `…` when there is more.
pub(crate) fn quoted_start(text: &str, chars: usize) -> String {
    let start: String = text.chars().take(chars).collect();
    let more = if start.len() < text.len() { "…" } else { "" };
    format!("{}{more}", Value::String(start))
}

/// The last `chars` characters of `text` as a JSON string, after `…` when there is more (the
/// mirror of [`quoted_start`]).
pub(crate) fn quoted_end(text: &str, chars: usize) -> String {
    let count = text.chars().count();
    let end: String = text.chars().skip(count.saturating_sub(chars)).collect();
    let quoted = Value::String(end).to_string();
    if count > chars {
        format!("\"…{}", &quoted[1..])
    } else {
        quoted
    }
}

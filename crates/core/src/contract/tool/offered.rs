//! A tool's input schema as others are given it. [`portable_schema`] is the schema every
//! major MCP client accepts. [`offered_schema`] is what a model reads: the same fields, types
//! and rules, without what a schema generator adds for its own readers (`$schema`, `title`,
//! `default: null`, number formats such as `uint64`) and with an optional field's `null` left
//! out of its type, since leaving the field out says the same. Validation keeps using the full
//! schema, which still takes `null` for an optional field.
//!
//! A small model reads every one of these words on every call, in the shape function-calling
//! models were trained on.

use serde_json::{Map, Value, json};

/// Keywords whose value is one subschema.
const SUBSCHEMA: &[&str] = &[
    "items",
    "additionalItems",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
];
/// Keywords whose value is a list of subschemas.
const SUBSCHEMA_LISTS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];
/// Keywords whose value maps names to subschemas.
const SUBSCHEMA_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// The formats JSON Schema defines. schemars adds its own (`uint64`, `int32`, `double`, …),
/// which validators warn about or, in strict mode, refuse; their ranges are stated with
/// `minimum` and `maximum` anyway.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Calls `visit` on every subschema directly inside `map` (not on `map` itself).
fn each_subschema(map: &mut Map<String, Value>, visit: &mut dyn FnMut(&str, &mut Value)) {
    for (key, value) in map.iter_mut() {
        let key = key.as_str();
        if SUBSCHEMA_LISTS.contains(&key)
            && let Value::Array(list) = value
        {
            list.iter_mut().for_each(|item| visit(key, item));
        } else if SUBSCHEMA.contains(&key) {
            visit(key, value);
        } else if SUBSCHEMA_MAPS.contains(&key)
            && let Value::Object(named) = value
        {
            named.values_mut().for_each(|item| visit(key, item));
        }
    }
}

/// A JSON Schema every major MCP client accepts. Boolean subschemas are valid JSON Schema, but
/// the TypeScript SDK's validation of `tools/list` takes every property schema for an object
/// and rejects the whole list over one `true`: so `true` becomes `{}` and `false`
/// `{"not": {}}`, the same meaning as objects. Only `additionalProperties` and the
/// `unevaluated…` keywords keep their booleans, which every client reads. Formats JSON
/// Schema does not define are left out.
pub fn portable_schema(schema: Value) -> Value {
    match schema {
        Value::Bool(true) => json!({}),
        Value::Bool(false) => json!({ "not": {} }),
        Value::Object(mut map) => {
            if map
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|format| !STANDARD_FORMATS.contains(&format))
            {
                map.remove("format");
            }
            each_subschema(&mut map, &mut |key, value| {
                let keeps_boolean = matches!(
                    key,
                    "additionalProperties" | "unevaluatedProperties" | "unevaluatedItems"
                ) && value.is_boolean();
                if !keeps_boolean {
                    *value = portable_schema(value.take());
                }
            });
            Value::Object(map)
        }
        other => other,
    }
}

/// `schema` as offered to a model (see the module's doc).
pub fn offered_schema(schema: &Value) -> Value {
    let mut schema = portable_schema(schema.clone());
    if let Value::Object(object) = &mut schema {
        object.remove("$schema");
    }
    tidy(&mut schema);
    schema
}

/// Tidies one schema object and every schema inside it.
fn tidy(schema: &mut Value) {
    let Value::Object(object) = schema else {
        return;
    };
    object.remove("title");
    if object.get("default").is_some_and(Value::is_null) {
        object.remove("default");
    }
    let required: Vec<String> = object
        .get("required")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if !required.contains(name) {
                without_null(property);
            }
        }
    }
    each_subschema(object, &mut |_, inner| tidy(inner));
}

/// An optional field's schema without `null` among its types: `["string", "null"]` becomes
/// `"string"`, and `anyOf: [S, {type: null}]` becomes S (keeping the field's description).
fn without_null(schema: &mut Value) {
    let Value::Object(object) = schema else {
        return;
    };
    if let Some(Value::Array(types)) = object.get("type") {
        let kept: Vec<Value> = types
            .iter()
            .filter(|kind| kind.as_str() != Some("null"))
            .cloned()
            .collect();
        if kept.len() < types.len() && !kept.is_empty() {
            let kept = if kept.len() == 1 {
                kept[0].clone()
            } else {
                Value::Array(kept)
            };
            object.insert("type".into(), kept);
        }
    }
    if let Some(Value::Array(any_of)) = object.get("anyOf") {
        let is_null = |schema: &Value| schema.get("type").and_then(Value::as_str) == Some("null");
        let kept: Vec<&Value> = any_of.iter().filter(|schema| !is_null(schema)).collect();
        if kept.len() == 1 && kept.len() < any_of.len() {
            let Value::Object(only) = kept[0].clone() else {
                return;
            };
            object.remove("anyOf");
            let mut merged: Map<String, Value> = only;
            // The field's own words (description, default …) win over the branch's.
            for (key, value) in std::mem::take(object) {
                merged.insert(key, value);
            }
            *object = merged;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn generator_notes_go_and_optional_fields_lose_null() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "ListInput",
            "type": "object",
            "additionalProperties": false,
            "required": ["path"],
            "properties": {
                "path": { "type": ["string", "null"], "description": "kept: required" },
                "title": { "type": ["string", "null"], "default": null },
                "limit": { "type": ["integer", "null"], "format": "uint64", "minimum": 0 },
                "when": { "type": "string", "format": "date-time" },
                "filter": {
                    "anyOf": [{ "$ref": "#/$defs/Filter" }, { "type": "null" }],
                    "description": "Which ones."
                }
            },
            "$defs": { "Filter": { "title": "Filter", "type": "object", "properties": {} } }
        });
        assert_eq!(
            offered_schema(&schema),
            json!({
                "type": "object",
                "additionalProperties": false,
                "required": ["path"],
                "properties": {
                    "path": { "type": ["string", "null"], "description": "kept: required" },
                    "title": { "type": "string" },
                    "limit": { "type": "integer", "minimum": 0 },
                    "when": { "type": "string", "format": "date-time" },
                    "filter": { "$ref": "#/$defs/Filter", "description": "Which ones." }
                },
                "$defs": { "Filter": { "type": "object", "properties": {} } }
            })
        );
    }

    #[test]
    fn a_schema_without_generator_notes_is_unchanged() {
        let schema = json!({
            "type": "object",
            "properties": { "a": { "type": "number" } },
            "required": ["a"]
        });
        assert_eq!(offered_schema(&schema), schema);
    }
}

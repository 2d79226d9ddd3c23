//! The shape of a tool's result as the sandbox checks it: which fields an object has, what a
//! list holds. Read from the tool's declared output schema on the host and sent to the worker
//! with the tool's binding; the engine makes a read of any other field throw (see
//! `engine/typed.rs`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// How deep a schema is followed; deeper (or recursive) parts are not checked.
const MAX_DEPTH: usize = 8;

/// What a value of a tool's result is declared to be.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Shape {
    /// Not checked: no schema, an open map, a number or boolean, or a union of different
    /// kinds.
    #[default]
    Any,
    /// A string. Not checked in the sandbox (a string has no fields to check, and its methods
    /// are JavaScript's); the grammar lets a read chained on one name only what a string has.
    Text,
    /// A string that is one of these values (a declared `enum` or `const`s of strings): like
    /// [`Shape::Text`], and the sandbox refuses a comparison of the field with any other
    /// value (`engine/typed.rs`).
    Choice { values: Vec<String> },
    /// An object with exactly these fields declared, in the schema's order.
    Record { fields: Vec<(String, Shape)> },
    /// A list whose items have this shape.
    List { item: Box<Shape> },
}

impl Shape {
    /// The shape a JSON Schema declares. `$ref`s into `$defs` or `definitions` are followed.
    pub fn of_schema(schema: &Value) -> Self {
        Self::at(schema, schema, 0)
    }

    pub fn is_any(&self) -> bool {
        matches!(self, Self::Any)
    }

    /// Adds to `values` the values declared for every field named `name` in this shape, at any
    /// depth.
    pub(crate) fn choices_of(&self, name: &str, values: &mut Vec<String>) {
        match self {
            Self::Record { fields } => {
                for (field, shape) in fields {
                    if field == name
                        && let Self::Choice { values: declared } = shape
                    {
                        for value in declared {
                            if !values.contains(value) {
                                values.push(value.clone());
                            }
                        }
                    }
                    shape.choices_of(name, values);
                }
            }
            Self::List { item } => item.choices_of(name, values),
            Self::Any | Self::Text | Self::Choice { .. } => {}
        }
    }

    fn at(schema: &Value, root: &Value, depth: usize) -> Self {
        if depth > MAX_DEPTH {
            return Self::Any;
        }
        let Some(object) = schema.as_object() else {
            return Self::Any;
        };
        if let Some(target) = object.get("$ref").and_then(Value::as_str) {
            return resolve(target, root)
                .map_or(Self::Any, |target| Self::at(target, root, depth + 1));
        }
        if let Some(values) = choices(object) {
            return Self::Choice { values };
        }
        for union in ["anyOf", "oneOf"] {
            if let Some(variants) = object.get(union).and_then(Value::as_array) {
                return Self::union(
                    variants
                        .iter()
                        .filter(|variant| !is_null(variant))
                        .map(|variant| Self::at(variant, root, depth + 1)),
                );
            }
        }
        if let Some(parts) = object.get("allOf").and_then(Value::as_array) {
            return Self::all(parts.iter().map(|part| Self::at(part, root, depth + 1)));
        }
        if let Some(properties) = object.get("properties").and_then(Value::as_object) {
            // A map with some fields named is open: other fields are data too.
            if open(object) {
                return Self::Any;
            }
            return Self::Record {
                fields: properties
                    .iter()
                    .map(|(name, field)| (name.clone(), Self::at(field, root, depth + 1)))
                    .collect(),
            };
        }
        if let Some(item) = object.get("items").filter(|items| items.is_object()) {
            return Self::List {
                item: Box::new(Self::at(item, root, depth + 1)),
            };
        }
        if is_string(object) {
            return Self::Text;
        }
        Self::Any
    }

    /// One of several shapes: records merge their fields; anything else is not checked.
    fn union(variants: impl Iterator<Item = Self>) -> Self {
        let mut merged: Option<Self> = None;
        for variant in variants {
            merged = Some(match (merged, variant) {
                (None, variant) => variant,
                (Some(Self::Record { mut fields }), Self::Record { fields: more }) => {
                    for (name, shape) in more {
                        match fields.iter_mut().find(|(known, _)| *known == name) {
                            // The same field declared two ways is checked as neither.
                            Some((_, known)) if *known != shape => *known = Self::Any,
                            Some(_) => {}
                            None => fields.push((name, shape)),
                        }
                    }
                    Self::Record { fields }
                }
                (Some(Self::List { item }), Self::List { item: other }) if item == other => {
                    Self::List { item }
                }
                (Some(Self::Text), Self::Text)
                | (Some(Self::Text), Self::Choice { .. })
                | (Some(Self::Choice { .. }), Self::Text) => Self::Text,
                (Some(Self::Choice { mut values }), Self::Choice { values: more }) => {
                    for value in more {
                        if !values.contains(&value) {
                            values.push(value);
                        }
                    }
                    Self::Choice { values }
                }
                _ => return Self::Any,
            });
        }
        merged.unwrap_or(Self::Any)
    }

    /// All of several shapes at once: the fields of every record part.
    fn all(parts: impl Iterator<Item = Self>) -> Self {
        let mut fields: Vec<(String, Shape)> = Vec::new();
        for part in parts {
            match part {
                Self::Record { fields: more } => {
                    for (name, shape) in more {
                        if !fields.iter().any(|(known, _)| *known == name) {
                            fields.push((name, shape));
                        }
                    }
                }
                _ => return Self::Any,
            }
        }
        if fields.is_empty() {
            Self::Any
        } else {
            Self::Record { fields }
        }
    }
}

/// `"#/$defs/Entry"` or `"#/definitions/Entry"` in `root`.
pub(crate) fn resolve<'a>(target: &str, root: &'a Value) -> Option<&'a Value> {
    let path = target.strip_prefix("#/")?;
    path.split('/').try_fold(root, |node, part| {
        node.get(part.replace("~1", "/").replace("~0", "~"))
    })
}

/// The values of a string declared as an `enum` or a `const` (`null` among them is left out:
/// it is the field's absence); `None` when anything else may come.
fn choices(object: &Map<String, Value>) -> Option<Vec<String>> {
    let listed: Vec<&Value> = match (object.get("enum"), object.get("const")) {
        (Some(Value::Array(values)), _) => values.iter().collect(),
        (None, Some(value)) => vec![value],
        _ => return None,
    };
    let mut values = Vec::new();
    for value in listed {
        match value {
            Value::String(value) => values.push(value.clone()),
            Value::Null => {}
            _ => return None,
        }
    }
    (!values.is_empty()).then_some(values)
}

/// `"type": "string"`, or `["string", "null"]`: a string (or nothing).
fn is_string(object: &Map<String, Value>) -> bool {
    match object.get("type") {
        Some(Value::String(kind)) => kind == "string",
        Some(Value::Array(kinds)) => {
            kinds.iter().any(|kind| kind == "string")
                && kinds.iter().all(|kind| kind == "string" || kind == "null")
        }
        _ => false,
    }
}

fn is_null(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
}

/// Whether an object schema takes fields beyond those it names.
fn open(object: &Map<String, Value>) -> bool {
    match object.get("additionalProperties") {
        Some(Value::Bool(allowed)) => *allowed,
        Some(Value::Object(_)) => true,
        _ => object
            .get("patternProperties")
            .is_some_and(|patterns| patterns.as_object().is_some_and(|map| !map.is_empty())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field_names(shape: &Shape) -> Vec<&str> {
        match shape {
            Shape::Record { fields } => fields.iter().map(|(name, _)| name.as_str()).collect(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn strings_with_declared_values_are_choices() {
        let schema = json!({
            "type": "object",
            "properties": {
                "kind": { "type": "string", "enum": ["file", "dir"] },
                "tier": { "oneOf": [
                    { "type": "string", "const": "core" },
                    { "type": "string", "const": "working" }
                ] },
                "mode": { "type": ["string", "null"], "enum": ["fast", null] },
                "label": { "anyOf": [{ "type": "string" }, { "const": "none" }] },
                "level": { "enum": [1, 2] }
            }
        });
        let Shape::Record { fields } = Shape::of_schema(&schema) else {
            panic!("a record");
        };
        let choice = |values: &[&str]| Shape::Choice {
            values: values.iter().map(|value| (*value).to_owned()).collect(),
        };
        assert_eq!(fields[0].1, choice(&["file", "dir"]));
        assert_eq!(fields[1].1, choice(&["core", "working"]));
        assert_eq!(fields[2].1, choice(&["fast"]));
        // Any string may come, or values that are not strings: not a choice.
        assert_eq!(fields[3].1, Shape::Text);
        assert_eq!(fields[4].1, Shape::Any);
        let mut values = Vec::new();
        Shape::of_schema(&json!({ "type": "array", "items": schema }))
            .choices_of("kind", &mut values);
        assert_eq!(values, ["file", "dir"]);
    }

    #[test]
    fn a_record_with_a_list_of_records_through_refs() {
        let schema = json!({
            "type": "object",
            "properties": {
                "entries": { "type": "array", "items": { "$ref": "#/$defs/Entry" } },
                "truncated": { "type": "boolean" }
            },
            "$defs": {
                "Entry": {
                    "type": "object",
                    "properties": { "path": {"type": "string"}, "kind": {"type": "string"} }
                }
            }
        });
        let shape = Shape::of_schema(&schema);
        assert_eq!(field_names(&shape), ["entries", "truncated"]);
        let Shape::Record { fields } = &shape else {
            unreachable!()
        };
        let Shape::List { item } = &fields[0].1 else {
            panic!("{shape:?}")
        };
        assert_eq!(field_names(item), ["path", "kind"]);
    }

    #[test]
    fn maps_numbers_and_mixed_unions_are_not_checked() {
        for schema in [
            json!({ "type": "object", "additionalProperties": { "type": "number" } }),
            json!({ "type": "object", "properties": { "a": {} }, "additionalProperties": true }),
            json!({ "type": "number" }),
            json!({ "type": ["string", "number"] }),
            json!({ "anyOf": [{ "type": "string" }, { "type": "object", "properties": { "a": {} } }] }),
            json!({ "$ref": "#/$defs/Missing" }),
            json!(true),
        ] {
            assert_eq!(Shape::of_schema(&schema), Shape::Any, "{schema}");
        }
    }

    #[test]
    fn strings_are_text() {
        for schema in [
            json!({ "type": "string" }),
            json!({ "type": ["string", "null"] }),
            json!({ "anyOf": [{ "type": "string" }, { "type": "null" }] }),
        ] {
            assert_eq!(Shape::of_schema(&schema), Shape::Text, "{schema}");
        }
    }

    #[test]
    fn a_nullable_record_and_a_union_of_records_keep_their_fields() {
        let nullable = json!({ "anyOf": [{ "type": "object", "properties": { "a": {} } }, { "type": "null" }] });
        assert_eq!(field_names(&Shape::of_schema(&nullable)), ["a"]);
        let union = json!({ "oneOf": [
            { "type": "object", "properties": { "ok": {}, "value": {} } },
            { "type": "object", "properties": { "ok": {}, "error": {} } }
        ] });
        assert_eq!(
            field_names(&Shape::of_schema(&union)),
            ["ok", "value", "error"]
        );
    }

    #[test]
    fn a_recursive_schema_ends() {
        let schema = json!({
            "$ref": "#/$defs/Node",
            "$defs": { "Node": { "type": "object", "properties": {
                "children": { "type": "array", "items": { "$ref": "#/$defs/Node" } }
            } } }
        });
        assert_eq!(field_names(&Shape::of_schema(&schema)), ["children"]);
    }
}

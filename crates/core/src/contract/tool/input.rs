//! How a tool's input is normalised before validation: what small models write for an
//! optional field they mean to leave out.

use serde_json::Value;

/// Removes, from `input` and the objects within it that `schema` describes, the fields set to
/// `null` that are not required and whose schema does not take `null`.
pub(super) fn drop_null_optionals(schema: &Value, input: &mut Value) {
    let Value::Object(fields) = input else {
        return;
    };
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    fields.retain(|name, value| {
        !(value.is_null()
            && !required.contains(&name.as_str())
            && properties
                .get(name)
                .is_some_and(|property| !takes_null(property)))
    });
    for (name, value) in fields.iter_mut() {
        if let Some(property) = properties.get(name) {
            drop_null_optionals(property, value);
        }
    }
}

/// Whether a schema accepts `null` as it is written (`type` naming `null`, or a branch of
/// `anyOf`/`oneOf` that does); a `$ref` or anything unusual counts as taking it, so nothing is
/// dropped that the tool might want.
fn takes_null(schema: &Value) -> bool {
    let Some(object) = schema.as_object() else {
        return true;
    };
    if object.contains_key("$ref") || object.contains_key("allOf") {
        return true;
    }
    if let Some(kind) = object.get("type") {
        return match kind {
            Value::String(kind) => kind == "null",
            Value::Array(kinds) => kinds.iter().any(|kind| kind == "null"),
            _ => true,
        };
    }
    for branches in ["anyOf", "oneOf"] {
        if let Some(branches) = object.get(branches).and_then(Value::as_array) {
            return branches.iter().any(takes_null);
        }
    }
    if let Some(values) = object.get("enum").and_then(Value::as_array) {
        return values.iter().any(Value::is_null);
    }
    // `{}` and other schemas without a type take anything.
    !object.contains_key("properties") && !object.contains_key("items")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small models send `null` for an optional field they mean to leave out; it is left out,
    /// unless the field takes `null`. Required fields and other values are left for
    /// validation to judge.
    #[test]
    fn optional_fields_sent_as_null_are_absent() {
        let schema = serde_json::json!({
            "type": "object",
            "required": ["city"],
            "properties": {
                "city": { "type": "string" },
                "unit": { "type": "string", "enum": ["celsius", "fahrenheit"] },
                "note": { "type": ["string", "null"] },
                "days": { "anyOf": [{ "type": "integer" }, { "type": "null" }] },
                "where": {
                    "type": "object",
                    "properties": { "street": { "type": "string" } }
                }
            }
        });
        for (input, expected) in [
            (
                serde_json::json!({ "city": "Paris", "unit": null }),
                serde_json::json!({ "city": "Paris" }),
            ),
            (
                serde_json::json!({ "city": null, "note": null, "days": null }),
                serde_json::json!({ "city": null, "note": null, "days": null }),
            ),
            (
                serde_json::json!({ "city": "Oslo", "where": { "street": null }, "other": null }),
                serde_json::json!({ "city": "Oslo", "where": {}, "other": null }),
            ),
            (serde_json::json!("Paris"), serde_json::json!("Paris")),
        ] {
            let mut normalized = input.clone();
            drop_null_optionals(&schema, &mut normalized);
            assert_eq!(normalized, expected, "{input}");
        }
    }
}

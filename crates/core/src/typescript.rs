//! Tools as TypeScript-style declarations, generated from their JSON Schemas: what code mode
//! shows the model, and what a schema error quotes back.
//!
//! ```text
//! // Add a todo to the user's list
//! todo.create(input: {
//!   title: string; // What to do
//!   due?: string; // RFC 3339 date or time
//! }): { id: string; title: string; done: boolean }
//! ```
//!
//! The rendering covers what tool schemas use: the JSON types, `enum`, `const`, `oneOf` and
//! `anyOf` (as unions), `allOf` of one schema, nullable types, arrays, maps, and `$ref` into
//! the schema's own `$defs`/`definitions`. Anything else is `any`.

use serde_json::{Map, Value};

/// How deep nested types are spelled out before they become `object`.
const MAX_DEPTH: usize = 5;
/// Property comments are cut to this many characters.
const COMMENT_CHARS: usize = 90;

/// The declaration of one tool: its description as a comment, then `call(input): output`,
/// with the input's top-level fields one per line and commented.
pub fn declaration(call: &str, description: &str, input: &Value, output: Option<&Value>) -> String {
    let mut text = String::new();
    let summary = first_sentence(description);
    if !summary.is_empty() {
        text.push_str(&format!("// {summary}\n"));
    }
    text.push_str(&signature_with(call, input, output, true));
    text
}

/// `call(input: {...}): output` on one line.
pub fn signature(call: &str, input: &Value, output: Option<&Value>) -> String {
    signature_with(call, input, output, false)
}

/// `call(input: {...})` on one line: how to call it, without a result type. For errors that
/// say what a call takes.
pub fn call_signature(call: &str, input: &Value) -> String {
    let mut text = signature(call, input, None);
    text.truncate(text.trim_end_matches(": any").len());
    text
}

fn signature_with(call: &str, input: &Value, output: Option<&Value>, multiline: bool) -> String {
    let renderer = Renderer { root: input };
    let resolved = renderer.resolve(input);
    let optional = required_of(resolved).is_empty();
    let properties = resolved.get("properties").and_then(Value::as_object);
    let input_type = match properties {
        Some(properties) if multiline && !properties.is_empty() => {
            renderer.object_lines(resolved, properties)
        }
        Some(properties) if properties.is_empty() => "{}".to_owned(),
        _ => renderer.type_of(input, 0),
    };
    let parameter = if input_type == "{}" {
        String::new()
    } else if optional {
        format!("input?: {input_type}")
    } else {
        format!("input: {input_type}")
    };
    let result = match output {
        Some(output) => Renderer { root: output }.type_of(output, 0),
        None => "any".to_owned(),
    };
    format!("{call}({parameter}): {result}")
}

/// One correct call with placeholder values for the required fields, e.g.
/// `todo.create({"title": "…"})`.
pub fn example_call(call: &str, input: &Value) -> String {
    let renderer = Renderer { root: input };
    let example = renderer.example(input, 0);
    match example {
        Value::Object(object) if object.is_empty() => format!("{call}({{}})"),
        other => format!("{call}({other})"),
    }
}

/// The schema of the value at `path` (a JSON pointer into an input, as validation errors
/// give it), following properties, array items and references.
fn schema_at<'a>(schema: &'a Value, path: &str) -> Option<&'a Value> {
    let renderer = Renderer { root: schema };
    let mut current = renderer.resolve(schema);
    for segment in path.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        let next = if let Some(property) = current
            .get("properties")
            .and_then(|properties| properties.get(&segment))
        {
            property
        } else if segment.parse::<usize>().is_ok() {
            current.get("items")?
        } else {
            return None;
        };
        current = renderer.resolve(next);
    }
    Some(current)
}

/// The description of the field at `path`, which says in words what a `pattern` says in a
/// regex.
pub fn description_at(schema: &Value, path: &str) -> Option<String> {
    let field = schema_at(schema, path)?;
    let text = field.get("description")?.as_str()?;
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    Some(words.trim_end_matches('.').to_owned())
}

/// The values a field of `schema` at `path` (a JSON pointer into the input, e.g. `/tier`)
/// may take, when the schema lists them (`enum`, `const`, a union of those).
pub fn allowed_values(schema: &Value, path: &str) -> Vec<Value> {
    let renderer = Renderer { root: schema };
    let Some(current) = schema_at(schema, path) else {
        return Vec::new();
    };
    if let Some(values) = renderer.literals(current) {
        return values;
    }
    // `tier?: Tier | null`: the values of the variants that are not null. The error then
    // names them; null is what leaving the field out means.
    let Some(variants) = current
        .get("oneOf")
        .or_else(|| current.get("anyOf"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let mut values = Vec::new();
    for variant in variants {
        let variant = renderer.resolve(variant);
        if variant.get("type").and_then(Value::as_str) == Some("null") {
            continue;
        }
        match renderer.literals(variant) {
            Some(literals) => values.extend(literals),
            None => return Vec::new(),
        }
    }
    values
}

fn first_sentence(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default().trim();
    cut(line, 160)
}

fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max - 1).collect();
    cut.push('…');
    cut
}

fn required_of(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

struct Renderer<'a> {
    root: &'a Value,
}

impl<'a> Renderer<'a> {
    /// Follows `$ref` (into `$defs` or `definitions`) and `allOf` of one schema.
    fn resolve(&self, mut schema: &'a Value) -> &'a Value {
        for _ in 0..16 {
            if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
                let target = reference
                    .strip_prefix('#')
                    .and_then(|pointer| self.root.pointer(pointer));
                match target {
                    Some(target) => {
                        schema = target;
                        continue;
                    }
                    None => return schema,
                }
            }
            if let Some([only]) = schema
                .get("allOf")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
            {
                schema = only;
                continue;
            }
            break;
        }
        schema
    }

    /// The literal values of an `enum`, a `const`, or a union made only of those.
    fn literals(&self, schema: &Value) -> Option<Vec<Value>> {
        let schema = self.resolve(schema);
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            return Some(values.clone());
        }
        if let Some(value) = schema.get("const") {
            return Some(vec![value.clone()]);
        }
        let variants = schema
            .get("oneOf")
            .or_else(|| schema.get("anyOf"))
            .and_then(Value::as_array)?;
        let mut values = Vec::new();
        for variant in variants {
            values.extend(self.literals(variant)?);
        }
        Some(values)
    }

    fn type_of(&self, schema: &Value, depth: usize) -> String {
        let schema = self.resolve(schema);
        if schema == &Value::Bool(true) || schema.as_object().is_some_and(Map::is_empty) {
            return "any".to_owned();
        }
        if let Some(values) = self.literals(schema) {
            return values
                .iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join(" | ");
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(variants) = schema.get(key).and_then(Value::as_array) {
                let mut parts: Vec<String> = Vec::new();
                for variant in variants {
                    let part = self.type_of(variant, depth + 1);
                    if !parts.contains(&part) {
                        parts.push(part);
                    }
                }
                return parts.join(" | ");
            }
        }
        let types: Vec<&str> = match schema.get("type") {
            Some(Value::String(kind)) => vec![kind.as_str()],
            Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect(),
            _ if schema.get("properties").is_some() => vec!["object"],
            _ if schema.get("items").is_some() => vec!["array"],
            _ => return "any".to_owned(),
        };
        let mut parts: Vec<String> = Vec::new();
        for kind in types {
            let part = match kind {
                "string" => "string".to_owned(),
                "integer" | "number" => "number".to_owned(),
                "boolean" => "boolean".to_owned(),
                "null" => "null".to_owned(),
                "array" => {
                    let item = match schema.get("items") {
                        Some(items) if depth < MAX_DEPTH => self.type_of(items, depth + 1),
                        _ => "any".to_owned(),
                    };
                    if item.contains(' ') && !item.starts_with('{') {
                        format!("({item})[]")
                    } else {
                        format!("{item}[]")
                    }
                }
                "object" => self.object_inline(schema, depth),
                _ => "any".to_owned(),
            };
            if !parts.contains(&part) {
                parts.push(part);
            }
        }
        parts.join(" | ")
    }

    fn object_inline(&self, schema: &Value, depth: usize) -> String {
        let properties = schema.get("properties").and_then(Value::as_object);
        match properties {
            Some(properties) if !properties.is_empty() => {
                if depth >= MAX_DEPTH {
                    return "object".to_owned();
                }
                let required = required_of(schema);
                let fields: Vec<String> = properties
                    .iter()
                    .map(|(name, property)| {
                        let optional = !required.contains(&name.as_str());
                        format!(
                            "{}{}: {}",
                            field_name(name),
                            if optional { "?" } else { "" },
                            self.type_of(property, depth + 1)
                        )
                    })
                    .collect();
                format!("{{ {} }}", fields.join("; "))
            }
            _ => match schema.get("additionalProperties") {
                Some(Value::Bool(false)) => "{}".to_owned(),
                Some(values) if values.is_object() && depth < MAX_DEPTH => {
                    format!("Record<string, {}>", self.type_of(values, depth + 1))
                }
                _ => "Record<string, any>".to_owned(),
            },
        }
    }

    /// The top-level input object, a field per line with its description as a comment.
    fn object_lines(&self, schema: &Value, properties: &Map<String, Value>) -> String {
        let required = required_of(schema);
        let mut text = "{".to_owned();
        for (name, property) in properties {
            let optional = !required.contains(&name.as_str());
            let kind = self.type_of(property, 1);
            // Optional fields may be left out; `| null` on them is noise.
            let kind = if optional {
                kind.strip_suffix(" | null")
                    .map_or(kind.clone(), str::to_owned)
            } else {
                kind
            };
            text.push_str(&format!(
                "\n  {}{}: {kind};",
                field_name(name),
                if optional { "?" } else { "" }
            ));
            let description = property
                .get("description")
                .or_else(|| self.resolve(property).get("description"))
                .and_then(Value::as_str)
                .map(first_sentence)
                .unwrap_or_default();
            if !description.is_empty() {
                text.push_str(&format!(" // {}", cut(&description, COMMENT_CHARS)));
            }
        }
        text.push_str("\n}");
        text
    }

    fn example(&self, schema: &Value, depth: usize) -> Value {
        let schema = self.resolve(schema);
        if let Some(example) = schema
            .get("examples")
            .and_then(Value::as_array)
            .and_then(|examples| examples.first())
            .or_else(|| schema.get("default").filter(|value| !value.is_null()))
        {
            return example.clone();
        }
        if let Some(first) = self
            .literals(schema)
            .and_then(|values| values.into_iter().next())
        {
            return first;
        }
        if let Some(first) = schema
            .get("oneOf")
            .or_else(|| schema.get("anyOf"))
            .and_then(Value::as_array)
            .and_then(|variants| {
                variants
                    .iter()
                    .find(|variant| self.resolve(variant).get("type") != Some(&"null".into()))
            })
        {
            return self.example(first, depth + 1);
        }
        let kind = match schema.get("type") {
            Some(Value::String(kind)) => kind.as_str(),
            Some(Value::Array(kinds)) => kinds
                .iter()
                .filter_map(Value::as_str)
                .find(|kind| *kind != "null")
                .unwrap_or("null"),
            _ if schema.get("properties").is_some() => "object",
            _ => "string",
        };
        match kind {
            "string" => Value::String("…".to_owned()),
            "integer" | "number" => Value::from(
                schema
                    .get("minimum")
                    .and_then(Value::as_i64)
                    .unwrap_or(1)
                    .max(1),
            ),
            "boolean" => Value::Bool(true),
            "array" => match schema.get("items") {
                Some(items) if depth < MAX_DEPTH => {
                    Value::Array(vec![self.example(items, depth + 1)])
                }
                _ => Value::Array(Vec::new()),
            },
            "object" => {
                let mut object = Map::new();
                if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                    for name in required_of(schema) {
                        if let Some(property) = properties.get(name) {
                            let value = if depth < MAX_DEPTH {
                                self.example(property, depth + 1)
                            } else {
                                Value::Null
                            };
                            object.insert(name.to_owned(), value);
                        }
                    }
                }
                Value::Object(object)
            }
            _ => Value::Null,
        }
    }
}

/// A property name as TypeScript writes it: bare when it is an identifier, quoted otherwise.
fn field_name(name: &str) -> String {
    let identifier = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if identifier {
        name.to_owned()
    } else {
        Value::String(name.to_owned()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn todo_input() -> Value {
        json!({
            "type": "object",
            "properties": {
                "title": {"type": "string", "description": "What to do. Short."},
                "due": {"type": ["string", "null"], "description": "RFC 3339 date or time"},
                "priority": {"$ref": "#/$defs/Priority"},
                "tags": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["title"],
            "$defs": {
                "Priority": {"oneOf": [{"const": "low"}, {"const": "high"}]}
            }
        })
    }

    #[test]
    fn a_declaration_shows_fields_types_optional_marks_enums_and_the_result() {
        let output = json!({
            "type": "object",
            "properties": {"id": {"type": "string"}, "done": {"type": "boolean"},
                           "due": {"type": ["string", "null"]}},
            "required": ["id", "done"]
        });
        let text = declaration(
            "todo.create",
            "Add a todo to the user's list\nMore detail.",
            &todo_input(),
            Some(&output),
        );
        assert_eq!(
            text,
            "// Add a todo to the user's list\n\
             todo.create(input: {\n  \
               title: string; // What to do. Short.\n  \
               due?: string; // RFC 3339 date or time\n  \
               priority?: \"low\" | \"high\";\n  \
               tags?: string[];\n\
             }): { id: string; done: boolean; due?: string | null }"
        );
    }

    #[test]
    fn an_input_with_nothing_required_is_optional_and_an_empty_one_is_left_out() {
        let input = json!({"type": "object", "properties": {"timezone": {"type": "string"}}});
        assert_eq!(
            signature("time.now", &input, None),
            "time.now(input?: { timezone?: string }): any"
        );
        let empty = json!({"type": "object", "properties": {}});
        assert_eq!(
            signature(
                "x.y",
                &empty,
                Some(&json!({"type": "array", "items": {"type": "integer"}}))
            ),
            "x.y(): number[]"
        );
    }

    #[test]
    fn examples_fill_required_fields_only() {
        assert_eq!(
            example_call("todo.create", &todo_input()),
            "todo.create({\"title\":\"…\"})"
        );
    }

    #[test]
    fn allowed_values_follow_references_and_unions() {
        let values = allowed_values(&todo_input(), "/priority");
        assert_eq!(values, [json!("low"), json!("high")]);
        assert!(allowed_values(&todo_input(), "/title").is_empty());
        assert!(allowed_values(&todo_input(), "/missing/deeper").is_empty());
        // `tier?: Tier | null`, as schemars writes an optional enum: the values, not null.
        let optional = json!({
            "type": "object",
            "properties": {"tier": {"anyOf": [{"$ref": "#/$defs/Tier"}, {"type": "null"}]},
                           "either": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
            "$defs": {"Tier": {"type": "string", "enum": ["core", "working", "archival"]}}
        });
        assert_eq!(
            allowed_values(&optional, "/tier"),
            [json!("core"), json!("working"), json!("archival")]
        );
        assert!(allowed_values(&optional, "/either").is_empty());
    }

    #[test]
    fn recursive_and_odd_schemas_end() {
        let recursive = json!({
            "$ref": "#/$defs/Node",
            "$defs": {"Node": {"type": "object", "properties": {
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}}
        });
        let text = signature("tree.get", &json!({}), Some(&recursive));
        assert!(text.contains("children?"), "{text}");
        assert!(text.len() < 400, "{text}");
        assert_eq!(
            signature("a.b", &json!({}), Some(&json!(true))),
            "a.b(input?: any): any"
        );
        let odd = json!({"type": "object", "properties": {"a-b": {"type": "string"}}});
        assert_eq!(
            signature("a.b", &odd, None),
            "a.b(input?: { \"a-b\"?: string }): any"
        );
    }
}

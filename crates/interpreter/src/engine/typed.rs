//! Tool results that have the fields their tool declares, and no others: reading a field that
//! is neither declared nor present throws at that line, naming the tool and the fields there
//! are, instead of giving `undefined` for the program to carry into an answer.
//!
//! Every object the declared shape names a field list for becomes a `Proxy` whose `get` checks
//! the field; lists stay real arrays of such objects. A field the data has but the schema does
//! not declare is read as usual (the data wins), as are the names every object answers
//! (`toString`, `then`, `toJSON`, …) and symbols.

use boa_engine::object::FunctionObjectBuilder;
use boa_engine::object::builtins::JsArray;
use boa_engine::property::PropertyKey;
use boa_engine::{
    Context, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction, js_string,
};

use crate::shape::Shape;

/// Names read of any value by the language or by habit, which never throw.
pub(crate) const ALWAYS_READABLE: &[&str] = &[
    "then",
    "toJSON",
    "constructor",
    "toString",
    "toLocaleString",
    "valueOf",
    "hasOwnProperty",
    "isPrototypeOf",
    "propertyIsEnumerable",
    "__proto__",
];

/// Fields named in the error, at most.
const FIELDS_NAMED: usize = 16;

/// A shape with the `Proxy` handler of each record in it built, for one tool call (or one
/// parser's data: `formats.rs`).
pub(super) enum Checked {
    Any,
    Record {
        handler: JsObject,
        fields: Vec<(String, Checked)>,
    },
    /// An object whose own reads are not checked, with fields that may hold records.
    Open(Vec<(String, Checked)>),
    List(Box<Checked>),
}

/// `value`, a result of the tool `tool` (as code calls it), with reads checked against `shape`.
pub(super) fn typed_result(
    value: JsValue,
    shape: &Shape,
    tool: &str,
    context: &mut Context,
) -> JsResult<JsValue> {
    if matches!(shape, Shape::Any | Shape::Text | Shape::Choice { .. }) {
        return Ok(value);
    }
    let checked = build(shape, tool, "", context)?;
    apply(value, &checked, context)
}

fn build(shape: &Shape, tool: &str, place: &str, context: &mut Context) -> JsResult<Checked> {
    Ok(match shape {
        Shape::Any | Shape::Text | Shape::Choice { .. } => Checked::Any,
        Shape::List { item } => Checked::List(Box::new(build(
            item,
            tool,
            &format!("{place}[i]"),
            context,
        )?)),
        Shape::Record { fields } => {
            let names: Vec<String> = fields.iter().map(|(name, _)| name.clone()).collect();
            let choices: Vec<(String, Vec<String>)> = fields
                .iter()
                .filter_map(|(name, field)| match field {
                    Shape::Choice { values } => Some((name.clone(), values.clone())),
                    _ => None,
                })
                .collect();
            let handler = handler(tool, place, names, choices, context)?;
            let mut checked = Vec::with_capacity(fields.len());
            for (name, field) in fields {
                let inner = if place.is_empty() {
                    name.clone()
                } else {
                    format!("{place}.{name}")
                };
                checked.push((name.clone(), build(field, tool, &inner, context)?));
            }
            Checked::Record {
                handler,
                fields: checked,
            }
        }
    })
}

pub(super) fn apply(value: JsValue, checked: &Checked, context: &mut Context) -> JsResult<JsValue> {
    let Some(object) = value.as_object() else {
        return Ok(value);
    };
    match checked {
        Checked::Any => Ok(value),
        Checked::List(item) => {
            if !object.is_array() || matches!(**item, Checked::Any) {
                return Ok(value);
            }
            let array = JsArray::from_object(object.clone())?;
            let length = array.length(context)?;
            for index in 0..length {
                let element = array.get(index, context)?;
                let element = apply(element, item, context)?;
                array.set(index, element, false, context)?;
            }
            Ok(value)
        }
        Checked::Open(fields) => {
            if object.is_array() || object.is_callable() {
                return Ok(value);
            }
            apply_fields(&object, fields, context)?;
            Ok(value)
        }
        Checked::Record { handler, fields } => {
            if object.is_array() || object.is_callable() {
                return Ok(value);
            }
            apply_fields(&object, fields, context)?;
            proxied(value, handler.clone(), context)
        }
    }
}

/// Checks the reads of `object`'s fields that hold records.
fn apply_fields(
    object: &JsObject,
    fields: &[(String, Checked)],
    context: &mut Context,
) -> JsResult<()> {
    for (name, field) in fields {
        if matches!(field, Checked::Any) {
            continue;
        }
        let key = JsString::from(name.as_str());
        let inner = object.get(key.clone(), context)?;
        if inner.is_object() {
            let inner = apply(inner, field, context)?;
            object.set(key, inner, false, context)?;
        }
    }
    Ok(())
}

/// The `Proxy` handler of one record of a tool's result: its `get` reads what the object has,
/// what is declared, and what every object answers; anything else throws.
pub(super) fn handler(
    tool: &str,
    place: &str,
    fields: Vec<String>,
    choices: Vec<(String, Vec<String>)>,
    context: &mut Context,
) -> JsResult<JsObject> {
    let get = FunctionObjectBuilder::new(
        context.realm(),
        NativeFunction::from_copy_closure_with_captures(
            |_this, arguments, (tool, place, fields, choices): &Captured, context| {
                let (target, key) = get_trap(arguments, context)?;
                let name = match &key {
                    PropertyKey::Symbol(_) => return target.get(key, context),
                    PropertyKey::String(name) => name.to_std_string_escaped(),
                    PropertyKey::Index(index) => index.get().to_string(),
                };
                if let Some((_, values)) = choices.iter().find(|(field, _)| *field == name)
                    && let Some(message) = super::with_engine(|state| {
                        if !state
                            .comparisons
                            .iter()
                            .any(|compared| compared.field == name)
                        {
                            return None;
                        }
                        let given = declared_values(&state.tools, &name);
                        super::compared::never(
                            &state.comparisons,
                            tool,
                            place,
                            &name,
                            values,
                            &given,
                        )
                    })?
                {
                    return Err(JsNativeError::typ().with_message(message).into());
                }
                if target.has_property(key.clone(), context)?
                    || fields.contains(&name)
                    || ALWAYS_READABLE.contains(&name.as_str())
                {
                    return target.get(key, context);
                }
                let mut known: Vec<String> = fields.clone();
                for own in target.own_property_keys(context)? {
                    if let PropertyKey::String(own) = own {
                        let own = own.to_std_string_escaped();
                        if !known.contains(&own) {
                            known.push(own);
                        }
                    }
                }
                Err(JsNativeError::typ()
                    .with_message(missing_field(tool, place, &name, &known))
                    .into())
            },
            (tool.to_owned(), place.to_owned(), fields, choices),
        ),
    )
    .name(js_string!("get"))
    .length(3)
    .build();
    let handler = boa_engine::object::ObjectInitializer::new(context).build();
    handler.set(js_string!("get"), get, false, context)?;
    Ok(handler)
}

/// What a record's `get` trap holds: the tool, where in its result, the declared fields, and
/// the values of those declared as one of several (`Shape::Choice`).
type Captured = (String, String, Vec<String>, Vec<(String, Vec<String>)>);

/// Every value any tool's result declares for a field named `name`: a comparison with one of
/// them may be meant for that tool's result.
fn declared_values(tools: &[crate::protocol::ToolBinding], name: &str) -> Vec<String> {
    let mut values = Vec::new();
    for tool in tools {
        tool.result.choices_of(name, &mut values);
    }
    values
}

/// The target and the key a `Proxy`'s `get` trap is called with.
pub(super) fn get_trap(
    arguments: &[JsValue],
    context: &mut Context,
) -> JsResult<(JsObject, PropertyKey)> {
    let target = arguments
        .first()
        .and_then(JsValue::as_object)
        .ok_or_else(|| JsNativeError::typ().with_message("no proxy target"))?;
    let key = arguments
        .get(1)
        .cloned()
        .unwrap_or_default()
        .to_property_key(context)?;
    Ok((target, key))
}

/// `target` behind a `Proxy` with `handler` (the engine's own `Proxy`, whatever a script did
/// to the global one).
pub(super) fn proxied(
    target: JsValue,
    handler: JsObject,
    context: &mut Context,
) -> JsResult<JsValue> {
    let proxy = context.intrinsics().constructors().proxy().constructor();
    Ok(proxy
        .construct(&[target, handler.into()], None, context)?
        .into())
}

/// The error of reading `name` where it is not: the tool, where in its result, and the fields
/// that are there.
fn missing_field(tool: &str, place: &str, name: &str, known: &[String]) -> String {
    let at = if place.is_empty() {
        format!("the result of {tool}")
    } else {
        format!("`{place}` in the result of {tool}")
    };
    let more = known.len().saturating_sub(FIELDS_NAMED);
    let mut list = known
        .iter()
        .take(FIELDS_NAMED)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if more > 0 {
        list.push_str(&format!(" and {more} more"));
    }
    if known.is_empty() {
        format!("{at} has no field `{name}`: it has no fields")
    } else {
        format!("{at} has no field `{name}`; its fields are {list}")
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::run;
    use serde_json::{Value, json};

    fn listing() -> Value {
        json!({ "entries": [
            { "path": "a.txt", "kind": "file", "size": 3 },
            { "path": "b.txt", "kind": "file", "size": 5, "extra": true }
        ], "truncated": false })
    }

    #[test]
    fn comparing_a_declared_choice_with_a_value_it_never_has_throws_naming_the_values() {
        let listing = json!({ "entries": [
            { "path": "a", "kind": "dir", "size": 0 },
            { "path": "b.txt", "kind": "file", "size": 5 }
        ], "truncated": false });
        let outcome = run(
            "const entries = fs.list({ path: '.' }).entries;\nconst dirs = entries.filter(e => e.kind === 'directory');\ndone(`${dirs.length} folders`)",
            listing.clone(),
        );
        assert!(!outcome.done, "{outcome:?}");
        let error = outcome.result.unwrap_err();
        assert_eq!(
            error.message,
            "TypeError: `entries[i].kind` in the result of fs.list is \"file\" or \"dir\"; line 2 \
             compares it with \"directory\", a value it never has, so the comparison would come \
             out the same for every result"
        );
        assert_eq!(error.line, Some(2), "{error:?}");
        // A `case` of a `switch` on it, and `!==`, are comparisons too.
        for code in [
            "for (const e of fs.list({}).entries) { switch (e.kind) { case 'file': break; case 'folder': log(e.path) } }",
            "fs.list({}).entries.filter(e => 'directory' !== e.kind).length",
        ] {
            let error = run(code, listing.clone()).result.unwrap_err();
            assert!(
                error.message.contains("a value it never has"),
                "{code}: {error:?}"
            );
        }
        // Values it has, other fields, and data that is not a tool's result are left alone.
        for code in [
            "fs.list({}).entries.filter(e => e.kind === 'dir' || e.kind == \"file\").length",
            "fs.list({}).entries.filter(e => e.path !== 'directory').length",
            "const item = JSON.parse('{\"kind\": \"directory\"}');\nitem.kind === 'directory' && fs.list({}).entries.length",
        ] {
            let outcome = run(code, listing.clone());
            assert!(outcome.result.is_ok(), "{code}: {outcome:?}");
        }
    }

    #[test]
    fn reading_an_undeclared_field_throws_at_its_line_naming_the_fields() {
        let outcome = run(
            "const listing = fs.list({ path: '.' });\nconst names = listing.entries.map(e => e.name);\nnames.join(', ')",
            listing(),
        );
        let error = outcome.result.unwrap_err();
        assert_eq!(
            error.message,
            "TypeError: `entries[i]` in the result of fs.list has no field `name`; its fields are path, kind, size"
        );
        assert_eq!(error.line, Some(2), "{error:?}");
    }

    #[test]
    fn declared_present_and_built_in_reads_work_and_the_value_is_plain_data() {
        let outcome = run(
            "const listing = fs.list({ path: '.' });\n\
             const sizes = listing.entries.filter(e => e.kind === 'file').map(e => e.size);\n\
             const extra = listing.entries[1].extra;\n\
             const note = listing.note === undefined ? 'none' : listing.note;\n\
             const { truncated } = listing;\n\
             const text = `${listing.entries.length} ${String(listing.entries[0])} ${JSON.stringify(listing.entries[0])}`;\n\
             ({ sizes, extra, note, truncated, text, keys: Object.keys(listing.entries[0]), listing, has: 'name' in listing.entries[0] })",
            listing(),
        );
        let value = outcome.result.unwrap();
        assert_eq!(value["sizes"], json!([3, 5]));
        assert_eq!(value["extra"], true);
        assert_eq!(value["note"], "none");
        assert_eq!(value["truncated"], false);
        assert_eq!(
            value["text"],
            "2 [object Object] {\"path\":\"a.txt\",\"kind\":\"file\",\"size\":3}"
        );
        assert_eq!(value["keys"], json!(["path", "kind", "size"]));
        assert_eq!(value["listing"], listing());
        assert_eq!(value["has"], false);
    }

    #[test]
    fn awaiting_a_result_and_a_read_of_the_top_level_are_checked_too() {
        let outcome = run(
            "const listing = await fs.list({ path: '.' });\nreturn listing.files.length;",
            listing(),
        );
        let error = outcome.result.unwrap_err();
        assert_eq!(
            error.message,
            "TypeError: the result of fs.list has no field `files`; its fields are entries, truncated, note"
        );
        assert_eq!(error.line, Some(2), "{error:?}");
    }

    #[test]
    fn a_field_named_like_an_array_method_is_a_field() {
        // `todo.list`'s result has one list field (`todos`), so it can be used as that list;
        // `entries` is still read as a field, which it does not have.
        let error = run(
            "todo.list({}).entries.filter((e) => e)",
            json!({ "todos": [{ "title": "a" }] }),
        )
        .result
        .unwrap_err();
        assert!(
            error
                .message
                .starts_with("TypeError: the result of todo.list has no field `entries`"),
            "{error:?}"
        );
        let value = run(
            "todo.list({}).map((t) => t.title).concat([todo.list({}).length])",
            json!({ "todos": [{ "title": "a" }] }),
        )
        .result
        .unwrap();
        assert_eq!(value, json!(["a", 1]));
    }
}

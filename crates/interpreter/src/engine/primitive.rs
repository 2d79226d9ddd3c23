//! A field read on a string, a number or a boolean throws at its line: `contact.email`, where
//! `contact` is a character of a file's text that was never parsed, is `undefined` without a
//! word otherwise (see `silent.rs`, which installs it, for what it fixes and was measured to
//! do).

use boa_engine::object::FunctionObjectBuilder;
use boa_engine::property::PropertyKey;
use boa_engine::{Context, JsNativeError, JsObject, JsResult, JsValue, NativeFunction, js_string};

use super::quoted_start;
use super::silent::QUOTED_CHARS;

/// Puts a `Proxy` between `prototype` (of strings, numbers or booleans: `kind`) and
/// `Object.prototype` whose `get` throws for a name that no such value has.
pub(super) fn guard_fields(
    context: &mut Context,
    prototype: &JsObject,
    kind: &'static str,
) -> JsResult<()> {
    let get = FunctionObjectBuilder::new(
        context.realm(),
        NativeFunction::from_copy_closure(move |_this, arguments, context| {
            let (target, key) = super::typed::get_trap(arguments, context)?;
            let receiver = arguments.get(2).cloned().unwrap_or_default();
            let unknown = match &key {
                PropertyKey::String(name) => {
                    let name = name.to_std_string_escaped();
                    // `error` is how a program tells a failed call of `parallel()` ({error})
                    // from a result, which may be a string or a number.
                    let known = target.has_property(key.clone(), context)?
                        || super::typed::ALWAYS_READABLE.contains(&name.as_str())
                        || name == "error"
                        || name.parse::<f64>().is_ok();
                    (!known).then_some(name)
                }
                PropertyKey::Symbol(_) | PropertyKey::Index(_) => None,
            };
            let Some(name) = unknown else {
                // As `Reflect.get`: an accessor (`__proto__`) sees the value it was read of.
                let reflect = context.intrinsics().objects().reflect();
                let get = reflect.get(js_string!("get"), context)?;
                let key = arguments.get(1).cloned().unwrap_or_default();
                return match get.as_callable() {
                    Some(get) => {
                        get.call(&reflect.into(), &[target.into(), key, receiver], context)
                    }
                    None => target.get(key.to_property_key(context)?, context),
                };
            };
            Err(JsNativeError::typ()
                .with_message(primitive_field(kind, &name, &receiver, context))
                .into())
        }),
    )
    .name(js_string!("get"))
    .length(3)
    .build();
    let handler = boa_engine::object::ObjectInitializer::new(context).build();
    handler.set(js_string!("get"), get, false, context)?;
    let object_prototype = context.intrinsics().constructors().object().prototype();
    let guard = super::typed::proxied(object_prototype.into(), handler, context)?;
    prototype.set_prototype(guard.as_object());
    Ok(())
}

/// The error of reading `.name` of `value`, which is `kind` (a string, say).
fn primitive_field(kind: &str, name: &str, value: &JsValue, context: &mut Context) -> String {
    let shown = match value.as_string() {
        Some(text) => format!(
            "{kind} ({})",
            quoted_start(&text.to_std_string_escaped(), QUOTED_CHARS)
        ),
        None => value.to_string(context).map_or_else(
            |_| kind.to_owned(),
            |text| format!("{kind} ({})", text.to_std_string_escaped()),
        ),
    };
    let advice = if value.is_string() {
        ": text from a file or a tool is not data until it is parsed the way it is written \
         (JSON.parse for JSON; its lines, split, for the rest), and a loop over a string goes \
         through its characters"
    } else {
        ""
    };
    format!("`.{name}` was read of {shown}, which has no field `{name}`{advice}")
}

#[cfg(test)]
mod tests {
    use crate::testing::run;
    use serde_json::json;

    #[test]
    fn a_field_read_of_a_string_or_a_number_throws_at_its_line() {
        let code = "const text = '[{\"email\": \"a@b\"}]';\nconst emails = [];\nfor (const contact of text) {\n  if (contact.email) emails.push(contact.email);\n}\ndone(emails.join(', '))";
        let error = run(code, json!({})).result.unwrap_err();
        assert_eq!(error.line, Some(4), "{error:?}");
        assert!(
            error.message.starts_with(
                "TypeError: `.email` was read of a string (\"[\"), which has no field `email`: text from a file"
            ),
            "{error:?}"
        );
        let error = run("const total = 42;\ntotal.value", json!({}))
            .result
            .unwrap_err();
        assert_eq!(
            error.message,
            "TypeError: `.value` was read of a number (42), which has no field `value`"
        );
        // Methods, indexes, `length`, symbols and the names every value answers still read.
        let outcome = run(
            "const s = 'abc';\n\
             const parts = [s.length, s[1], s[7], s.toUpperCase(), [...s].length, (3.5).toFixed(1), true.toString(), s.__proto__ === String.prototype, s.then, s.constructor === String, `${s}`, JSON.stringify({ s }), Object.prototype.toString.call(s), s.hasOwnProperty('length')];\n\
             done(JSON.stringify(parts))",
            json!({}),
        );
        assert_eq!(
            outcome.complete,
            Some(
                json!({ "response": "[3,\"b\",null,\"ABC\",3,\"3.5\",\"true\",true,null,true,\"abc\",\"{\\\"s\\\":\\\"abc\\\"}\",\"[object String]\",true]" })
            ),
            "{outcome:?}"
        );
    }
}

//! **A number read from text that is not one**, traced to where it was read. `parseFloat`,
//! `parseInt` and `Number` give `NaN` for text that is not a number (a CSV's header line, an
//! empty last line, a unit), and JavaScript carries it on without a word: a sum over every
//! line of a file comes out `NaN`, and the answer or file built from it is refused
//! (`absent.rs`) at the line that *used* it, saying a value "has no value". A small model
//! reads that as a variable left uninitialised and starts the sum at 0 again.
//!
//! So the three conversions are watched (`parseFloat` and `parseInt` in their wrappers of
//! `silent.rs`, `Number` through a proxy): the first call of a run that gives `NaN` for an
//! argument that is not already `NaN` is noted, with what it was given and the line of the
//! model's code that called it. A refusal of text holding `NaN` then names that call
//! (`parseFloat("hours") at line 5 gave NaN`) instead of a missing value. Nothing else
//! changes: the conversions return what they always did, so `isNaN(parseFloat(x))` still
//! tests text, and a run that never builds an answer from `NaN` hears nothing of it.
//!
//! Fixes: a sum over a CSV's lines that meets the header (csv-sum: "hours" parsed as a
//! number, `NaN` refused; the model started the sum at 0 again until the turn ran out). Designed on the
//! tuning split; measured in round 28 (`docs/benchmarks.md`).

use boa_engine::object::builtins::JsProxyBuilder;
use boa_engine::property::Attribute;
use boa_engine::vm::SourcePath;
use boa_engine::{Context, JsNativeError, JsObject, JsResult, JsString, JsValue};

use super::with_engine;

/// The first conversion of a run that gave `NaN`.
#[derive(Debug, Clone)]
pub(super) struct NotANumber {
    /// `parseFloat`, `parseInt` or `Number`.
    function: &'static str,
    /// What it was given, as JavaScript writes it (`"hours"`, `undefined`).
    given: String,
    /// The line of the script that called it (before the wrapper's lines are taken off).
    line: Option<u32>,
}

/// How much of a given text is quoted back.
const GIVEN_CHARS: usize = 40;

/// Puts a proxy in front of the global `Number` of a fresh context. (`parseFloat` and
/// `parseInt` are wrapped in `silent.rs`, which calls [`note`].)
pub(super) fn install(context: &mut Context) -> JsResult<()> {
    let global = context.global_object();
    let Some(number) = global.get(JsString::from("Number"), context)?.as_callable() else {
        return Ok(());
    };
    // A proxy keeps `Number.isNaN`, `new Number(…)` and `.map(Number)` as they are; only a
    // call goes through `converted`.
    let proxy = JsProxyBuilder::new(number).apply(converted).build(context);
    global.delete_property_or_throw(JsString::from("Number"), context)?;
    context.register_global_property(
        JsString::from("Number"),
        JsObject::from(proxy),
        Attribute::WRITABLE | Attribute::CONFIGURABLE,
    )?;
    Ok(())
}

/// The `apply` trap of `Number`'s proxy: (target, this, arguments).
fn converted(_handler: &JsValue, trap: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let target = trap
        .first()
        .and_then(JsValue::as_callable)
        .ok_or_else(|| JsNativeError::typ().with_message("Number is not callable"))?;
    let this = trap.get(1).cloned().unwrap_or_default();
    let arguments = match trap.get(2).and_then(JsValue::as_object) {
        Some(list) => {
            let length = list
                .get(JsString::from("length"), context)?
                .to_length(context)?;
            (0..length)
                .map(|index| list.get(index, context))
                .collect::<JsResult<Vec<_>>>()?
        }
        None => Vec::new(),
    };
    let result = target.call(&this, &arguments, context)?;
    note("Number", &result, arguments.first(), context);
    Ok(result)
}

/// Notes `function(given)` when it gave `NaN` and is the first of the run to.
pub(super) fn note(
    function: &'static str,
    result: &JsValue,
    given: Option<&JsValue>,
    context: &Context,
) {
    if !result.as_number().is_some_and(f64::is_nan) {
        return;
    }
    // `Number(NaN)` passes a NaN on; it did not make one.
    if given.and_then(JsValue::as_number).is_some_and(f64::is_nan) {
        return;
    }
    let already = with_engine(|state| state.not_a_number.is_some()).unwrap_or(true);
    if already {
        return;
    }
    let given = match given {
        None => "nothing".to_owned(),
        Some(value) => shown(value),
    };
    let line = context.stack_trace().next().and_then(|frame| {
        let location = frame.position();
        let script =
            matches!(&location.path, SourcePath::Path(path) if path.as_os_str() == "script");
        script
            .then_some(location.position)
            .flatten()
            .map(|position| position.line_number())
    });
    let _ = with_engine(|state| {
        state.not_a_number = Some(NotANumber {
            function,
            given,
            line,
        });
    });
}

/// A value as the model would write it: text quoted (and cut), the rest by kind.
fn shown(value: &JsValue) -> String {
    if let Some(text) = value.as_string() {
        return super::quoted_start(&text.to_std_string_escaped(), GIVEN_CHARS);
    }
    if value.is_undefined() {
        return "undefined".to_owned();
    }
    if value.is_null() {
        return "null".to_owned();
    }
    if let Some(number) = value.as_number() {
        return number.to_string();
    }
    if value.is_boolean() {
        return value.to_boolean().to_string();
    }
    if value.as_object().is_some_and(|object| object.is_array()) {
        return "an array".to_owned();
    }
    "an object".to_owned()
}

/// What a refusal of text holding `NaN` says about where it came from, when a conversion of
/// this run made one: `parseFloat("hours") at line 5 (`…`) gave NaN, as that is not a number;
/// …`.
pub(super) fn origin() -> JsResult<Option<String>> {
    let Some((found, code, line_offset)) = with_engine(|state| {
        let found = state.not_a_number.clone()?;
        Some((found, state.code.clone(), state.line_offset))
    })?
    else {
        return Ok(None);
    };
    let NotANumber {
        function,
        given,
        line,
    } = found;
    let place = line
        .filter(|line| *line > line_offset)
        .map(|line| line - line_offset)
        .and_then(|line| {
            let text = code.lines().nth(line as usize - 1)?.trim();
            Some(format!(" at line {line} (`{text}`)"))
        })
        .unwrap_or_default();
    let what = match given.as_str() {
        "\"\"" => "an empty text is not a number (an empty line, an empty field)".to_owned(),
        "undefined" => {
            "there was no value to convert (a field the line or result does not have)".to_owned()
        }
        text if text.starts_with('"') => format!("{text} is not a number"),
        _ => "that is not a number".to_owned(),
    };
    Ok(Some(format!(
        "{function}({given}){place} gave NaN, as {what}; leave out or check what is not a \
         number before computing with it"
    )))
}

#[cfg(test)]
mod tests {
    use crate::testing::outcome;
    use serde_json::{Value, json};

    const TAIL: &str = "leave out or check what is not a number before computing with it";

    #[test]
    fn a_refused_nan_names_the_conversion_that_made_it() {
        let code = "const text = \"date,hours\\n2026-06-01,4\\n2026-06-02,3.5\";\n\
                    let total = 0;\n\
                    for (const line of text.split(\"\\n\")) {\n  \
                      total += parseFloat(line.split(\",\")[1]);\n\
                    }\n\
                    done(`Total: ${total}`);";
        assert_eq!(
            outcome(code).unwrap_err(),
            format!(
                "TypeError: the answer given to done() contains `NaN`, so nothing was shown to \
                 the user: parseFloat(\"hours\") at line 4 (`total += parseFloat(line.split(\",\")[1]);`) \
                 gave NaN, as \"hours\" is not a number; {TAIL}"
            )
        );
        // `.map(Number)`, in a program run inside the async wrapper (top-level `await`).
        let code = "await Promise.resolve();\n\
                    const sum = [\"4\", \"n/a\"].map(Number).reduce((a, b) => a + b, 0);\n\
                    output(`sum ${sum}`);";
        assert_eq!(
            outcome(code).unwrap_err(),
            format!(
                "TypeError: the text given to output() contains `NaN`, so it was not shown: \
                 Number(\"n/a\") at line 2 (`const sum = [\"4\", \"n/a\"].map(Number).reduce((a, b) => a + b, 0);`) \
                 gave NaN, as \"n/a\" is not a number; {TAIL}"
            )
        );
        // A field the line does not have.
        let code = "const [day, hours] = \"2026-06-01\".split(\",\");\n\
                    fs.list({ path: `${parseInt(hours) + 1}` });";
        assert_eq!(
            outcome(code).unwrap_err(),
            format!(
                "TypeError: fs.list was given `NaN` in `path`, so the call was not made: \
                 parseInt(undefined) at line 2 (`fs.list({{ path: `${{parseInt(hours) + 1}}` }});`) \
                 gave NaN, as there was no value to convert (a field the line or result does \
                 not have); {TAIL}"
            )
        );
    }

    #[test]
    fn conversions_answer_as_before() {
        // A NaN tested and left out is no mistake, and nothing is said of it.
        let code = "const values = [\"hours\", \"4\", \"\", \"3.5\"].map(parseFloat)\n\
                      .filter((value) => !isNaN(value));\n\
                    done(`${values.reduce((a, b) => a + b, 0)}`);";
        assert_eq!(outcome(code).unwrap(), Value::Null);
        let code = "[Number.isNaN(Number(\"x\")), Number.MAX_SAFE_INTEGER, new Number(5) + 1,\n\
                    Number.parseFloat === parseFloat, Number(\"12\"), parseInt(\"ff\", 16),\n\
                    typeof Number, 5 instanceof Number, Number.prototype.toFixed.call(1.5, 1)]";
        assert_eq!(
            outcome(code).unwrap(),
            json!([
                true,
                9_007_199_254_740_991.0_f64,
                6,
                true,
                12,
                255,
                "function",
                false,
                "1.5"
            ])
        );
        // A NaN no conversion made is a value gone missing, as before.
        let code = "let total;\noutput(`total ${total * 2}`);";
        assert!(
            outcome(code)
                .unwrap_err()
                .ends_with(super::super::absent::NO_VALUE)
        );
    }
}

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
//! **A number cut where text goes on**, thrown at its line (`parsed`): `parseFloat("48,250
//! EUR")` is 48, as both parsers stop at the first comma, so given text that starts with a
//! number grouped in thousands (`1,234`, `48,250.50`) they throw, saying what they would have
//! read (round 17: misplaced-report). And `parseInt("09:30")` is 9: given a time of day and
//! nothing else (`9:30`, `09:30:15`) they throw, saying to split it at the colon, as a sum of
//! meeting hours built on it drops every minute (meeting-hours, tuning, round 37).
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

/// How the run's conversions of text went: how many read a number, and how many gave `NaN`.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Conversions {
    read: u32,
    failed: u32,
}

/// Counts a conversion of `given` that read a number or not (`isNaN(text)` as well): only
/// text and nothing count, as a number given is no reading of data.
fn count(given: Option<&JsValue>, read: bool) {
    if !given.is_none_or(|given| given.is_string() || given.is_undefined()) {
        return;
    }
    let _ = with_engine(|state| {
        let counted = &mut state.conversions;
        if read {
            counted.read += 1;
        } else {
            counted.failed += 1;
        }
    });
}

/// Notes `function(given)`: counted, and kept when it gave `NaN` and is the first of the run
/// to.
pub(super) fn note(
    function: &'static str,
    result: &JsValue,
    given: Option<&JsValue>,
    context: &Context,
) {
    let Some(number) = result.as_number() else {
        return;
    };
    count(given, !number.is_nan());
    if !number.is_nan() {
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

/// Wraps the global `isNaN` so that a test of text counts as a conversion of it
/// ([`Conversions`]): `if (isNaN(parts[1])) continue` over every line of a CSV is a reading of
/// its numbers.
pub(super) fn watch_is_nan(context: &mut Context) -> JsResult<()> {
    let global = context.global_object();
    super::wrap_builtin(
        context,
        &global,
        "isNaN",
        |_, _, arguments, result, context| {
            // Counted as `Number(given)` would be (`note` counts it).
            let converted = if result.to_boolean() { f64::NAN } else { 0.0 };
            note(
                "Number",
                &JsValue::from(converted),
                arguments.first(),
                context,
            );
            Ok(result)
        },
    )?;
    Ok(())
}

/// Why `text` (an answer, `output()` text or a tool's input) is refused when every number in
/// it is 0 and no conversion of text in this run read a number, after at least one tried:
/// the 0 is where a sum or a count started, not what the data holds (a sum over a CSV's
/// lines that took the wrong column for the hours, skipped every line as "not a number" and
/// wrote "0.00"). `None` otherwise.
pub(super) fn unread(text: &str) -> JsResult<Option<String>> {
    if !only_zeros(text) {
        return Ok(None);
    }
    unread_reason()
}

/// What [`unread`] says, when no conversion of text in this run read a number after at least
/// one tried, whatever the text.
pub(super) fn unread_reason() -> JsResult<Option<String>> {
    let (counted, first) = with_engine(|state| (state.conversions, state.not_a_number.clone()))?;
    if counted.read > 0 || counted.failed == 0 {
        return Ok(None);
    }
    let tried = match (counted.failed, first) {
        (1, Some(first)) => format!(
            "the one conversion of text to a number in this run, {}({}), gave NaN",
            first.function, first.given
        ),
        (failed, Some(first)) => format!(
            "all {failed} conversions of text to a number in this run gave NaN (the first: \
             {}({}))",
            first.function, first.given
        ),
        (failed, None) => {
            format!("all {failed} conversions of text to a number in this run gave NaN")
        }
    };
    Ok(Some(format!(
        "no number was read from the data: {tried}, so the 0 in it is where the program \
         started, not a result. Check which part of each line or field holds the number (log \
         one line to see it)"
    )))
}

/// Whether `text` has a number standing on its own, and every such number is 0 (`0`, `0.00`,
/// `0,0`, `0h`). Digits after a letter (`file0.txt`, `v0`) are not a number.
fn only_zeros(text: &str) -> bool {
    let chars: Vec<char> = text.chars().collect();
    let mut found = false;
    let mut at = 0;
    while at < chars.len() {
        if !chars[at].is_ascii_digit() {
            at += 1;
            continue;
        }
        let start = at;
        while at < chars.len() && (chars[at].is_ascii_digit() || matches!(chars[at], '.' | ',')) {
            at += 1;
        }
        let mut end = at;
        while end > start && matches!(chars[end - 1], '.' | ',') {
            end -= 1;
        }
        let before = start.checked_sub(1).map(|index| chars[index]);
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        found = true;
        if chars[start..end].iter().any(|c| matches!(c, '1'..='9')) {
            return false;
        }
    }
    found
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

/// What `parseFloat` or `parseInt` (`name`) read, counted; a number grouped in thousands it
/// would cut at its first comma, or a time of day it would cut at its colon, throws instead.
pub(super) fn parsed(
    name: &'static str,
    _this: &JsValue,
    arguments: &[JsValue],
    result: JsValue,
    context: &mut Context,
) -> JsResult<JsValue> {
    note(name, &result, arguments.first(), context);
    let radix = arguments.get(1).filter(|radix| !radix.is_undefined());
    if radix.is_none()
        && let Some(text) = arguments.first().and_then(JsValue::as_string)
    {
        let text = text.to_std_string_escaped();
        if let Some(grouped) = grouped_number(&text) {
            let read = result.to_string(context)?.to_std_string_escaped();
            return Err(JsNativeError::typ()
                .with_message(format!(
                    "{name}({}) would read {read}: it stops at the comma that groups the \
                     thousands of {grouped}. Remove the commas first: \
                     {name}(text.replace(/,/g, \"\"))",
                    super::quoted_start(&text, super::silent::QUOTED_CHARS),
                ))
                .into());
        }
        if is_clock_time(&text) {
            let read = result.to_string(context)?.to_std_string_escaped();
            return Err(JsNativeError::typ()
                .with_message(format!(
                    "{name}({}) would read {read}: it stops at the \":\" of the time of day \
                     {}. Split it into hours and minutes first: \
                     const [h, m] = text.split(\":\").map(Number); then h + m / 60 is the hour \
                     as a number",
                    super::quoted_start(&text, super::silent::QUOTED_CHARS),
                    text.trim(),
                ))
                .into());
        }
    }
    Ok(result)
}

/// Whether `text` is a time of day and nothing else: `9:30`, `09:30` or `09:30:15`.
fn is_clock_time(text: &str) -> bool {
    let mut parts = text.trim().split(':');
    let hours = parts.next().unwrap_or_default();
    let rest: Vec<&str> = parts.collect();
    (1..=2).contains(&hours.len())
        && hours.bytes().all(|byte| byte.is_ascii_digit())
        && (1..=2).contains(&rest.len())
        && rest
            .iter()
            .all(|part| part.len() == 2 && part.bytes().all(|byte| byte.is_ascii_digit()))
}

/// The number grouped in thousands that `text` starts with (after blanks and a sign), such as
/// `48,250` or `1,234,567.89`.
fn grouped_number(text: &str) -> Option<&str> {
    let trimmed = text.trim_start();
    let digits_start = trimmed.strip_prefix(['-', '+']).map_or(0, |_| 1);
    let bytes = trimmed.as_bytes();
    let mut at = digits_start;
    let lead = bytes[at..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if lead == 0 || lead > 3 {
        return None;
    }
    at += lead;
    let mut groups = 0;
    while bytes.get(at) == Some(&b',')
        && bytes.len() >= at + 4
        && bytes[at + 1..at + 4].iter().all(u8::is_ascii_digit)
        && !bytes.get(at + 4).is_some_and(u8::is_ascii_digit)
    {
        at += 4;
        groups += 1;
    }
    if groups == 0 {
        return None;
    }
    if bytes.get(at) == Some(&b'.') {
        at += 1 + bytes[at + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
    }
    Some(&trimmed[..at])
}

#[cfg(test)]
mod tests {
    use super::{grouped_number, is_clock_time};
    use crate::testing::{outcome, run};
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
    fn zeros_where_no_conversion_read_a_number_are_refused() {
        // The hours are the third column; the program took the second, skipped every line as
        // "not a number", and the total stayed where it started.
        let code = "const text = \"date,project,hours\\n2026-06-01,support,4.75\\n2026-06-02,web,2.25\";\n\
                    let total = 0;\n\
                    for (const line of text.split(\"\\n\").slice(1)) {\n  \
                      const [, hours] = line.split(\",\");\n  \
                      if (isNaN(parseFloat(hours))) continue;\n  \
                      total += parseFloat(hours);\n\
                    }\n";
        let tail = "so the 0 in it is where the program started, not a result. Check which \
                    part of each line or field holds the number (log one line to see it)";
        let why = format!(
            "no number was read from the data: all 2 conversions of text to a number in this \
             run gave NaN (the first: parseFloat(\"support\")), {tail}"
        );
        assert_eq!(
            outcome(&format!(
                "{code}done(`Total: ${{total.toFixed(2)}} hours`);"
            ))
            .unwrap_err(),
            format!("TypeError: the answer given to done() was not shown to the user: {why}")
        );
        assert_eq!(
            outcome(&format!("{code}fs.list({{ path: `${{total}}` }});")).unwrap_err(),
            format!(
                "TypeError: fs.list was given only zeros where numbers of the data should be in \
                 `path`, so the call was not made: {why}"
            )
        );
        // `isNaN` of text is a conversion too.
        let code =
            "let n = 0;\nfor (const t of ['a', 'b']) { if (!isNaN(t)) n += 1 }\noutput(`${n}`)";
        assert!(outcome(code).unwrap_err().contains("all 2 conversions"));
        // One conversion is enough: the line a report's total is on, read whole.
        assert_eq!(
            outcome("const line = 'Net profit: 48250 EUR';\nconst profit = parseFloat(line);\ndone(`${isNaN(profit) ? 0 : profit} EUR`)")
                .unwrap_err(),
            format!(
                "TypeError: the answer given to done() was not shown to the user: no number was \
                 read from the data: the one conversion of text to a number in this run, \
                 parseFloat(\"Net profit: 48250 EUR\"), gave NaN, {tail}"
            )
        );
        // A number read, none tried, a number that is not 0, or a 0 in a word: as before.
        for code in [
            "const n = ['x', '3', 'y'].filter((t) => !isNaN(parseFloat(t))).length;\ndone(`${n - 1} found`)",
            "let total = 0;\nfor (const row of []) total += parseFloat(row);\ndone(`${total} euros`)",
            "const bad = ['x', 'y'].filter((t) => isNaN(t)).length;\ndone(`${bad} of 2 lines are no number`)",
            "['x', 'y'].map(Number);\ndone('see file0.txt and v0')",
        ] {
            assert!(outcome(code).is_ok(), "{code}: {:?}", outcome(code));
        }
        assert!(super::only_zeros("0.00, 0 and 0h"));
        assert!(!super::only_zeros("no numbers"));
        assert!(!super::only_zeros("0 of 12"));
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

    #[test]
    fn numbers_grouped_in_thousands_are_found_at_the_start_of_text() {
        assert_eq!(grouped_number("48,250 EUR"), Some("48,250"));
        assert_eq!(grouped_number(" -1,234,567.89"), Some("-1,234,567.89"));
        assert_eq!(grouped_number("1,000"), Some("1,000"));
        assert_eq!(grouped_number("48250"), None);
        assert_eq!(grouped_number("3,5"), None);
        assert_eq!(grouped_number("1234,567"), None);
        assert_eq!(grouped_number("1,2345"), None);
        assert_eq!(grouped_number("EUR 1,000"), None);
        assert_eq!(grouped_number(""), None);
        assert_eq!(grouped_number("-"), None);
    }

    #[test]
    fn parsing_a_grouped_number_throws_at_its_line() {
        let outcome = run(
            "const profit = 1;\nconst total = parseFloat('48,250 EUR');\ndone(`${total}`)",
            json!({}),
        );
        let error = outcome.result.unwrap_err();
        assert_eq!(error.line, Some(2), "{error:?}");
        assert!(
            error.message.starts_with(
                "TypeError: parseFloat(\"48,250 EUR\") would read 48: it stops at the comma"
            ),
            "{error:?}"
        );
        let error = run("Number.parseInt('1,000')", json!({}))
            .result
            .unwrap_err();
        assert!(
            error.message.contains("parseInt(\"1,000\") would read 1"),
            "{error:?}"
        );
        let error = run(
            "const [date, start] = '2026-12-09,09:30'.split(',');\nconst hours = parseInt(start);\ndone(`${hours}`)",
            json!({}),
        )
        .result
        .unwrap_err();
        assert_eq!(error.line, Some(2), "{error:?}");
        assert!(
            error.message.starts_with(
                "TypeError: parseInt(\"09:30\") would read 9: it stops at the \":\" of the time of day 09:30"
            ),
            "{error:?}"
        );
        assert!(is_clock_time("9:30") && is_clock_time(" 09:30:15 "));
        assert!(
            !is_clock_time("2026-12-09") && !is_clock_time("9:3") && !is_clock_time("12:30 pm")
        );
        // What they read right is left alone, and so is an explicit radix.
        let outcome = run(
            "done(`${parseFloat('48250.5') + parseInt('12 apples') + parseInt('1,000', 10)}`)",
            json!({}),
        );
        assert_eq!(
            outcome.complete,
            Some(json!({ "response": "48263.5" })),
            "{outcome:?}"
        );
    }
}

//! Text built from a value that is not there (`undefined`, `NaN`, `[object Object]`), or from
//! a number that is not finite (`Infinity`: mostly the start value of a search for the largest
//! that matched nothing), is refused where it would leave the program: an answer given to `done()` or `complete()`,
//! text given to `output()`, and a tool's input. The call throws at its line and nothing
//! reaches the user or the tool. `log()` is not checked: it is for the model to read.
//!
//! A word the program wrote itself (in its source) or received from a tool is data, not a
//! value gone missing, and is let through.

use boa_engine::{JsNativeError, JsResult};
use serde_json::Value;

use super::with_engine;

/// How every refusal's message ends; the host adds what the program's results had.
pub(crate) const NO_VALUE: &str = "a variable or field it was built from has no value; check where it comes from (the \
     declarations say what each result has)";

/// What a tool's input that `numbers::unread` refuses is said to hold.
const UNREAD: &str = "only zeros where numbers of the data should be";

/// Why an answer holding `Infinity` (or `-Infinity`) was refused.
pub(crate) const NOT_FINITE: &str = "a number it was built from is not finite. That is the start value \
     of a search for the largest or smallest (`-Infinity`, `Infinity`, or `Math.max()` of \
     nothing) when nothing it looked at matched, or a division by zero; check what the search \
     compares and that it matched something";

/// Notes the words the texts of a tool result hold (`super::received`), so text carrying
/// them on is not refused.
pub(super) fn received(state: &mut super::EngineState, texts: &[&str]) {
    for text in texts {
        for word in words_in(text) {
            if !state.received_words.contains(&word) {
                state.received_words.push(word);
            }
        }
    }
}

/// Every marker of a missing value in `text`.
fn words_in(text: &str) -> Vec<&'static str> {
    let mut found = Vec::new();
    if text.contains("[object Object]") {
        found.push("[object Object]");
    }
    for word in text.split(|c: char| !crate::names::is_identifier_char(c)) {
        let word = match word {
            "undefined" => "undefined",
            "NaN" => "NaN",
            "Infinity" => "Infinity",
            _ => continue,
        };
        if !found.contains(&word) {
            found.push(word);
        }
    }
    found
}

/// Whether `word` in text the program built is its own or a tool's, not a missing value.
fn explained(word: &str) -> JsResult<bool> {
    with_engine(|state| {
        state.received_words.contains(&word) || words_in(&state.literals).contains(&word)
    })
}

/// The first marker in `text` that neither the program nor a tool wrote.
fn unexplained(text: &str) -> JsResult<Option<&'static str>> {
    for word in words_in(text) {
        if !explained(word)? {
            return Ok(Some(word));
        }
    }
    Ok(None)
}

/// Why text holding `word` was refused: for `NaN` made by a conversion of this run, the call
/// that made it (`numbers.rs`); for `Infinity`, where it comes from; else [`NO_VALUE`].
fn why(word: &str) -> JsResult<String> {
    if word == "Infinity" {
        return Ok(NOT_FINITE.to_owned());
    }
    if word == "NaN"
        && let Some(origin) = super::numbers::origin()?
    {
        return Ok(origin);
    }
    Ok(NO_VALUE.to_owned())
}

/// Refuses an answer (`what` is `done()` or `complete()`) built from a missing value.
pub(super) fn check_answer(what: &str, text: &str) -> JsResult<()> {
    if let Some(why) = super::numbers::unread(text)? {
        return Err(JsNativeError::typ()
            .with_message(format!(
                "the answer given to {what} was not shown to the user: {why}"
            ))
            .into());
    }
    match unexplained(text)? {
        Some(word) => Err(JsNativeError::typ()
            .with_message(format!(
                "the answer given to {what} contains `{word}`, so nothing was shown to the \
                 user: {}",
                why(word)?
            ))
            .into()),
        None => Ok(()),
    }
}

/// Refuses `output()` text built from a missing value.
pub(super) fn check_output(text: &str) -> JsResult<()> {
    if let Some(why) = super::numbers::unread(text)? {
        return Err(JsNativeError::typ()
            .with_message(format!("the text given to output() was not shown: {why}"))
            .into());
    }
    match unexplained(text)? {
        Some(word) => Err(JsNativeError::typ()
            .with_message(format!(
                "the text given to output() contains `{word}`, so it was not shown: {}",
                why(word)?
            ))
            .into()),
        None => Ok(()),
    }
}

/// Refuses a tool call whose input holds a missing value, before the call is made.
pub(super) fn check_input(tool: &str, input: &Value) -> JsResult<()> {
    fn find(value: &Value, path: &str) -> JsResult<Option<(String, &'static str)>> {
        match value {
            // `emails.join("\n")` of emails that are all undefined.
            Value::String(text) if text.matches('\n').count() > 1 && text.trim().is_empty() => {
                Ok(Some((path.to_owned(), "only blank lines")))
            }
            Value::String(text) if super::numbers::unread(text)?.is_some() => {
                Ok(Some((path.to_owned(), UNREAD)))
            }
            Value::String(text) => Ok(unexplained(text)?.map(|word| (path.to_owned(), word))),
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    if let Some(found) = find(item, &format!("{path}[{index}]"))? {
                        return Ok(Some(found));
                    }
                }
                Ok(None)
            }
            Value::Object(fields) => {
                for (name, field) in fields {
                    let path = if path.is_empty() {
                        name.clone()
                    } else {
                        format!("{path}.{name}")
                    };
                    if let Some(found) = find(field, &path)? {
                        return Ok(Some(found));
                    }
                }
                Ok(None)
            }
            _ => Ok(None),
        }
    }
    let Some((field, word)) = find(input, "")? else {
        return Ok(());
    };
    let why = if word == UNREAD {
        super::numbers::unread_reason()?.unwrap_or_default()
    } else {
        why(word)?
    };
    let word = if word == "only blank lines" || word == UNREAD {
        word.to_owned()
    } else {
        format!("`{word}`")
    };
    let place = if field.is_empty() {
        "its input".to_owned()
    } else {
        format!("`{field}`")
    };
    Err(JsNativeError::typ()
        .with_message(format!(
            "{tool} was given {word} in {place}, so the call was not made: {why}"
        ))
        .into())
}

/// The text of the string and template literals in `code` (a template's `${…}` parts left
/// out), one literal per line: what the program wrote itself.
pub(super) fn literal_text(code: &str) -> String {
    let mut text = String::new();
    let mut chars = code.chars().peekable();
    // The quote of the literal we are in, and how deep in `${…}` of a template we are.
    let mut quote: Option<char> = None;
    let mut templates: Vec<usize> = Vec::new();
    let mut braces = 0usize;
    while let Some(c) = chars.next() {
        match quote {
            Some(open) => match c {
                '\\' => {
                    if let Some(escaped) = chars.next() {
                        text.push(escaped);
                    }
                }
                '$' if open == '`' && chars.peek() == Some(&'{') => {
                    chars.next();
                    templates.push(braces);
                    braces += 1;
                    quote = None;
                    text.push('\n');
                }
                c if c == open => {
                    quote = None;
                    text.push('\n');
                }
                c => text.push(c),
            },
            None => match c {
                '"' | '\'' | '`' => quote = Some(c),
                '{' => braces += 1,
                '}' => {
                    braces = braces.saturating_sub(1);
                    if templates.last() == Some(&braces) {
                        templates.pop();
                        quote = Some('`');
                    }
                }
                '/' if chars.peek() == Some(&'/') => {
                    for c in chars.by_ref() {
                        if c == '\n' {
                            break;
                        }
                    }
                }
                _ => {}
            },
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::run;
    use serde_json::json;

    fn error_of(code: &str) -> String {
        run(
            code,
            json!({ "entries": [{ "path": "a.txt", "kind": "file", "size": 3 }] }),
        )
        .result
        .unwrap_err()
        .message
    }

    #[test]
    fn an_answer_output_or_tool_input_built_from_a_missing_value_is_refused() {
        let tail = format!(": {NO_VALUE}");
        assert_eq!(
            error_of("const total = undefined;\ndone(`The total is ${total}`)"),
            format!(
                "TypeError: the answer given to done() contains `undefined`, so nothing was \
                 shown to the user{tail}"
            )
        );
        assert_eq!(
            error_of("let latest;\ndone(latest)"),
            format!(
                "TypeError: the answer given to done() is undefined, so nothing was shown to \
                 the user{tail}"
            )
        );
        assert_eq!(
            error_of("output('average ' + (1 / 0 * 0))"),
            format!(
                "TypeError: the text given to output() contains `NaN`, so it was not shown{tail}"
            )
        );
        assert_eq!(
            error_of("fs.list({ path: `${{ a: 1 }}` })"),
            format!(
                "TypeError: fs.list was given `[object Object]` in `path`, so the call was not \
                 made{tail}"
            )
        );
        assert_eq!(
            error_of("fs.list({ path: [undefined, undefined, undefined].join('\\n') })"),
            format!(
                "TypeError: fs.list was given only blank lines in `path`, so the call was not made{tail}"
            )
        );
        let outcome = run(
            "complete({ response: `${[1, 2].length} and ${NaN}` })",
            json!({}),
        );
        assert!(outcome.result.is_err(), "{outcome:?}");
        assert!(outcome.complete.is_none(), "{outcome:?}");
    }

    #[test]
    fn an_answer_built_from_a_start_value_that_was_never_replaced_is_refused() {
        let tail = format!(": {NOT_FINITE}");
        // The warmest day of a CSV whose rows the loop never matched.
        assert_eq!(
            error_of(
                "let max = -Infinity;\nlet day = '';\nfor (const row of []) { if (row.t > max) { max = row.t; day = row.d } }\ndone(`${day} was the warmest, at ${max}°C`)"
            ),
            format!(
                "TypeError: the answer given to done() contains `Infinity`, so nothing was \
                 shown to the user{tail}"
            )
        );
        let outcome = run("output(`largest: ${Math.max(...[])}`)", json!({}));
        assert!(outcome.result.is_err(), "{outcome:?}");
        // Written by the program, or given by a tool: data.
        for code in [
            "done('1 / 0 is Infinity in JavaScript')",
            "done(`${fs.list({}).note}`)",
        ] {
            let outcome = run(code, json!({ "entries": [], "note": "limit: Infinity" }));
            assert!(outcome.result.is_ok(), "{code}: {outcome:?}");
        }
    }

    #[test]
    fn words_the_program_or_a_tool_wrote_are_data() {
        let outcome = run(
            "const x = fs.list({ path: 'undefined' }).note;\n\
             output(`${x} is NaN`);\n\
             done('In JavaScript, a missing field reads as undefined.')",
            json!({ "entries": [], "note": "a NaN, literally" }),
        );
        assert!(outcome.result.is_ok(), "{outcome:?}");
        assert!(outcome.done, "{outcome:?}");
    }

    #[test]
    fn literals_are_what_the_program_wrote_between_quotes() {
        let code = "const a = x === undefined ? 'none' : `${y} is NaN ${z ? \"[object Object]\" : 1}`; // undefined";
        let text = literal_text(code);
        assert_eq!(words_in(&text), ["[object Object]", "NaN"]);
        assert!(!text.contains("undefined"), "{text}");
    }
}

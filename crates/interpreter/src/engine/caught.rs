//! A program's own mistake, caught, is no answer. A program that wraps `JSON.parse` of a TOML
//! file in `try`, and in its `catch` hands the error's message to `output()` or `done()`,
//! runs without failing and shows the user "SyntaxError: …" as if it had found something; the
//! candidate check, which looks for failures, lets it through. So every `catch (e)` notes the
//! error it caught, and text that leaves the program (an answer, `output()` text, a tool's
//! input) holding the message of a caught `TypeError`, `SyntaxError` or `RangeError` (what
//! the program did wrong, not what a tool met) is refused at that line, with the error it
//! caught. A tool's failure is a plain `Error` and may be reported:
//! "The write was refused." is an answer.
//!
//! A `ReferenceError` for a name that does not exist (`toml is not defined`, from
//! `toml.parse(text)` for `TOML.parse`) is not caught at all: the call at the start of the
//! block throws it again, so the program fails at once with the error and its explanation,
//! rather than log "toml is not defined" from a `catch` and pass its check as a program that
//! worked.
//!
//! The note is made by a call the engine writes at the start of each `catch` block whose
//! parameter is a name (`catch (e) {` becomes `catch (e) { <hook>(e, 4);`), on the same line,
//! so lines stay where they were. Strings, templates and comments are skipped; a program
//! whose noted form does not parse runs as written.

use boa_engine::{
    Context, JsError, JsNativeError, JsResult, JsString, JsValue, NativeFunction, js_string,
};

use super::with_engine;

/// The global the noted `catch` blocks call; no name a program would write, and left out of
/// the functions the grammar lets a program call (`super::global_functions`).
pub(crate) const HOOK: &str = "__agenticCaught";

/// The kinds of error that are the program's mistakes.
const MISTAKES: &[&str] = &["TypeError", "SyntaxError", "RangeError"];

/// Messages shorter than this are not looked for in text (`x is not defined` is longer).
const SHORTEST: usize = 12;

/// An error a `catch` block of the program caught: its kind, message and the catch's line.
#[derive(Debug, Clone)]
pub(super) struct Caught {
    kind: String,
    message: String,
    line: u32,
}

/// Installs [`HOOK`].
pub(super) fn install(context: &mut Context) -> JsResult<()> {
    context.register_global_builtin_callable(
        JsString::from(HOOK),
        2,
        NativeFunction::from_fn_ptr(note),
    )
}

/// `HOOK(error, line)`: notes a caught mistake.
fn note(_this: &JsValue, arguments: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let Some(error) = arguments.first().and_then(JsValue::as_object) else {
        return Ok(JsValue::undefined());
    };
    let text = |key, context: &mut Context| -> JsResult<String> {
        let value = error.get(key, context)?;
        Ok(value
            .as_string()
            .map(|text| text.to_std_string_escaped())
            .unwrap_or_default())
    };
    let kind = text(js_string!("name"), context)?;
    let message = text(js_string!("message"), context)?;
    // A name that does not exist is never what a catch is for: it goes on as if uncaught.
    // Other reference errors (the sandbox's `require` of a module it does not have) may be.
    if kind == "ReferenceError" && message.ends_with(" is not defined") {
        return Err(JsError::from_opaque(error.clone().into()));
    }
    if !MISTAKES.contains(&kind.as_str()) || message.chars().count() < SHORTEST {
        return Ok(JsValue::undefined());
    }
    let line = arguments
        .get(1)
        .and_then(JsValue::as_number)
        .map_or(0, |line| line as u32);
    with_engine(|state| {
        if state.caught.len() < 64 {
            state.caught.push(Caught {
                kind,
                message,
                line,
            });
        }
    })?;
    Ok(JsValue::undefined())
}

/// Refuses `text`, about to leave the program as `what` ("the answer given to done()"), when
/// it holds the message of a mistake the program caught.
pub(super) fn check(what: &str, text: &str) -> JsResult<()> {
    let found = with_engine(|state| {
        state
            .caught
            .iter()
            .find(|caught| text.contains(caught.message.as_str()))
            .cloned()
    })?;
    match found {
        Some(caught) => Err(JsNativeError::typ()
            .with_message(format!(
                "{what} holds the message of the {kind} caught at line {line}: that is a \
                 mistake of the program, not something to show the user. Fix what threw it \
                 instead of catching it. It was: {kind}: {message}",
                kind = caught.kind,
                line = caught.line,
                message = caught.message,
            ))
            .into()),
        None => Ok(()),
    }
}

/// Refuses a tool call whose input holds, in any of its texts, the message of a mistake the
/// program caught (a report written with the error in place of the data).
pub(super) fn check_input(tool: &str, input: &serde_json::Value) -> JsResult<()> {
    let what = format!("the input given to {tool}");
    super::texts_in(input)
        .into_iter()
        .try_for_each(|text| check(&what, text))
}

/// `code` with a call of [`HOOK`] at the start of every `catch (name) {` block, or `None` when
/// it has no such block.
pub(super) fn with_catches_noted(code: &str) -> Option<String> {
    let bytes = code.as_bytes();
    let mut noted = String::with_capacity(code.len() + 64);
    let mut copied = 0;
    let mut line = 1u32;
    let mut at = 0;
    let mut any = false;
    while at < bytes.len() {
        match bytes[at] {
            b'\n' => {
                line += 1;
                at += 1;
            }
            quote @ (b'"' | b'\'' | b'`') => {
                at += 1;
                while at < bytes.len() && bytes[at] != quote {
                    if bytes[at] == b'\\' {
                        at += 1;
                    }
                    if at < bytes.len() && bytes[at] == b'\n' {
                        line += 1;
                    }
                    at += 1;
                }
                at += 1;
            }
            b'/' if bytes.get(at + 1) == Some(&b'/') => {
                while at < bytes.len() && bytes[at] != b'\n' {
                    at += 1;
                }
            }
            b'/' if bytes.get(at + 1) == Some(&b'*') => {
                at += 2;
                while at < bytes.len() && !(bytes[at] == b'*' && bytes.get(at + 1) == Some(&b'/')) {
                    if bytes[at] == b'\n' {
                        line += 1;
                    }
                    at += 1;
                }
                at += 2;
            }
            _ if bytes[at..].starts_with(b"catch")
                && (at == 0 || !is_name_byte(bytes[at - 1]) && bytes[at - 1] != b'.') =>
            {
                match catch_block(&code[at..]) {
                    Some((name, open)) => {
                        let end = at + open + 1;
                        noted.push_str(&code[copied..end]);
                        noted.push_str(&format!(" {HOOK}({name}, {line});"));
                        copied = end;
                        at = end;
                        any = true;
                    }
                    None => at += "catch".len(),
                }
            }
            _ => at += 1,
        }
    }
    if !any {
        return None;
    }
    noted.push_str(&code[copied.min(code.len())..]);
    Some(noted)
}

/// For text starting `catch (name) {`: the name and the offset of the `{`. Line breaks inside
/// are not taken, so the hook lands on the catch's own line.
fn catch_block(text: &str) -> Option<(&str, usize)> {
    let rest = &text["catch".len()..];
    let skip = |text: &str, from: usize| {
        from + text[from..]
            .find(|c: char| c != ' ' && c != '\t')
            .unwrap_or(text.len() - from)
    };
    let open_paren = skip(rest, 0);
    if !rest[open_paren..].starts_with('(') {
        return None;
    }
    let name_start = skip(rest, open_paren + 1);
    let name_end = name_start
        + rest[name_start..]
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
            .unwrap_or(rest.len() - name_start);
    let name = &rest[name_start..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let close = skip(rest, name_end);
    if !rest[close..].starts_with(')') {
        return None;
    }
    let brace = skip(rest, close + 1);
    if !rest[brace..].starts_with('{') {
        return None;
    }
    Some((name, "catch".len() + brace))
}

fn is_name_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'$'
}

#[cfg(test)]
mod tests {
    use super::{HOOK, with_catches_noted};
    use crate::testing::outcome;

    #[test]
    fn a_caught_mistake_shown_answered_or_written_is_refused_at_that_line() {
        for code in [
            "try {\n  JSON.parse('[db]\\nport = 5433');\n} catch (e) {\n  output(e.message);\n}",
            "try { JSON.parse('port = 5433') } catch (e) { done('Could not read it: ' + e) }",
            "try { JSON.parse('port = 5433') } catch (e) { fs.list({ path: `${e.message}` }) }",
            "try { [].reduce((a, b) => a) } catch (e) { complete({ response: String(e) }) }",
        ] {
            let error = outcome(code).expect_err(code);
            assert!(error.contains("caught at line "), "{code}: {error}");
            assert!(error.contains("mistake of the program"), "{code}: {error}");
        }
        let error = outcome(
            "try {\n  JSON.parse('a = 1 and more');\n} catch (e) {\n  output(e.message);\n}",
        )
        .unwrap_err();
        assert!(
            error.starts_with(
                "TypeError: the text given to output() holds the message of the \
                 SyntaxError caught at line 3"
            ),
            "{error}"
        );
    }

    #[test]
    fn a_name_that_does_not_exist_is_not_caught() {
        let code = "try {\n  done(toml.parse('a = 1').a)\n} catch (e) {\n  log(e.message)\n}";
        let error = crate::testing::run(code, serde_json::json!({}))
            .result
            .unwrap_err();
        assert_eq!(error.message, "ReferenceError: toml is not defined");
        // The sandbox has the name in another case: the error says so.
        assert_eq!(
            error.hint.as_deref(),
            Some("Names are case-sensitive: the sandbox has `TOML`, not `toml`.")
        );
        // Caught further out, it is still thrown from each catch it meets.
        let code = "try { try { missing } catch (e) { log(1) } } catch (e) { log(2) }";
        assert!(outcome(code).is_err());
    }

    #[test]
    fn a_tools_failure_or_a_logged_mistake_is_let_through() {
        // A tool's failure is a plain Error: reporting it is an answer.
        let code = "try { throw new Error('the user refused the write') } \
                    catch (e) { done('Not written: ' + e.message) }";
        assert!(outcome(code).is_ok(), "{:?}", outcome(code));
        // A mistake logged for the model, with an answer of its own.
        let code = "try { JSON.parse('port = 5433') } catch (e) { log(e.message); done('5433') }";
        assert!(outcome(code).is_ok(), "{:?}", outcome(code));
    }

    #[test]
    fn each_catch_block_with_a_name_notes_its_error_on_its_own_line() {
        let code = "try {\n  JSON.parse(text);\n} catch (e) {\n  output(e.message);\n}\n\
                    try { x() } catch(err){ log(err) }";
        let noted = with_catches_noted(code).expect("noted");
        assert_eq!(
            noted,
            format!(
                "try {{\n  JSON.parse(text);\n}} catch (e) {{ {HOOK}(e, 3);\n  output(e.message);\n}}\n\
                 try {{ x() }} catch(err){{ {HOOK}(err, 6); log(err) }}"
            )
        );
        assert_eq!(noted.lines().count(), code.lines().count());
    }

    #[test]
    fn strings_comments_methods_and_bare_catches_are_left_alone() {
        for code in [
            "const s = \"catch (e) {\";",
            "const s = `a\n catch (e) { b`;",
            "// catch (e) {\nlet a = 1;",
            "/* catch (e) { */ let a = 1;",
            "promise.catch(e => log(e));",
            "try { a() } catch { log('no') }",
            "try { a() } catch ({ message }) { log(message) }",
            "const mycatch = 1;",
        ] {
            assert_eq!(with_catches_noted(code), None, "{code}");
        }
    }
}

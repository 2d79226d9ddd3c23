//! A Boa error as the model reads it: message, line and column in the model's own code.

use boa_engine::{Context, JsError};
use serde_json::Value;

use crate::protocol::{ScriptError, ScriptErrorKind};

use super::*;

/// A Boa error as the model should read it, with line and column in the model's own code.
/// `parsing`: the error is the parser's, whose message ends in the position; otherwise only
/// the backtrace says where, as a message's `line 6` may be a position in data (`JSON.parse`).
pub(super) fn runtime_error(
    error: &JsError,
    context: &mut Context,
    code: &str,
    line_offset: u32,
    parsing: bool,
) -> ScriptError {
    let rendered = error.to_string();
    let message = match error.try_native(context) {
        Ok(native) => {
            let kind = native.kind.to_string();
            let message = native.message();
            if message.is_empty() {
                kind
            } else {
                format!("{kind}: {message}")
            }
        }
        Err(_) => {
            let value = error.to_opaque(context);
            match to_json(&value, context) {
                Ok(Value::String(text)) => format!("Uncaught {text}"),
                Ok(other) => format!("Uncaught {other}"),
                Err(_) => rendered.lines().next().unwrap_or_default().to_owned(),
            }
        }
    };
    let position = find_position(&rendered, parsing);
    // A wrapper puts `line_offset` lines before the model's code.
    let (mut line, mut column) = match position {
        Some((line, column)) if line > line_offset => (Some(line - line_offset), Some(column)),
        _ => (None, None),
    };
    // A SyntaxError while running comes from parsing data (`JSON.parse`), not from the
    // program: say so, or the model rewrites a line of its code that is fine. Boa's backtrace
    // can name the next call in a loop instead, so the one line that parses JSON is the place.
    let mut hint = None;
    if !parsing && message.starts_with("SyntaxError") && code.contains("JSON.parse") {
        let named = line
            .and_then(|line| code.lines().nth(line as usize - 1))
            .is_some_and(|text| text.contains("JSON.parse"));
        let parses: Vec<(usize, usize)> = code
            .lines()
            .enumerate()
            .filter_map(|(index, text)| text.find("JSON.parse").map(|at| (index, at)))
            .collect();
        if let [(index, at)] = parses.as_slice()
            && !named
        {
            line = Some(*index as u32 + 1);
            column = Some(*at as u32 + 1);
        }
        if named || parses.len() == 1 || line.is_none() {
            hint = Some(
                "JSON.parse was given something that is not JSON text (the error says what). \
                 Parse text the way it is written; if it reports a failure, deal with that \
                 first."
                    .to_owned(),
            );
        }
    }
    // `ReferenceError: lines is not defined`: Boa's backtrace can name an earlier line of a
    // loop's head. The name is known, so a line that does not use it is not the place; the
    // first line that does is.
    if !parsing
        && let Some(name) = message
            .strip_prefix("ReferenceError: ")
            .and_then(|rest| rest.strip_suffix(" is not defined"))
    {
        // Only a named line is corrected: with none, the message stands as Boa gave it.
        let named = line.and_then(|line| code.lines().nth(line as usize - 1));
        if named.is_some_and(|text| word_column(text, name).is_none())
            && let Some((index, at)) = code
                .lines()
                .enumerate()
                .find_map(|(index, text)| Some((index, word_column(text, name)?)))
        {
            line = Some(index as u32 + 1);
            column = Some(at);
        }
    }
    // A field a typed result does not have, read in an async program: the rejection that
    // carries the error has no backtrace, but the field's name places the read.
    if !parsing
        && line.is_none()
        && let Some(field) = message
            .split_once(" has no field `")
            .and_then(|(_, rest)| rest.split_once('`'))
            .map(|(field, _)| field)
        && let Some((index, at)) = code.lines().enumerate().find_map(|(index, text)| {
            let at = text
                .match_indices(&format!(".{field}"))
                .map(|(at, _)| at)
                .find(|at| {
                    !text[at + 1 + field.len()..]
                        .chars()
                        .next()
                        .is_some_and(crate::names::is_identifier_char)
                })?;
            Some((index, at))
        })
    {
        line = Some(index as u32 + 1);
        column = Some(text_column(code, index, at));
    }
    let source_line = line.and_then(|line| code.lines().nth(line as usize - 1).map(str::to_owned));
    let mut message = message.lines().next().unwrap_or_default().to_owned();
    // Parse errors end in Boa's own ` at line L, col C`; the position is reported separately.
    // Other messages keep theirs (a host error can quote serde's `at line 1 column 1`).
    if let Some(index) = message.rfind(" at line ")
        && is_boa_position(&message[index + " at line ".len()..])
    {
        message.truncate(index);
    }
    ScriptError {
        kind: ScriptErrorKind::Runtime,
        message,
        line,
        column,
        source_line,
        hint,
    }
}

/// `L, col C` and nothing after it.
pub(super) fn is_boa_position(rest: &str) -> bool {
    rest.split_once(", col ").is_some_and(|(line, column)| {
        !line.is_empty()
            && !column.is_empty()
            && line.bytes().all(|byte| byte.is_ascii_digit())
            && column.bytes().all(|byte| byte.is_ascii_digit())
    })
}

/// The first `line:column` Boa reports, from `script:L:C` in a backtrace or, when `parsing`,
/// `line L, col C` in a parse error.
pub(super) fn find_position(rendered: &str, parsing: bool) -> Option<(u32, u32)> {
    if let Some(index) = rendered.find("script:") {
        let rest = &rendered[index + "script:".len()..];
        let mut numbers = rest
            .split(|c: char| !c.is_ascii_digit())
            .filter(|part| !part.is_empty())
            .take(2)
            .map(str::parse::<u32>);
        if let (Some(Ok(line)), Some(Ok(column))) = (numbers.next(), numbers.next()) {
            return Some((line, column));
        }
    }
    if !parsing {
        return None;
    }
    let index = rendered.find("line ")?;
    let mut numbers = rendered[index..]
        .split(|c: char| !c.is_ascii_digit())
        .filter(|part| !part.is_empty())
        .take(2)
        .map(str::parse::<u32>);
    match (numbers.next(), numbers.next()) {
        (Some(Ok(line)), Some(Ok(column))) => Some((line, column)),
        _ => None,
    }
}

/// The 1-based character column of byte `at` in line `index` of `code`.
fn text_column(code: &str, index: usize, at: usize) -> u32 {
    code.lines()
        .nth(index)
        .map_or(1, |text| text[..at].chars().count() as u32 + 2)
}

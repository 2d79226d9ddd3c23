//! **A count of a text's pieces that counts the empty ones at its ends**, made loud.
//! `text.split(/\s+/)` of a file that ends with a line break (as nearly every file does) has
//! an empty string as its last piece, and `text.split("\n")` the same: the number of words
//! or lines given as the answer is one too many, without a word from JavaScript.
//!
//! `split` notes each text a tool returned (a file's content, a command's output) that it
//! cut at blanks or line breaks (a separator of white space, or any regular expression) into
//! three pieces or more, the first or last of them empty: the blank text split off its
//! start (for separators that are not line breaks, as an empty first line is a line) or its
//! end. An answer given to `done()` or `complete()` that says that number of pieces, and not
//! the number without the empty ones, is refused at its line, saying why and how to count; a
//! `log()` line that says it gets the same words as a note (the model may answer in words from
//! its logs).
//! Only texts as a tool returned them are noted, so a count over pieces of the program's own
//! making (the fields of each line) is left alone.
//!
//! Fixes: word and line counts one too many (word-count: 44 words for 43). Designed on the
//! tuning split; measured in round 21 (`docs/benchmarks.md`).

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use boa_engine::{Context, JsNativeError, JsObject, JsResult, JsString, JsValue};
use serde_json::Value;

use super::{quoted_end, quoted_start, with_engine};

/// The texts tools returned, and the splits of them noted, in one run.
#[derive(Debug, Default)]
pub(super) struct Pieces {
    /// Hashes of the strings tool results held (at least [`MIN_TEXT`] characters).
    received: HashSet<u64>,
    splits: Vec<Split>,
}

/// A string shorter than this is a value, not a text whose pieces are counted.
const MIN_TEXT: usize = 8;
/// How many received texts and splits one run keeps at most.
const MAX_NOTED: usize = 4096;

/// One split of a received text with empty pieces at its ends.
#[derive(Debug, Clone)]
struct Split {
    pieces: usize,
    empty: usize,
    separator: String,
    /// Whether the first piece is empty (and counted as such).
    first: bool,
    /// Whether the last piece is empty.
    last: bool,
    /// The text's end the empty piece came from, quoted.
    quoted: String,
}

fn hash(text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

/// Notes the texts of a tool result (`super::received`).
pub(super) fn received(state: &mut super::EngineState, texts: &[&str]) {
    for text in texts.iter().filter(|text| text.len() >= MIN_TEXT) {
        if state.pieces.received.len() >= MAX_NOTED {
            break;
        }
        state.pieces.received.insert(hash(text));
    }
}

/// Wraps `String.prototype.split` of a fresh context.
pub(super) fn install(context: &mut Context) -> JsResult<()> {
    let prototype = context.intrinsics().constructors().string().prototype();
    super::wrap_builtin(
        context,
        &prototype,
        "split",
        |_, this, arguments, result, context| {
            if let (Some(text), Some(pieces)) = (this.as_string(), result.as_object()) {
                note(&text, arguments.first(), &pieces, context)?;
            }
            Ok(result)
        },
    )?;
    Ok(())
}

/// How a separator splits: `None` when not at blanks (`","` splits fields, whose empty ones
/// are data); else how it reads and whether it splits lines.
fn separator(value: &JsValue, context: &mut Context) -> JsResult<Option<(String, bool)>> {
    if let Some(text) = value.as_string() {
        let text = text.to_std_string_escaped();
        if text.is_empty() || !text.chars().all(char::is_whitespace) {
            return Ok(None);
        }
        let shown = Value::String(text.clone()).to_string();
        return Ok(Some((shown, text.contains('\n'))));
    }
    let Some(object) = value.as_object() else {
        return Ok(None);
    };
    if boa_engine::object::builtins::JsRegExp::from_object(object.clone()).is_err() {
        return Ok(None);
    }
    let source = object
        .get(JsString::from("source"), context)?
        .to_string(context)?
        .to_std_string_escaped();
    let lines = source.contains("\\n") || source.contains("\\r");
    Ok(Some((format!("/{source}/"), lines)))
}

fn note(
    text: &JsString,
    separator_value: Option<&JsValue>,
    pieces: &JsObject,
    context: &mut Context,
) -> JsResult<()> {
    let Some(separator_value) = separator_value else {
        return Ok(());
    };
    let count = pieces
        .get(JsString::from("length"), context)?
        .as_number()
        .unwrap_or(0.0) as usize;
    if count < 3 {
        return Ok(());
    }
    let empty_at = |index: usize, context: &mut Context| -> JsResult<bool> {
        Ok(pieces
            .get(index, context)?
            .as_string()
            .is_some_and(|piece| piece.is_empty()))
    };
    let last = empty_at(count - 1, context)?;
    let first = empty_at(0, context)?;
    if !last && !first {
        return Ok(());
    }
    let Some((shown, lines)) = separator(separator_value, context)? else {
        return Ok(());
    };
    // An empty first line is a line.
    let first = first && !lines;
    if !last && !first {
        return Ok(());
    }
    let text = text.to_std_string_escaped();
    let noted = with_engine(|state| state.pieces.received.contains(&hash(&text)))?;
    if !noted {
        return Ok(());
    }
    let quoted = match (first, last) {
        (true, true) => format!("{} … {}", quoted_start(&text, 16), quoted_end(&text, 24)),
        (true, false) => quoted_start(&text, 24),
        _ => quoted_end(&text, 24),
    };
    let split = Split {
        pieces: count,
        empty: usize::from(first) + usize::from(last),
        separator: shown,
        first,
        last,
        quoted,
    };
    with_engine(|state| {
        if state.pieces.splits.len() < MAX_NOTED {
            state.pieces.splits.push(split);
        }
    })
}

/// The whole numbers an answer says (`1,234` read as 1234).
fn numbers_in(text: &str) -> Vec<usize> {
    let mut numbers = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut at = 0;
    while at < chars.len() {
        if !chars[at].is_ascii_digit() || (at > 0 && (chars[at - 1] == '.')) {
            at += 1;
            continue;
        }
        let mut digits = String::new();
        while at < chars.len()
            && (chars[at].is_ascii_digit()
                || (chars[at] == ','
                    && chars.get(at + 1).is_some_and(char::is_ascii_digit)
                    && !digits.is_empty()))
        {
            if chars[at] != ',' {
                digits.push(chars[at]);
            }
            at += 1;
        }
        // A decimal is not a count.
        let decimal =
            chars.get(at) == Some(&'.') && chars.get(at + 1).is_some_and(char::is_ascii_digit);
        if !decimal && let Ok(number) = digits.parse() {
            numbers.push(number);
        }
        at += 1;
    }
    numbers
}

/// The split noted above whose number of pieces `text` says, without also saying the number
/// without its empty ones.
fn miscounted(text: &str) -> JsResult<Option<Split>> {
    // Every `log()` line comes here: most runs split nothing, and then there is nothing to
    // read the numbers of.
    if with_engine(|state| state.pieces.splits.is_empty())? {
        return Ok(None);
    }
    let numbers = numbers_in(text);
    if numbers.is_empty() {
        return Ok(None);
    }
    with_engine(|state| {
        state
            .pieces
            .splits
            .iter()
            .find(|split| {
                numbers.contains(&split.pieces) && !numbers.contains(&(split.pieces - split.empty))
            })
            .cloned()
    })
}

/// What is wrong with `split`'s count, and how to count.
fn why(split: &Split) -> String {
    let (ends, piece, side) = match (split.first, split.last) {
        (true, true) => (
            "first and last",
            "pieces are empty strings",
            "begins and ends",
        ),
        (true, false) => ("first", "piece is an empty string", "begins"),
        _ => ("last", "piece is an empty string", "ends"),
    };
    format!(
        "{}, the number of pieces of a text split at {}, and the {} {piece} (the text {side} \
         with the separator: {}), so it counts {} too many: {} without {}. Count only the \
         pieces that are not empty (`.filter(Boolean)`), or split the trimmed text \
         (`text.trim().split(…)`)",
        split.pieces,
        split.separator,
        ends,
        split.quoted,
        split.empty,
        split.pieces - split.empty,
        if split.empty == 1 { "it" } else { "them" },
    )
}

/// Refuses an answer (`what` is `done()` or `complete()`) that says the number of pieces of
/// a split noted above and not the number without its empty ones.
pub(super) fn check_answer(what: &str, answer: &str) -> JsResult<()> {
    match miscounted(answer)? {
        Some(split) => Err(JsNativeError::typ()
            .with_message(format!(
                "the answer given to {what} was not shown: it says {}",
                why(&split)
            ))
            .into()),
        None => Ok(()),
    }
}

/// A `log()` line that says such a number, with a note saying what it counts: the line is
/// for the model, which may answer from it in words (a program that logs the count and then
/// a reply "44 words" would get past the refusal above).
pub(super) fn annotate_log(text: String) -> JsResult<String> {
    Ok(match miscounted(&text)? {
        Some(split) => format!("{text} (note from the sandbox: {})", why(&split)),
        None => text,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::numbers_in;
    use crate::testing::run;

    const ESSAY: &str = "Cities grow in layers.\nThe oldest streets follow paths.\n";

    fn answer_of(code: &str) -> Result<String, String> {
        answer_with(code, ESSAY)
    }

    /// The answer of `code`, whose every `fs.list` call returns `note` in its `note` field.
    fn answer_with(code: &str, note: &str) -> Result<String, String> {
        let outcome = run(code, json!({ "entries": [], "note": note }));
        match outcome.result {
            Err(error) => Err(error.message),
            Ok(_) => Ok(outcome
                .complete
                .and_then(|complete| complete["response"].as_str().map(str::to_owned))
                .unwrap_or_default()),
        }
    }

    #[test]
    fn a_count_with_the_empty_piece_of_a_tool_text_is_refused() {
        let error = answer_of(
            "const text = fs.list({}).note;\n\
             const words = text.split(/\\s+/);\n\
             done(`${words.length} words`);",
        )
        .unwrap_err();
        assert!(
            error.starts_with(
                "TypeError: the answer given to done() was not shown: it says 10, the number of \
                 pieces of a text split at /\\s+/, and the last piece is an empty string (the \
                 text ends with the separator: \"…"
            ),
            "{error}"
        );
        assert!(
            error.contains("so it counts 1 too many: 9 without it."),
            "{error}"
        );
        let error = answer_of("done(fs.list({}).note.split('\\n').length)").unwrap_err();
        assert!(error.contains("it says 3, "), "{error}");
    }

    #[test]
    fn counts_without_the_empty_pieces_and_other_splits_pass() {
        for code in [
            // Counted right, in the ways models write it.
            "done(`${fs.list({}).note.split(/\\s+/).filter(Boolean).length} words`)",
            "done(`${fs.list({}).note.trim().split(/\\s+/).length} words`)",
            // Both numbers said: the answer explains itself.
            "const n = fs.list({}).note.split('\\n').length; done(`${n - 1} lines (${n} pieces)`)",
            // A text the program made, not one a tool returned.
            "done(`${'a b c '.split(' ').length} pieces`)",
        ] {
            assert!(answer_of(code).is_ok(), "{code}: {:?}", answer_of(code));
        }
        // Fields: an empty one is data.
        let fields = "done(`${fs.list({}).note.split(',').length} fields`)";
        assert_eq!(answer_with(fields, "a,b,c,").as_deref(), Ok("4 fields"));
        // An empty first line is a line; the last one is not.
        let lines = "done(`${fs.list({}).note.split('\\n').length} lines`)";
        assert_eq!(
            answer_with(lines, "\nfirst\nsecond").as_deref(),
            Ok("3 lines")
        );
    }

    #[test]
    fn an_answer_says_whole_numbers_only() {
        assert_eq!(numbers_in("44 words"), [44]);
        assert_eq!(numbers_in("1,234 lines, 2.5 per page, v3"), [1234, 3]);
        assert_eq!(numbers_in("no number"), Vec::<usize>::new());
    }
}

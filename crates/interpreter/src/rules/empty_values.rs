//! **Values that are not there, logged.** Fixes: a program logs or returns `undefined`,
//! `NaN` or `[object Object]` for the model to read; the result gets a note of what the
//! program's tool results do have (`got.rs`), beside what it read. (In an answer, `output()`
//! text or a tool input such values are refused by the sandbox itself: `engine/absent.rs`.)
//!
//! Measured: the logged-`undefined` note (3a19540) came after round 10 and was not measured
//! alone; the refusals (44b0629) in round 12 build B: 12/17 and 2/9 in a package, and side by
//! side on c78cc92 they moved no held-out task.

/// What in an answer from `done()` shows that the program built it from a value that is not
/// there: `undefined`, `NaN` or `[object Object]` as a word of its own.
pub(crate) fn broken_answer(answer: &str) -> Option<&'static str> {
    if answer.contains("[object Object]") {
        return Some("[object Object]");
    }
    if answer.trim() == "null" {
        return Some("null");
    }
    answer
        .split(|c: char| !crate::names::is_identifier_char(c))
        .find_map(|word| match word {
            "undefined" => Some("undefined"),
            "NaN" => Some("NaN"),
            _ => None,
        })
}

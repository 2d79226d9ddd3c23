//! **Data in view before the answer stands.** Fixes: a small model writes its whole program
//! before it has seen the data, and one that computes an answer from it (a filter, a sum, a
//! count) guesses how the data is written: a field name, a value's case, a date or a time
//! format, a header line. Such a program runs without an error and answers wrong. The
//! system prompt asks it to look first (`prompt.rs`); it seldom does. So the runtime looks
//! for it: a program that passes its check and would end the turn with an answer it
//! computed from reads is written again, by a request that shows what those reads give
//! (`mode/review.rs`).
//!
//! Measured: round 38, `docs/benchmarks.md`.

use serde_json::Value;

/// Characters kept of each result shown.
const RESULT_CHARS: usize = 1_500;

/// The user message that asks for the program again: what its reads give, and the request
/// to write it with that data in view. `data` holds the reads that gave data (tool, input, result).
pub(crate) fn request(data: &[(String, Value, Value)]) -> String {
    let lines: Vec<String> = data
        .iter()
        .map(|(tool, input, output)| {
            crate::prompt::returned_line(tool, input, output, RESULT_CHARS)
        })
        .collect();
    format!(
        "Before you write the program, here is what the reads it needs return (the start of \
         each result):\n{}\n\nWrite the program for the message above with this data in view: \
         use the fields, values and formats exactly as this data writes them, and count only \
         the lines or items that are data. Reply with the program only.",
        lines.join("\n")
    )
}

//! **Prose after a finding.** Fixes: a program logs or returns what the user asked for
//! (a count, a list), then the model replies "Done." in prose, which would be the answer while
//! the finding stays in the logs. Told once; after that the prose is the answer with the
//! finding beneath it, so it is never lost.
//!
//! Measured: round 12 build B (e79f4fa, with the refused absent values): tuning 14 → 12/17,
//! held-out 3 → 2/9; it fired only in sales-report, which failed without it too, and decided
//! no held-out task. It applies under the embedded model's grammar too, which allows a prose
//! answer once a program of the turn has run.

use agentic_core::tool::cap_text;

/// How the error of a prose reply that left unsaid what the last program found starts.
pub(crate) const UNSAID: &str = "not run: this reply is prose";

/// The notice: what the last program found, and how to show it.
pub(crate) fn notice(found: &str) -> String {
    format!(
        "{UNSAID}: the user has not seen what the last program found, and this reply does not \
         say it. What it found: {}\nReply with a program that ends with done(answer), the \
         answer saying what it found.",
        cap_text(found, 1_000)
    )
}

/// Whether `reply` says something of `found`, a program's value or logs: one of its numbers,
/// or, when it has none, one of its short lines. Found text with neither counts as said.
pub(crate) fn says_any(reply: &str, found: &str) -> bool {
    let numbers: Vec<&str> = found
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map(|number| number.trim_matches('.'))
        .filter(|number| number.chars().any(|c| c.is_ascii_digit()))
        .collect();
    if !numbers.is_empty() {
        let said: Vec<&str> = reply
            .split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .map(|number| number.trim_matches('.'))
            .collect();
        return numbers.iter().any(|number| said.contains(number));
    }
    let reply = reply.to_lowercase();
    let lines: Vec<String> = found
        .lines()
        .map(|line| line.trim().trim_matches('"').to_lowercase())
        .filter(|line| !line.is_empty() && line.chars().count() <= 80)
        .collect();
    lines.is_empty() || lines.iter().any(|line| reply.contains(line.as_str()))
}

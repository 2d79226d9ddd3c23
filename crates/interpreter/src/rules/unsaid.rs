//! **Prose after a finding.** Fixes: a program logs or returns what the user asked for
//! (a count, a list), then the model replies "Done." in prose, which would be the answer while
//! the finding stays in the logs. Told once; after that the prose is the answer with the
//! finding beneath it, so it is never lost.
//!
//! Measured: round 12 build B (e79f4fa, with the refused absent values): tuning 14 → 12/17,
//! held-out 3 → 2/9; it fired only in sales-report, which failed without it too, and decided
//! no held-out task. It applies under the embedded model's grammar too, which allows a prose
//! answer once a program of the turn has run.
//!
//! The other way round, a sample in prose that says the finding is the answer, as the
//! model's own prose reply would be (`says_some`, used by `mode/candidates.rs`): seen with
//! s27, where `done()` alone after a logged finding had three such samples, all passed over.
//! Measured: round 30 (s29), tuning 21 → 21/24 and held-out 5 → 5/12 task for task; it fired
//! in no run of either split.

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
    said(reply, found).unwrap_or(true)
}

/// Whether `reply` says one of `found`'s numbers or short lines, as [`says_any`] judges it;
/// found text with neither is not said. A sampled reply in prose is taken as the answer only
/// when it says this much (`mode/candidates.rs`).
pub(crate) fn says_some(reply: &str, found: &str) -> bool {
    said(reply, found).unwrap_or(false)
}

/// Whether `reply` says one of `found`'s numbers, else one of its short lines; `None` when
/// `found` has neither.
fn said(reply: &str, found: &str) -> Option<bool> {
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
        return Some(numbers.iter().any(|number| said.contains(number)));
    }
    let reply = reply.to_lowercase();
    let lines: Vec<String> = found
        .lines()
        .map(|line| line.trim().trim_matches('"').to_lowercase())
        .filter(|line| !line.is_empty() && line.chars().count() <= 80)
        .collect();
    (!lines.is_empty()).then(|| lines.iter().any(|line| reply.contains(line.as_str())))
}

#[cfg(test)]
mod tests {
    use super::{says_any, says_some};

    #[test]
    fn a_reply_says_a_finding_by_its_numbers_else_its_short_lines() {
        assert!(says_some("There are 3 even items.", "even: 3"));
        assert!(!says_some("Done.", "even: 3"));
        assert!(says_some("The capital is Paris.", "Paris"));
        assert!(!says_some("Done.", "Paris"));
    }

    #[test]
    fn found_text_with_nothing_to_say_counts_as_said_only_for_the_lenient_check() {
        let found = format!("{}\n", "x".repeat(200));
        assert!(says_any("Done.", &found));
        assert!(!says_some("Done.", &found));
    }
}

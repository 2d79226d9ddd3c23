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
//!
//! What counts as saying the finding: one of its numbers, one of its short lines, or one of
//! its data words ([`data_words`]: a word of the finding that is no key of it, not in the
//! user's message and not a word any reply would use). Before round 32 only the numbers
//! counted when the finding had any, so after a program that logged a whole status page,
//! "The services that are down are: search, billing." was told it said nothing (its numbers
//! were latencies), and the turn ended on a worse answer (services-down, a tuning task).

use std::collections::HashSet;

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
pub(crate) fn says_any(reply: &str, found: &str, asked: &str) -> bool {
    said(reply, found, asked).unwrap_or(true)
}

/// Whether `reply` says one of `found`'s numbers or short lines, as [`says_any`] judges it;
/// found text with neither is not said. A sampled reply in prose is taken as the answer only
/// when it says this much (`mode/candidates.rs`).
pub(crate) fn says_some(reply: &str, found: &str, asked: &str) -> bool {
    said(reply, found, asked).unwrap_or(false)
}

/// Whether `reply` says one of `found`'s data words (`asked` being the user's message), else
/// one of its numbers, else one of its short lines; `None` when `found` has none of them.
fn said(reply: &str, found: &str, asked: &str) -> Option<bool> {
    let words = data_words(found, asked);
    if !words.is_empty() && words_of(reply).any(|word| words.contains(&word)) {
        return Some(true);
    }
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
    if lines.is_empty() {
        return (!words.is_empty()).then_some(false);
    }
    Some(lines.iter().any(|line| reply.contains(line.as_str())))
}

/// Words any reply may use, found or not: a reply made of them says nothing of a finding,
/// though a status or a field may hold them ("done", "found").
const ANY_REPLY: &[&str] = &[
    "all",
    "and",
    "any",
    "are",
    "been",
    "but",
    "can",
    "code",
    "complete",
    "completed",
    "data",
    "done",
    "error",
    "errors",
    "executed",
    "execution",
    "false",
    "file",
    "files",
    "finished",
    "for",
    "found",
    "from",
    "has",
    "have",
    "here",
    "its",
    "none",
    "not",
    "null",
    "output",
    "program",
    "result",
    "results",
    "success",
    "successful",
    "successfully",
    "task",
    "that",
    "the",
    "there",
    "this",
    "true",
    "undefined",
    "was",
    "were",
    "will",
    "with",
    "you",
    "your",
];

/// The words of `text`, lowercased: runs of letters, digits, `_`, `-` and `.` inside them
/// (`report.md`, `pine-cone-42`), with a letter among them and at least three long.
pub(crate) fn words_of(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.')))
        .map(|word| word.trim_matches(|c| matches!(c, '-' | '.')))
        .filter(|word| word.chars().count() >= 3 && word.chars().any(char::is_alphabetic))
        .map(str::to_lowercase)
}

/// The data words of `found` (a result or what a program logged): its [`words_of`] that are
/// no key of it (`"state":`, `total:`), are not in `asked` (the user's message, whose words a
/// reply repeats whatever it found) and are not words [`ANY_REPLY`] uses.
pub(crate) fn data_words(found: &str, asked: &str) -> Vec<String> {
    // Sets, as a finding may be a whole file's text.
    let mut left_out: HashSet<String> = words_of(asked).chain(keys_of(found)).collect();
    let mut words: Vec<String> = Vec::new();
    for word in words_of(found) {
        if !ANY_REPLY.contains(&word.as_str()) && left_out.insert(word.clone()) {
            words.push(word);
        }
    }
    words
}

/// The words of `text` that name a field: followed by `:`, after a closing quote or not.
fn keys_of(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(':').filter_map(|before| {
        let before = before.trim_end().trim_end_matches(['"', '\'', '\\']);
        let start = before
            .rfind(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.')))
            .map_or(0, |at| {
                at + before[at..].chars().next().map_or(1, char::len_utf8)
            });
        let key = &before[start..];
        (!key.is_empty()).then(|| key.to_lowercase())
    })
}

#[cfg(test)]
mod tests {
    use super::{data_words, says_any, says_some};

    #[test]
    fn a_reply_says_a_finding_by_its_numbers_else_its_short_lines() {
        assert!(says_some("There are 3 even items.", "even: 3", ""));
        assert!(!says_some("Done.", "even: 3", ""));
        assert!(says_some("The capital is Paris.", "Paris", ""));
        assert!(!says_some("Done.", "Paris", ""));
    }

    #[test]
    fn found_text_with_nothing_to_say_counts_as_said_only_for_the_lenient_check() {
        let found = format!("{}\n", "---".repeat(70));
        assert!(says_any("Done.", &found, ""));
        assert!(!says_some("Done.", &found, ""));
    }

    #[test]
    fn a_reply_says_a_finding_by_a_data_word_of_it() {
        // A status page logged whole: its numbers are latencies, its data the names.
        let found = r#"{"services": [{"name": "login", "state": "up", "latencyMs": 41},
            {"name": "search", "state": "down", "latencyMs": null}]}"#;
        let asked = "Check the status page and tell me which services are down.";
        assert!(says_some(
            "The services that are down are: search.",
            found,
            asked
        ));
        // Keys, the user's own words and words of any reply say nothing.
        assert!(!says_some(
            "The services that are down: see the state.",
            found,
            asked
        ));
        assert!(!says_some("Done. The task is complete.", found, asked));
        assert!(!says_any("Done.", "done: 3\nopen: 2", "How many todos?"));
    }

    #[test]
    fn data_words_leave_out_keys_asked_words_and_words_of_any_reply() {
        let words = data_words(
            "todo: Pay rent, done: true\nfile: report.md (found)",
            "Which todo is about rent?",
        );
        assert_eq!(words, ["pay", "report.md"]);
    }
}

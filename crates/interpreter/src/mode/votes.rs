//! Samples that vote on an answer: a program that passes its check and would end the turn with
//! an answer it computed (from what its reads gave, or from values written out in it) is not
//! taken on its own word. The model is asked the same request again, as for a candidate
//! (`candidates.rs`), and each sample that passes its check and would end the turn too is a
//! vote: the facts of its answer (the numbers it says, else the words it adds to the request)
//! agree with the facts of the model's own, or they do not. The first sample that agrees
//! keeps the model's own program; two samples that agree with each other and not with it run
//! one of theirs (the first) in its place. Up to `votes` samples (a top-level setting, 0 and
//! off by default) are drawn; when none agrees with any other, the model's own program runs.
//!
//! A small model's greedy program is wrong more often than its warmer samples are wrong in the
//! same way: a count that took the header line, a filter that held for none of the texts it was
//! given. Such an answer is right-looking, so no rule can make it loud; what can be seen is that
//! other programs for the same request say something else. Only a program whose answer the dry
//! run saw in full takes part: one that computes (`computes`: it loops, filters, counts, splits,
//! searches or converts), whose dry run was certain and asked no `llm()`. A sample may change
//! only what the model's own program changes (`rules::sampled_changes`), and what it would hand
//! to such a tool (a file's content, a todo's title) is part of its answer. An answer read off
//! one result (`time.now`'s time) is not voted on: the samples would cost a model call each and
//! say it again.
//!
//! The vote is journaled with the check (`Entry::Checked::voted`): a replay asks as many samples
//! and takes the program that won, without dry-running them.
//!
//! Measured (round 37, `docs/benchmarks.md`, embedded Qwen2.5-Coder-1.5B with 3 votes): 16
//! votes, none of which changed an outcome. In 7 the first sample said the same wrong answer
//! as the model's program, in 9 no two answers agreed: a small model's samples share its
//! mistakes. So it is off by default, for a model whose samples differ more.

use std::collections::BTreeSet;

use agentic_core::{ModelRequest, Prepared};
use serde::{Deserialize, Serialize};

use super::CodeExecutor;
use super::candidates::{Checked, Drawn};
use crate::protocol::ToolBinding;

/// What a vote decided, as the journal keeps it: the samples asked, and the place (in the
/// check's `passed`, 0 the model's own) of the program that runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Voted {
    pub(crate) asked: u32,
    pub(crate) chosen: usize,
}

/// The words a program's dry run would give the user (its `output()` texts and answer) and
/// the text it would hand to tools that change something: what a vote compares.
#[derive(Debug, Clone, Default)]
pub(super) struct Answer {
    pub(super) texts: Vec<String>,
    /// What its first reads that gave data gave (tool, input, result): what a review shows
    /// the model (`review.rs`).
    pub(super) data: Vec<(String, serde_json::Value, serde_json::Value)>,
}

/// The facts of an answer: the numbers it says, and its words that the request does not have.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Facts {
    numbers: Vec<f64>,
    words: BTreeSet<String>,
}

/// Words every answer may have, which say nothing of what it found.
const PHRASING: &[&str] = &[
    "the",
    "and",
    "are",
    "was",
    "were",
    "is",
    "has",
    "have",
    "had",
    "there",
    "their",
    "this",
    "that",
    "these",
    "those",
    "with",
    "for",
    "from",
    "into",
    "of",
    "in",
    "on",
    "at",
    "to",
    "by",
    "it",
    "its",
    "as",
    "be",
    "been",
    "an",
    "or",
    "not",
    "no",
    "yes",
    "you",
    "your",
    "our",
    "we",
    "total",
    "found",
    "here",
    "which",
    "what",
    "all",
    "any",
    "each",
    "one",
    "ones",
    "them",
    "they",
    "file",
    "files",
    "done",
    "result",
    "results",
    "answer",
    "following",
    "list",
];

impl Answer {
    pub(super) fn facts(&self, request: &str) -> Facts {
        let asked: BTreeSet<String> = words(request).collect();
        let mut numbers = Vec::new();
        let mut found = BTreeSet::new();
        for text in &self.texts {
            numbers.extend(numbers_in(text));
            found.extend(words(text).filter(|word| {
                !asked.contains(word)
                    && !PHRASING.contains(&word.as_str())
                    && !word
                        .chars()
                        .all(|c| c.is_ascii_digit() || c == '.' || c == ',')
            }));
        }
        numbers.sort_by(f64::total_cmp);
        numbers.dedup_by(|a, b| (*a - *b).abs() <= 1e-9 * a.abs().max(1.0));
        Facts {
            numbers,
            words: found,
        }
    }
}

impl Facts {
    /// Whether two answers say the same: the same numbers, when either says one; else at
    /// least half their words in common. Two answers that say nothing do not agree.
    pub(super) fn agree(&self, other: &Self) -> bool {
        if !self.numbers.is_empty() || !other.numbers.is_empty() {
            return self.numbers == other.numbers;
        }
        let common = self.words.intersection(&other.words).count();
        let all = self.words.union(&other.words).count();
        all > 0 && common * 2 >= all
    }
}

/// The lower-case words of `text`: runs of letters and digits, with `.`, `-` and `_` inside
/// (`report.md`, `ticket-12`), of two characters or more.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '.' | '-' | '_')))
        .map(|word| word.trim_matches(|c: char| matches!(c, '.' | '-' | '_')))
        .filter(|word| word.chars().count() >= 2)
        .map(str::to_lowercase)
}

/// The numbers `text` says: `1,234.50` is 1234.5, `-3` is negative only after a blank or the
/// start, and `2026-12-07` is 2026, 12 and 7.
fn numbers_in(text: &str) -> Vec<f64> {
    let chars: Vec<char> = text.chars().collect();
    let mut numbers = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        if !chars[at].is_ascii_digit() {
            at += 1;
            continue;
        }
        if at > 0 && chars[at - 1].is_alphabetic() {
            // A digit inside a word (`v23`, `utf8`) is part of the word.
            while at < chars.len() && chars[at].is_alphanumeric() {
                at += 1;
            }
            continue;
        }
        let negative = at > 0
            && chars[at - 1] == '-'
            && (at == 1 || chars[at - 2].is_whitespace() || chars[at - 2] == '(');
        let mut digits = String::new();
        while at < chars.len() {
            let c = chars[at];
            let next_digit = chars.get(at + 1).is_some_and(char::is_ascii_digit);
            if c.is_ascii_digit() {
                digits.push(c);
            } else if c == ',' && next_digit && !digits.contains('.') {
                // A thousands separator: `1,234`.
            } else if c == '.' && next_digit && !digits.contains('.') {
                digits.push('.');
            } else {
                break;
            }
            at += 1;
        }
        if let Ok(number) = digits.parse::<f64>() {
            numbers.push(if negative { -number } else { number });
        }
    }
    numbers
}

/// Whether a program computes its answer from what it read, rather than reading it off one
/// result: it loops, or filters, counts, splits, searches, sorts or converts.
pub(super) fn computes(code: &str) -> bool {
    const WORK: &[&str] = &[
        "for (",
        "for(",
        "while",
        ".filter(",
        ".map(",
        ".reduce(",
        ".forEach(",
        ".split(",
        ".match(",
        ".sort(",
        ".length",
        ".includes(",
        ".some(",
        ".every(",
        ".find(",
        ".indexOf(",
        ".startsWith(",
        ".endsWith(",
        ".test(",
        "parseFloat",
        "parseInt",
        "Number(",
        "Math.",
        ".flatMap(",
    ];
    WORK.iter().any(|work| code.contains(work))
}

/// Which of `answers` (the model's own first) runs: the own program when a sample agrees
/// with it, or when no sample has more agreement than it; else the first of the samples that
/// most others agree with. `None` while undecided: no sample agrees with it, and none with
/// another.
pub(super) fn tally(facts: &[Facts], last: bool) -> Option<usize> {
    let support = |i: usize| {
        facts
            .iter()
            .enumerate()
            .filter(|(j, other)| *j != i && facts[i].agree(other))
            .count()
    };
    let own = support(0);
    if own > 0 {
        return Some(0);
    }
    let best = (1..facts.len())
        .map(|i| (support(i), i))
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    match best {
        Some((support, i)) if support > own => Some(i),
        _ => last.then_some(0),
    }
}

impl CodeExecutor {
    /// How many samples vote on a program's answer (the `votes` setting).
    pub(super) fn votes(&self) -> u32 {
        self.base.options.services.limits().votes
    }

    /// The program that runs after a vote on `own`'s answer (see the module's doc), with
    /// what the journal keeps of it: the samples asked, and the place of the one that runs.
    /// `passed` gets the verdict of every sample that reached its check.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn vote(
        &mut self,
        own: Checked,
        answer: &Answer,
        request: &ModelRequest,
        prepared: &Prepared,
        bindings: &[ToolBinding],
        recorded: &mut Option<std::collections::VecDeque<bool>>,
        recorded_vote: Option<Voted>,
        passed: &mut Vec<bool>,
    ) -> (Checked, Option<Voted>) {
        let asked_request = self.timeline().asked().to_owned();
        let mut facts = vec![answer.facts(&asked_request)];
        let mut voters: Vec<(usize, Checked)> = vec![(0, own)];
        let allowed =
            crate::rules::sampled_changes::changing_tools(&voters[0].1.code, prepared, bindings);
        let mut tried = vec![super::timeline::code_shape(&voters[0].1.code)];
        let limit = recorded_vote.map_or(self.votes(), |voted| voted.asked);
        let mut asked = 0;
        let mut decided = None;
        while asked < limit && decided.is_none() {
            asked += 1;
            let program = match self
                .draw(request, asked, (prepared, bindings), &mut tried, &allowed)
                .await
            {
                Drawn::Program(program) => program,
                Drawn::Prose(_) | Drawn::Skipped => continue,
                Drawn::Unasked => break,
            };
            let (failure, sample_answer) = self
                .verdict(recorded, &program.code, prepared, bindings, false, true)
                .await;
            passed.push(failure.is_none());
            if recorded_vote.is_some() {
                voters.push((passed.len() - 1, program));
                continue;
            }
            let Some(sample_answer) = sample_answer.filter(|_| failure.is_none()) else {
                continue;
            };
            facts.push(sample_answer.facts(&asked_request));
            voters.push((passed.len() - 1, program));
            decided = tally(&facts, asked == limit);
        }
        let chosen = match recorded_vote {
            Some(voted) => voted.chosen,
            None => voters[decided.unwrap_or(0)].0,
        };
        if chosen != 0 {
            tracing::info!(
                place = chosen,
                "code mode runs a sampled program whose answer others agree with, in place of one no sample agreed with"
            );
        }
        let position = voters
            .iter()
            .position(|(place, _)| *place == chosen)
            .unwrap_or(0);
        let program = voters.swap_remove(position).1;
        (program, Some(Voted { asked, chosen }))
    }
}

#[cfg(test)]
mod tests {
    use super::{Answer, computes, numbers_in, tally};

    fn facts(texts: &[&str]) -> super::Facts {
        Answer {
            texts: texts.iter().map(|text| (*text).to_owned()).collect(),
            data: Vec::new(),
        }
        .facts("How many items of the checklist are left?")
    }

    #[test]
    fn numbers_are_read_as_people_write_them() {
        assert_eq!(numbers_in("1,234.50 EUR"), vec![1234.5]);
        assert_eq!(
            numbers_in("on 2026-12-07 at 14:30"),
            vec![2026.0, 12.0, 7.0, 14.0, 30.0]
        );
        assert_eq!(numbers_in("from -3 to 5."), vec![-3.0, 5.0]);
        assert_eq!(numbers_in("ticket-12 and v23"), vec![12.0]);
        assert!(numbers_in("none").is_empty());
    }

    #[test]
    fn answers_agree_on_their_numbers_whatever_their_words() {
        assert!(facts(&["5 items are left."]).agree(&facts(&["There are 5 unchecked items"])));
        assert!(facts(&["Total: 48.50"]).agree(&facts(&["48.5 EUR"])));
        assert!(!facts(&["9 items are left"]).agree(&facts(&["5 items are left"])));
        assert!(!facts(&["5 of 9 items"]).agree(&facts(&["5 items"])));
    }

    #[test]
    fn answers_without_numbers_agree_on_the_words_the_request_does_not_have() {
        assert!(facts(&["The password is hunter2"]).agree(&facts(&["hunter2"])));
        assert!(
            facts(&["Files: report.md, notes.txt"]).agree(&facts(&["notes.txt and report.md"]))
        );
        assert!(!facts(&["The password is hunter2"]).agree(&facts(&["swordfish"])));
        assert!(!facts(&["Done."]).agree(&facts(&["Done."])));
    }

    #[test]
    fn the_own_answer_stands_unless_samples_agree_against_it() {
        let (nine, five) = (facts(&["9"]), facts(&["5"]));
        // A sample agrees with the model's own answer: it runs.
        assert_eq!(tally(&[nine.clone(), nine.clone()], false), Some(0));
        // One sample that says otherwise is not enough to decide.
        assert_eq!(tally(&[nine.clone(), five.clone()], false), None);
        // Two samples that agree with each other and not with it: the first of them runs.
        assert_eq!(
            tally(&[nine.clone(), five.clone(), five.clone()], false),
            Some(1)
        );
        // No agreement at all once the samples are drawn: the model's own runs.
        assert_eq!(tally(&[nine, five, facts(&["7"])], true), Some(0));
    }

    #[test]
    fn only_programs_that_compute_their_answer_are_voted_on() {
        assert!(computes(
            "const lines = fs.read({ path: 'a.md' }).content.split('\\n');"
        ));
        assert!(!computes(
            "const t = time.now({ timezone: 'Asia/Tokyo' });\ndone(t.time);"
        ));
    }
}

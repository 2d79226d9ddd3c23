//! **The same program again after it failed.** Fixes: a small model copies its program back
//! unchanged past a long error. The copy is not run; the model is told once what its last run
//! met (the error's message and hint, or the note on values it left empty). A further copy is
//! asked afresh (`afresh.rs`) or, with data fetched, answered in plain text. With a model
//! that samples, a copy is first sampled again (`mode/candidates.rs`) and these notices come
//! only when no sample gets through.
//!
//! Measured: round 2, 8 → 10/26 (62f292c, package); retelling the hint, round 9b 14/26 twice
//! against 9a's 16/26 (a253126): one greedy run does not separate it from noise. Sampling a
//! copy again first: round 23, tuning 21 → 21 and held-out 6 → 6, task for task.

use agentic_core::tool::cap_text;

/// How the error of a program sent again after it failed starts.
pub(crate) const REPEATED: &str = "not run: the same program as iteration";

/// Characters of an error retold to a program sent again.
const RETOLD_CHARS: usize = 600;

/// An error as retold when the program that had it is sent again: the message and its hint,
/// without the quoted source line (the model has the program) and the logs. The hint is what
/// a small model missed; its first line alone ("TypeError: cannot convert 'null' or
/// 'undefined' to object") sent Qwen2.5-Coder-1.5B back to the same guess.
pub(crate) fn retold(error: &str) -> String {
    let lines: Vec<&str> = error
        .lines()
        .take_while(|line| *line != "Logs:")
        .filter(|line| !line.starts_with("> "))
        .collect();
    cap_text(&lines.join("\n"), RETOLD_CHARS)
}

/// The notice for a copy of iteration `number`, which failed with `error`.
pub(crate) fn after_failure(number: usize, error: &str) -> String {
    format!(
        "{REPEATED} {number}, which failed with: {}\nChange the code that the error points \
         at. If the task cannot be done, say so in plain text.",
        retold(error)
    )
}

/// The notice for a copy of iteration `number`, which ran but left values empty (`note`).
pub(crate) fn after_note(number: usize, note: &str) -> String {
    format!(
        "{REPEATED} {number}, which ran, but: {note} Change the code that reads those fields. \
         If the task cannot be done, say so in plain text."
    )
}

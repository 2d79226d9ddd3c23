//! **Nothing shown.** Fixes: `done()` alone, or `done("")` (an empty list joined), in a turn
//! that showed the user nothing: the answer would be empty. Told once; a second `done()`
//! alone fails the turn ([`NO_ANSWER`]) rather than completing it with nothing shown.
//!
//! Measured: in round 9b's package (a253126, 14/26 twice against 9a's 16), no task credited
//! to it; the `done("")` wording (941e3ab) was not measured.

/// Why a turn fails when the model ends it without an answer after it was told: the user would
/// otherwise get a completed turn with nothing in it.
pub(crate) const NO_ANSWER: &str =
    "the model ended the turn without an answer, after it was told once to give one";

/// How the error of a program that ended a turn in which the user was shown nothing starts.
pub(crate) const NOTHING_SHOWN: &str = "the turn was not ended: the user has been shown nothing";

/// Whether a program that ran without failing ends a turn with nothing for the user: it
/// called `done()` (`done`) without an answer (`answered`), and nothing was shown in the turn,
/// this program's `output()` included (`shown`).
pub(crate) fn ends_unseen(done: bool, answered: bool, shown: bool) -> bool {
    done && !answered && !shown
}

/// The notice; `empty_text` when `done()` got an empty text rather than nothing.
pub(crate) fn notice(empty_text: bool) -> String {
    if empty_text {
        format!(
            "{NOTHING_SHOWN}: done() got an empty text (an empty list joined, say), so the user \
             would see nothing. If nothing matched, that is the answer: say it in words, e.g. \
             done(names.length ? names.join(\", \") : \"None found.\"). The program's tool \
             calls did run; do not repeat its writes."
        )
    } else {
        format!(
            "{NOTHING_SHOWN}: done() was called without an answer and nothing was shown with \
             output(). End with done(answer), the answer as text for the user. The program's \
             tool calls did run; do not repeat its writes."
        )
    }
}

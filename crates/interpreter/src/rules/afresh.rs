//! **Asked afresh.** Fixes: stuck on a program that failed, with nothing fetched yet to answer
//! from, a small model copies its earlier programs back. It is asked once more in a request
//! without them: the user's message and the last error only, sampled warmer
//! ([`RESAMPLE_TEMPERATURE`]), since at temperature 0 the same request gives the same program.
//!
//! Measured: round 8a 15/26 against round 7's 14 (40dba6c), but the gain came from
//! `declared_earlier`; asked afresh, tokyo-weekday and json-to-csv got the first program back.
//! Resampling (077d5ff): tokyo-weekday passed in both round 9b runs, failed again in 9c.

use agentic_core::tool::cap_text;

/// A reply that was not run, after which the model was asked for a program once more in a
/// fresh request (the user's message and the last error, without the earlier programs).
pub(crate) const ASKED_AFRESH: &str = "not run: asked for a new program afresh";

/// How warm a request is sampled after the model sent an earlier program again.
pub(crate) const RESAMPLE_TEMPERATURE: f32 = 0.7;

/// The user message of the fresh request: what went wrong, without the programs that did.
pub(crate) fn request(failure: &str) -> String {
    format!(
        "An earlier program for the message above failed with:\n{}\n\nWrite a new program \
         that does what the message asks. Follow the error: use the tool, input or field it \
         names.",
        cap_text(failure, 1_500)
    )
}

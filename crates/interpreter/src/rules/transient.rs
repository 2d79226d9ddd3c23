//! **A failure that may pass when tried again.** Fixes: the repeat rule (`repeated.rs`)
//! assumes a program gives the same result twice, which a 503 or a timeout breaks: a program
//! whose calls met such a failure is run once more when sent again.
//!
//! Measured: round 10b 16/26, the same as 10a (71ffa7b); in flaky-forecast it reran and the
//! fetch passed, but the task still failed on invented fields.

use agentic_core::ToolResult;
use serde_json::Value;

/// HTTP statuses that say "try again": the request may pass unchanged a moment later.
const TRANSIENT_STATUSES: &[u64] = &[408, 425, 429, 500, 502, 503, 504];

/// Whether a tool call's result says it may pass if tried again: a result whose `status` is
/// one of [`TRANSIENT_STATUSES`], or an error that says its service is temporarily
/// unavailable, overloaded or timed out.
pub(crate) fn transient_failure(result: &ToolResult) -> bool {
    match result {
        ToolResult::Success { output } => transient_status(output),
        ToolResult::Error { error, .. } => transient_error(error),
        _ => false,
    }
}

/// [`transient_failure`] of a result as a dry run holds it.
pub(crate) fn transient_answer(result: &Result<Value, String>) -> bool {
    match result {
        Ok(output) => transient_status(output),
        Err(error) => transient_error(error),
    }
}

fn transient_status(output: &Value) -> bool {
    output
        .get("status")
        .and_then(Value::as_u64)
        .is_some_and(|status| TRANSIENT_STATUSES.contains(&status))
}

fn transient_error(error: &str) -> bool {
    let error = error.to_ascii_lowercase();
    [
        "temporarily unavailable",
        "try again",
        "timed out",
        "overloaded",
        "connection reset",
    ]
    .iter()
    .any(|words| error.contains(words))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_that_may_pass_when_tried_again() {
        let ok = |output: Value| ToolResult::Success { output };
        let error = |text: &str| ToolResult::failed(text.to_owned());
        assert!(transient_failure(&ok(
            serde_json::json!({ "status": 503, "text": "busy" })
        )));
        assert!(transient_failure(&ok(serde_json::json!({ "status": 429 }))));
        assert!(!transient_failure(&ok(
            serde_json::json!({ "status": 404 })
        )));
        assert!(!transient_failure(&ok(
            serde_json::json!({ "status": "503" })
        )));
        assert!(transient_failure(&error("the fetch timed out after 20 s")));
        assert!(transient_failure(&error("Service Temporarily Unavailable")));
        assert!(!transient_failure(&error(
            "cannot read \"a.txt\": No such file"
        )));
        assert!(!transient_failure(&ToolResult::pending("waiting")));
    }
}

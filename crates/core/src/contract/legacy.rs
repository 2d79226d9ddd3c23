//! Timelines written by releases before error kinds existed (before 2026-11-26): their tool
//! errors carry words only. Each is classified once, as it is read, by the exact words those
//! releases wrote. The texts below are frozen: they describe stored rows, not what anything
//! writes today, and must never be reworded. Nothing else in the workspace reads an error's
//! words to decide what to do (`xtask/tests/tidy.rs` checks).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::prompt::{ErrorKind, ToolResult};

/// [`ToolResult`] as stored by any release: an error's kind may be missing.
#[derive(Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub(crate) enum StoredToolResult {
    Success {
        output: Value,
    },
    Error {
        error: String,
        #[serde(default)]
        kind: Option<ErrorKind>,
        #[serde(default)]
        notice: Option<String>,
    },
    Pending {
        reason: String,
        #[serde(default, rename = "awaitingApproval")]
        awaiting_approval: bool,
    },
}

impl From<StoredToolResult> for ToolResult {
    fn from(stored: StoredToolResult) -> Self {
        match stored {
            StoredToolResult::Success { output } => Self::Success { output },
            StoredToolResult::Error {
                error,
                kind: Some(kind),
                notice,
            } => Self::Error {
                error,
                kind,
                notice,
            },
            StoredToolResult::Error {
                error, kind: None, ..
            } => {
                let (kind, notice) = classify(&error);
                Self::Error {
                    error,
                    kind,
                    notice: notice.map(str::to_owned),
                }
            }
            StoredToolResult::Pending {
                reason,
                awaiting_approval,
            } => Self::Pending {
                reason,
                awaiting_approval,
            },
        }
    }
}

/// What the words of an error written before kinds existed meant: its kind, and the code-mode
/// rule that wrote it, if one did.
fn classify(error: &str) -> (ErrorKind, Option<&'static str>) {
    const EXACT: &[(&str, ErrorKind)] = &[
        (
            "Interrupted: the process stopped before this tool call finished",
            ErrorKind::Interrupted,
        ),
        (
            "Interrupted: the process stopped while this tool call waited for approval; it did \
             not run",
            ErrorKind::InterruptedWaiting,
        ),
        (
            "Interrupted: the server running this tool call stopped before its result was \
             recorded; it was not run again, and it may or may not have taken effect",
            ErrorKind::TakenOver,
        ),
        (
            "Cancelled: the prompt was stopped before this tool call finished",
            ErrorKind::Cancelled,
        ),
    ];
    // Code mode's notices, by how each began, most specific first.
    const NOTICES: &[(&str, ErrorKind, &str)] = &[
        (
            "not run: this reply is not a JavaScript program",
            ErrorKind::NotRun,
            "not_a_program",
        ),
        (
            "not run: the same program as iteration",
            ErrorKind::NotRun,
            "repeated",
        ),
        (
            "not run: asked for a new program afresh",
            ErrorKind::NotRun,
            "afresh",
        ),
        ("not run: this reply is prose", ErrorKind::NotRun, "unsaid"),
        (
            "not run: the same code as iteration",
            ErrorKind::NotRun,
            "stuck",
        ),
        (
            "the turn was not ended: the user has been shown nothing",
            ErrorKind::Failed,
            "nothing_shown",
        ),
    ];
    if let Some((_, kind)) = EXACT.iter().find(|(text, _)| *text == error) {
        return (*kind, None);
    }
    if error.starts_with("Rejected by user") {
        return (ErrorKind::Rejected, None);
    }
    if let Some((_, kind, notice)) = NOTICES
        .iter()
        .find(|(start, _, _)| error.starts_with(start))
    {
        return (*kind, Some(notice));
    }
    if error.starts_with("not run:") {
        return (ErrorKind::NotRun, None);
    }
    (ErrorKind::Failed, None)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(error: &str) -> ToolResult {
        serde_json::from_value(json!({ "type": "error", "error": error })).unwrap()
    }

    #[test]
    fn errors_without_a_kind_are_classified_by_the_words_they_were_written_with() {
        assert_eq!(
            read("Interrupted: the process stopped before this tool call finished").error_kind(),
            Some(ErrorKind::Interrupted)
        );
        assert_eq!(
            read("Rejected by user: not today").error_kind(),
            Some(ErrorKind::Rejected)
        );
        let repeated = read("not run: the same program as iteration 2, which failed with: x");
        assert_eq!(repeated.error_kind(), Some(ErrorKind::NotRun));
        assert_eq!(repeated.notice(), Some("repeated"));
        assert_eq!(
            read("TypeError: x is undefined").error_kind(),
            Some(ErrorKind::Failed)
        );
    }

    #[test]
    fn a_recorded_kind_is_taken_as_written_whatever_the_words() {
        let result: ToolResult = serde_json::from_value(json!({
            "type": "error",
            "error": "Rejected by user: the tool's own words",
            "kind": "failed",
        }))
        .unwrap();
        assert_eq!(result.error_kind(), Some(ErrorKind::Failed));
        assert_eq!(result.notice(), None);
        // Written with its kind, read back the same.
        let again: ToolResult =
            serde_json::from_value(serde_json::to_value(&result).unwrap()).unwrap();
        assert_eq!(again, result);
    }
}

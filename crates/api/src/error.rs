//! The one error shape every route answers with: `{"error": {"code", "message"}}`.

use agentic_conversation::ConversationError;
use agentic_core::{ExecutorError, PromptServiceError};
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Seconds, for 429 answers.
    pub retry_after: Option<u64>,
    /// What went wrong inside, for the log only (a 5xx's cause chain).
    pub cause: Option<String>,
}

/// The `code` an error answer carried, kept on the response for the request's log line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ErrorCode(pub(crate) &'static str);

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ErrorDetail {
    /// A stable, machine-readable code, e.g. `busy` or `unknown_mode`.
    pub code: String,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after: None,
            cause: None,
        }
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn not_found(what: &str, id: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} \"{id}\" not found"),
        )
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn too_many(message: impl Into<String>, retry_after: u64) -> Self {
        Self {
            retry_after: Some(retry_after.max(1)),
            ..Self::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message)
        }
    }

    pub fn internal(error: &anyhow::Error) -> Self {
        Self {
            cause: Some(format!("{error:#}")),
            ..Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "internal error; the server log has the details",
            )
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        // Every 5xx is logged with its whole cause chain; the client gets the short message.
        // `message` is the event's own text: a second field of that name would give JSON lines
        // two `message` keys, so the client's message is `client_message`.
        if self.status.is_server_error() {
            tracing::error!(
                status = self.status.as_u16(),
                code = self.code,
                client_message = %self.message,
                cause = self.cause.as_deref().unwrap_or("-"),
                "server error"
            );
        }
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message,
            },
        };
        let mut response = (self.status, axum::Json(body)).into_response();
        response.extensions_mut().insert(ErrorCode(self.code));
        if let Some(seconds) = self.retry_after
            && let Ok(value) = HeaderValue::from_str(&seconds.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        response
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        let status = rejection.status();
        let code = match status {
            StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
            StatusCode::UNPROCESSABLE_ENTITY => "invalid_body",
            _ => "malformed_json",
        };
        let message = match status {
            StatusCode::PAYLOAD_TOO_LARGE => "the request body is over the 1 MiB limit".to_owned(),
            _ => rejection.body_text(),
        };
        Self::new(status, code, message)
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        Self::bad_request("invalid_query", rejection.body_text())
    }
}

impl From<ConversationError> for ApiError {
    fn from(error: ConversationError) -> Self {
        match error {
            ConversationError::NotFound(id) => Self::not_found("conversation", &id),
            ConversationError::PromptNotFound(id) => Self::not_found("prompt", &id),
            busy @ ConversationError::Busy { .. } => {
                Self::new(StatusCode::CONFLICT, "busy", busy.to_string())
            }
            not @ ConversationError::NotWaiting { .. } => {
                Self::new(StatusCode::CONFLICT, "not_waiting", not.to_string())
            }
            decided @ ConversationError::AlreadyDecided { .. } => {
                Self::new(StatusCode::CONFLICT, "already_decided", decided.to_string())
            }
            not @ ConversationError::NotCancellable { .. } => {
                Self::new(StatusCode::CONFLICT, "not_cancellable", not.to_string())
            }
            not @ ConversationError::NotContinuable { .. } => {
                Self::new(StatusCode::CONFLICT, "not_continuable", not.to_string())
            }
            ConversationError::BadScope(message) => Self::bad_request("invalid_scope", message),
            ConversationError::BadDecision(message) => {
                Self::bad_request("invalid_decision", message)
            }
            ConversationError::ScopeNotFound(id) => Self::not_found("scope", &id),
            ConversationError::Prompt(error) => error.into(),
            ConversationError::Store(error) => Self::internal(&error),
        }
    }
}

impl From<PromptServiceError> for ApiError {
    fn from(error: PromptServiceError) -> Self {
        match error {
            PromptServiceError::Mode(error) => Self::bad_request("unknown_mode", error.to_string()),
            PromptServiceError::NotActive(_)
            | PromptServiceError::Executor(ExecutorError::NotWaiting(_))
            | PromptServiceError::Executor(ExecutorError::NotRunnable(_)) => {
                Self::new(StatusCode::CONFLICT, "not_waiting", error.to_string())
            }
            PromptServiceError::Executor(ExecutorError::Internal(message)) => {
                Self::internal(&anyhow::anyhow!(message))
            }
            // A kind of executor error this server does not know yet.
            PromptServiceError::Executor(other) => Self::internal(&anyhow::anyhow!(other)),
        }
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(error: anyhow::Error) -> Self {
        Self::internal(&error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A writer into a shared buffer, for reading what was logged.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A 5xx is logged with its whole cause chain, which the client never sees; a 4xx is
    /// not logged as an error.
    #[test]
    fn a_server_error_logs_its_cause_and_answers_without_it() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let (server, client) = tracing::subscriber::with_default(subscriber, || {
            let cause = anyhow::anyhow!("disk I/O error").context("could not read the prompt");
            (
                ApiError::internal(&cause).into_response(),
                ApiError::bad_request("invalid_body", "no").into_response(),
            )
        });
        assert_eq!(server.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(client.status(), StatusCode::BAD_REQUEST);
        let log = String::from_utf8(
            captured
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
        )
        .unwrap_or_default();
        assert!(log.contains("ERROR"), "{log}");
        assert!(
            log.contains("could not read the prompt: disk I/O error"),
            "{log}"
        );
        assert_eq!(log.lines().count(), 1, "{log}");
    }

    /// A JSON log line has each key once: strict parsers reject a line with two `message`s,
    /// and lenient ones keep only the last.
    #[test]
    fn a_server_errors_json_line_has_one_message() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            ApiError::internal(&anyhow::anyhow!("disk I/O error")).into_response()
        });
        let log = String::from_utf8(
            captured
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
        )
        .unwrap_or_default();
        assert_eq!(log.matches("\"message\":").count(), 1, "{log}");
        let line: serde_json::Value = serde_json::from_str(log.trim()).unwrap_or_default();
        assert_eq!(line["message"], "server error", "{log}");
        assert_eq!(
            line["client_message"], "internal error; the server log has the details",
            "{log}"
        );
        assert_eq!(line["cause"], "disk I/O error", "{log}");
    }
}

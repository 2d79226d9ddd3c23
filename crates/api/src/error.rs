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
}

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
        tracing::error!(error = %format!("{error:#}"), "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; the server log has the details",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message,
            },
        };
        let mut response = (self.status, axum::Json(body)).into_response();
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
        }
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(error: anyhow::Error) -> Self {
        Self::internal(&error)
    }
}

//! Who is calling, and how often.
//!
//! `X-User-Id` is trusted-proxy authentication: the server believes whatever id the header
//! carries, so it must sit behind a proxy (or on a loopback port) that sets the header after
//! authenticating the user. `AGENTIC_API_TOKEN`, when set, additionally requires
//! `Authorization: Bearer <token>` on every request.

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AppState;
use crate::error::ApiError;

pub const USER_HEADER: &str = "x-user-id";

/// The caller, as `X-User-Id` named them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserId(pub String);

/// Routes anyone may call: health, the OpenAPI document and the docs page.
fn is_public(path: &str) -> bool {
    // `/metrics` checks its own token.
    path == "/api/health"
        || path == "/api/openapi.json"
        || path.starts_with("/api/docs")
        || path == "/metrics"
        || crate::playground::is_playground(path)
}

/// A user id is 1 to 128 characters of letters, digits and `_ - . @ : +`.
pub fn valid_user_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '@' | ':' | '+'))
}

/// Token, identity and the per-user request rate, in that order.
pub async fn authenticate(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    if is_public(request.uri().path()) {
        return next.run(request).await;
    }
    if let Some(expected) = &state.inner.config.token {
        let presented = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        if !presented.is_some_and(|token| constant_time_eq(token.as_bytes(), expected.as_bytes())) {
            return ApiError::unauthorized("a valid bearer token is required").into_response();
        }
    }
    let user = match request
        .headers()
        .get(USER_HEADER)
        .map(|value| value.to_str().map(str::trim))
    {
        None => {
            return ApiError::unauthorized("the X-User-Id header is required").into_response();
        }
        Some(Ok(id)) if valid_user_id(id) => id.to_owned(),
        Some(_) => {
            return ApiError::unauthorized(
                "X-User-Id must be 1 to 128 characters of letters, digits and _ - . @ : +",
            )
            .into_response();
        }
    };
    if let Err(not_until) = state.inner.limiter.check_key(&user) {
        let wait = not_until.wait_time_from(governor::clock::Clock::now(
            &governor::clock::DefaultClock::default(),
        ));
        return ApiError::too_many(
            "too many requests; slow down",
            wait.as_secs() + u64::from(wait.subsec_nanos() > 0),
        )
        .into_response();
    }
    request.extensions_mut().insert(UserId(user));
    next.run(request).await
}

pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    #[test]
    fn user_ids_are_short_and_plain() {
        assert!(super::valid_user_id("alice"));
        assert!(super::valid_user_id("alice@example.com"));
        assert!(!super::valid_user_id(""));
        assert!(!super::valid_user_id("a b"));
        assert!(!super::valid_user_id("../etc"));
        assert!(!super::valid_user_id(&"a".repeat(129)));
    }
}

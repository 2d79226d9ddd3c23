//! `/metrics`: Prometheus text, off unless `AGENTIC_METRICS_TOKEN` is set, and then behind
//! that token alone (a scraper is not a user: no `X-User-Id`, no API token, no rate limit).
//!
//! The crates record through the `metrics` facade (names in `agentic_core::telemetry`); this
//! module installs the process's recorder, which keeps them for the scrape. Install it before
//! the runtime starts, or gauges counted before (sandbox workers started at launch) are lost.

use std::sync::OnceLock;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::{ApiError, AppState};

/// Seconds: from a cached tool call to a slow model answer.
const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the Prometheus recorder for this process (once; later calls do nothing).
///
/// # Errors
/// When another `metrics` recorder is installed already.
pub fn install() -> anyhow::Result<()> {
    if HANDLE.get().is_some() {
        return Ok(());
    }
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), LATENCY_BUCKETS)?
        .install_recorder()
        .map_err(|error| anyhow::anyhow!("could not install the metrics recorder: {error}"))?;
    // Two callers at once: the loser's recorder was refused above, so this one is the first.
    let _ = HANDLE.set(handle);
    agentic_core::telemetry::describe_metrics();
    metrics::describe_gauge!(SSE_CLIENTS, "Clients following the event stream");
    // A gauge nobody has touched is not exported: a scraper must see 0 clients, not no metric.
    metrics::gauge!(SSE_CLIENTS).set(0.0);
    Ok(())
}

/// Clients following the event stream (`/api/events`).
pub(crate) const SSE_CLIENTS: &str = "agentic_sse_clients";

pub(crate) fn handle() -> Option<&'static PrometheusHandle> {
    HANDLE.get()
}

/// Folds recent histogram samples into the totals every few seconds, so that a server nobody
/// scrapes does not keep every sample.
pub(crate) async fn upkeep(handle: &'static PrometheusHandle) {
    let mut ticks = tokio::time::interval(Duration::from_secs(5));
    loop {
        ticks.tick().await;
        handle.run_upkeep();
    }
}

/// `GET /metrics` with `Authorization: Bearer <AGENTIC_METRICS_TOKEN>`.
pub(crate) async fn scrape(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let (Some(expected), Some(handle)) = (&state.inner.config.metrics_token, handle()) else {
        return ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "metrics are off; set AGENTIC_METRICS_TOKEN to serve them",
        )
        .into_response();
    };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    if !presented
        .is_some_and(|token| crate::auth::constant_time_eq(token.as_bytes(), expected.as_bytes()))
    {
        return ApiError::unauthorized("the metrics token is required").into_response();
    }
    handle.run_upkeep();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        handle.render(),
    )
        .into_response()
}

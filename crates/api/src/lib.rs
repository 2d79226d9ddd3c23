//! The agentic HTTP API over axum: every route under `/api`, server-sent events, an OpenAPI
//! document that needs no network, per-user limits, and a shutdown that loses nothing.
//!
//! ```no_run
//! # async fn example(service: agentic_conversation::ConversationService) -> anyhow::Result<()> {
//! let config = agentic_api::ApiConfig::from_env(&service.runtime().services().config)?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! agentic_api::serve(listener, service, config, agentic_api::shutdown_signal()).await?;
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

pub mod auth;
pub mod error;
mod events;
pub mod export;
pub mod metrics;
pub mod openapi;
mod playground;
mod routes;
pub mod types;

use std::collections::HashMap;
use std::future::Future;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agentic_conversation::ConversationService;
use agentic_core::Config;
use anyhow::Context as _;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use auth::USER_HEADER;
pub use error::ApiError;

/// The largest request body accepted.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// Server settings: the `api` config section, `AGENTIC_API_TOKEN` for the token.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ApiConfig {
    /// When set, `Authorization: Bearer <token>` is required too. Never read from a file.
    #[serde(skip)]
    pub token: Option<String>,
    /// When set, `/metrics` serves Prometheus text to this bearer token (and only to it):
    /// `AGENTIC_METRICS_TOKEN`. Never read from a file.
    #[serde(skip)]
    pub metrics_token: Option<String>,
    /// Prompts one user may have running at once.
    pub max_running_per_user: usize,
    /// Requests one user may make per minute, with `burst` allowed at once.
    pub requests_per_minute: u32,
    pub burst: u32,
    /// Seconds between keep-alive comments on an idle event stream.
    pub keep_alive_seconds: u64,
    /// Seconds a request body may take to arrive in full; a slower one gets a 408.
    pub body_timeout_seconds: u64,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            token: None,
            metrics_token: None,
            max_running_per_user: 4,
            requests_per_minute: 600,
            burst: 60,
            keep_alive_seconds: 15,
            body_timeout_seconds: 10,
        }
    }
}

impl ApiConfig {
    /// The `api` section of the config, with the token from `AGENTIC_API_TOKEN`.
    pub fn from_env(config: &Config) -> anyhow::Result<Self> {
        let section = config.section("api");
        let mut settings: Self = if section.is_null() {
            Self::default()
        } else {
            serde_json::from_value(section).context("invalid `api` config section")?
        };
        settings.token = std::env::var("AGENTIC_API_TOKEN")
            .ok()
            .filter(|token| !token.is_empty());
        settings.metrics_token = std::env::var("AGENTIC_METRICS_TOKEN")
            .ok()
            .filter(|token| !token.is_empty());
        anyhow::ensure!(
            settings.max_running_per_user >= 1,
            "api.maxRunningPerUser must be at least 1"
        );
        anyhow::ensure!(
            settings.body_timeout_seconds >= 1,
            "api.bodyTimeoutSeconds must be at least 1"
        );
        anyhow::ensure!(
            settings.requests_per_minute >= 1 && settings.burst >= 1,
            "api.requestsPerMinute and api.burst must be at least 1"
        );
        Ok(settings)
    }
}

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").finish_non_exhaustive()
    }
}

struct Inner {
    service: ConversationService,
    config: ApiConfig,
    limiter: DefaultKeyedRateLimiter<String>,
    running: Mutex<HashMap<String, usize>>,
    /// Told whenever a slot is released.
    released: tokio::sync::Notify,
    /// Background prompt runs, so shutdown can stop them before recording them interrupted.
    tasks: TaskTracker,
    /// Cancelled at shutdown: ends event streams and prompt runs.
    stopping: CancellationToken,
}

impl AppState {
    /// How long a request body may take to arrive.
    pub(crate) fn body_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.inner.config.body_timeout_seconds)
    }

    pub fn new(service: ConversationService, config: ApiConfig) -> Self {
        let per_minute = NonZeroU32::new(config.requests_per_minute).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(config.burst).unwrap_or(NonZeroU32::MIN);
        let limiter = RateLimiter::keyed(Quota::per_minute(per_minute).allow_burst(burst));
        Self {
            inner: Arc::new(Inner {
                service,
                config,
                limiter,
                running: Mutex::default(),
                released: tokio::sync::Notify::new(),
                tasks: TaskTracker::new(),
                stopping: CancellationToken::new(),
            }),
        }
    }

    pub fn service(&self) -> &ConversationService {
        &self.inner.service
    }

    /// Takes one of the user's running-prompt slots, or answers 429. A prompt's slot is
    /// released just after its final state is stored, so a request at the limit waits a
    /// moment for one (a client that saw its prompt complete may start the next at once).
    async fn take_slot(&self, user: &str) -> Result<RunningSlot, ApiError> {
        let deadline = tokio::time::Instant::now() + SLOT_GRACE;
        loop {
            let released = self.inner.released.notified();
            if let Some(slot) = self.try_slot(user) {
                return Ok(slot);
            }
            if tokio::time::timeout_at(deadline, released).await.is_err() {
                return self.try_slot(user).ok_or_else(|| {
                    ApiError::too_many(
                        format!(
                            "{} prompts are already running for this user; wait for one to finish",
                            self.inner.config.max_running_per_user
                        ),
                        1,
                    )
                });
            }
        }
    }

    fn try_slot(&self, user: &str) -> Option<RunningSlot> {
        let mut running = self
            .inner
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let count = running.entry(user.to_owned()).or_default();
        if *count >= self.inner.config.max_running_per_user {
            return None;
        }
        *count += 1;
        Some(RunningSlot {
            state: self.clone(),
            user: user.to_owned(),
        })
    }

    /// Runs `work` in the background until it ends or the server stops, in the span of the
    /// request that started it (so a prompt's trace hangs off its request).
    fn spawn(&self, slot: RunningSlot, work: impl Future<Output = ()> + Send + 'static) {
        let stopping = self.inner.stopping.clone();
        let work = tracing::Instrument::in_current_span(work);
        self.inner.tasks.spawn(async move {
            let _slot = slot;
            tokio::select! {
                () = stopping.cancelled() => {}
                () = work => {}
            }
        });
    }
}

/// A running prompt's hold on its user's limit; released when dropped.
struct RunningSlot {
    state: AppState,
    user: String,
}

impl Drop for RunningSlot {
    fn drop(&mut self) {
        let mut running = self
            .state
            .inner
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = running.get_mut(&self.user) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                running.remove(&self.user);
            }
        }
        drop(running);
        self.state.inner.released.notify_waiters();
    }
}

/// How long a request at the running-prompt limit waits for a slot before the 429.
const SLOT_GRACE: std::time::Duration = std::time::Duration::from_millis(250);

/// Every route, with authentication, limits, JSON errors, and one log line per request.
pub fn router(state: AppState) -> Router {
    router_with(state, Router::new())
}

/// [`router`] with `extra` routes (another crate's, such as `/mcp`) behind the same
/// authentication, limits and logs.
pub fn router_with(state: AppState, extra: Router<AppState>) -> Router {
    routes::routes()
        .merge(openapi::docs())
        .merge(playground::routes())
        .merge(extra)
        .route("/metrics", axum::routing::get(metrics::scrape))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(
            tower_http::trace::TraceLayer::new_for_http()
                .make_span_with(request_span)
                .on_request(())
                .on_response(request_done)
                .on_body_chunk(())
                .on_eos(())
                .on_failure(()),
        )
        .with_state(state)
}

/// `request{http.request.method=GET http.route=/api/prompts/{id} user.id=alice}: status=200
/// ms=3` at info, for every request, refused ones included (with the `error.code` the client
/// got): the route is the pattern, not the
/// path, so ids stay out of it. The user is the one the request names; a 5xx also logs its
/// cause (see [`ApiError`]). Field names are OpenTelemetry's HTTP conventions, so the span is
/// also the server span of a trace; a W3C `traceparent` header makes it the child of the
/// caller's span (when traces are exported; otherwise the header is ignored).
fn request_span(request: &axum::http::Request<axum::body::Body>) -> tracing::Span {
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or("(no route)", axum::extract::MatchedPath::as_str);
    let user = request
        .headers()
        .get(USER_HEADER)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("-");
    let method = request.method();
    let span = tracing::info_span!(
        "request",
        otel.name = %format_args!("{method} {route}"),
        otel.kind = "server",
        http.request.method = %method,
        http.route = route,
        user.id = user,
        http.response.status_code = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&opentelemetry_http::HeaderExtractor(request.headers()))
    });
    // Fails only when no OpenTelemetry layer is installed: then there is no trace to join.
    let _ = tracing_opentelemetry::OpenTelemetrySpanExt::set_parent(&span, parent);
    span
}

fn request_done(
    response: &axum::http::Response<axum::body::Body>,
    latency: std::time::Duration,
    span: &tracing::Span,
) {
    let status = response.status();
    span.record("http.response.status_code", i64::from(status.as_u16()));
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
    let code = response
        .extensions()
        .get::<error::ErrorCode>()
        .map(|code| code.0);
    tracing::info!(
        status = status.as_u16(),
        error.code = code,
        ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
    );
}

/// Serves until `shutdown` resolves; then stops accepting, ends event streams, stops the
/// prompts still running, records them `interrupted` and closes the database.
pub async fn serve(
    listener: tokio::net::TcpListener,
    service: ConversationService,
    config: ApiConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    serve_with(listener, service, config, Router::new(), shutdown).await
}

/// [`serve`] with `extra` routes behind the API's authentication (see [`router_with`]).
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    service: ConversationService,
    config: ApiConfig,
    extra: Router<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    if config.metrics_token.is_some() {
        metrics::install()?;
    }
    let upkeep = metrics::handle()
        .filter(|_| config.metrics_token.is_some())
        .map(|handle| tokio::spawn(metrics::upkeep(handle)));
    let state = AppState::new(service, config);
    let app = router_with(state.clone(), extra);
    // Forget the rate of users who went quiet, so made-up ids do not pile up.
    let pruning = {
        let state = state.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(Duration::from_secs(60));
            loop {
                ticks.tick().await;
                state.inner.limiter.retain_recent();
                state.inner.limiter.shrink_to_fit();
            }
        })
    };
    let stopping = state.inner.stopping.clone();
    let signal = async move {
        shutdown.await;
        tracing::info!("shutting down");
        stopping.cancel();
    };
    axum::serve(listener, app)
        .with_graceful_shutdown(signal)
        .await
        .context("the server failed")?;
    pruning.abort();
    if let Some(upkeep) = upkeep {
        upkeep.abort();
    }
    state.inner.stopping.cancel();
    state.inner.tasks.close();
    if tokio::time::timeout(Duration::from_secs(10), state.inner.tasks.wait())
        .await
        .is_err()
    {
        tracing::warn!("prompt tasks did not stop within 10 s");
    }
    let interrupted = state.inner.service.shutdown().await?;
    if !interrupted.is_empty() {
        tracing::info!(
            prompts = interrupted.len(),
            "marked in-flight prompts interrupted"
        );
    }
    state.inner.service.store().clone().close().await?;
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}

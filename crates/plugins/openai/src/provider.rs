//! The provider: one POST per request, retried like the official SDKs, then the SSE stream
//! read chunk by chunk with an idle timeout.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentic_core::{
    ModelEvent, ModelKind, ModelProvider, ModelRequest, ModelStream, ProviderError,
};
use anyhow::Context as _;
use async_trait::async_trait;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use reqwest::header::HeaderMap;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::config::OpenAiConfig;
use crate::names::ToolNameMap;
use crate::stream::ChunkReader;
use crate::wire::{name_map, request_body};

/// Longest server-requested wait we honour; longer ones fall back to our own backoff.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// An OpenAI-compatible Chat Completions client.
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    config: OpenAiConfig,
    client: reqwest::Client,
}

impl OpenAiProvider {
    pub fn new(config: OpenAiConfig) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(config.connect_timeout_ms))
            .build()
            .context("could not build the HTTP client")?;
        Ok(Self { config, client })
    }

    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// Posts the serialised body (shared between attempts: neither re-serialised nor copied).
    async fn send_with_retries(
        &self,
        body: bytes::Bytes,
    ) -> Result<reqwest::Response, ProviderError> {
        let url = self.config.chat_completions_url();
        let idle = Duration::from_millis(self.config.idle_timeout_ms);
        let mut attempt = 0;
        loop {
            let mut request = self
                .client
                .post(&url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone());
            if let Some(key) = &self.config.api_key {
                request = request.bearer_auth(key);
            }
            let outcome = match tokio::time::timeout(idle, request.send()).await {
                Ok(outcome) => outcome,
                Err(_) => {
                    let error = ProviderError::Connection(format!(
                        "no response from {url} within {} ms",
                        idle.as_millis()
                    ));
                    if attempt < self.config.max_retries {
                        self.wait_before_retry(attempt, None).await;
                        attempt += 1;
                        continue;
                    }
                    return Err(error);
                }
            };
            match outcome {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) => {
                    let status = response.status().as_u16();
                    let headers = response.headers().clone();
                    if attempt < self.config.max_retries && should_retry(status, &headers) {
                        tracing::warn!(status, attempt, "model provider error, retrying");
                        self.wait_before_retry(attempt, retry_after(&headers)).await;
                        attempt += 1;
                        continue;
                    }
                    let body = response.text().await.unwrap_or_default();
                    return Err(ProviderError::Status {
                        status,
                        message: error_message(&body),
                    });
                }
                Err(error) => {
                    let error =
                        ProviderError::Connection(format!("{url}: {}", error_chain(&error)));
                    if attempt < self.config.max_retries {
                        tracing::warn!(%error, attempt, "model provider unreachable, retrying");
                        self.wait_before_retry(attempt, None).await;
                        attempt += 1;
                        continue;
                    }
                    return Err(error);
                }
            }
        }
    }

    async fn wait_before_retry(&self, attempt: u32, server_asked: Option<Duration>) {
        let delay = server_asked.unwrap_or_else(|| {
            let base = self.config.retry_base_delay_ms as f64 / 1000.0;
            let max = self.config.retry_max_delay_ms as f64 / 1000.0;
            let exponential = (base * 2f64.powi(attempt.min(30) as i32)).min(max);
            // Up to 25% less, so clients that failed together do not retry together.
            Duration::from_secs_f64(exponential * (1.0 - 0.25 * fastrand::f64()))
        });
        tokio::time::sleep(delay).await;
    }
}

#[async_trait]
impl ModelProvider for OpenAiProvider {
    fn id(&self) -> &str {
        "openai"
    }

    fn model_name(&self, kind: ModelKind) -> String {
        match kind {
            ModelKind::Normal => self.config.models.normal.clone(),
            ModelKind::High => self.config.models.high.clone(),
        }
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        let model = self.model_name(request.model);
        let names = name_map(&request);
        // Straight to bytes: a JSON value in between was a third copy of every tool schema.
        let body = serde_json::to_vec(&request_body(&request, &model, &names, &self.config))
            .map_err(|error| ProviderError::Config(format!("unserialisable request: {error}")))?;
        let response = self.send_with_retries(body.into()).await?;
        let idle = Duration::from_millis(self.config.idle_timeout_ms);
        let (sender, receiver) = mpsc::channel(64);
        let is_event_stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        let answer = Answer {
            names,
            model,
            idle,
            request,
        };
        if is_event_stream {
            tokio::spawn(read_event_stream(response, answer, sender));
        } else {
            // A server that ignored `stream: true` answers with one JSON body.
            tokio::spawn(read_json_answer(response, answer, sender));
        }
        Ok(Box::pin(futures::stream::unfold(
            receiver,
            |mut receiver| async move { receiver.recv().await.map(|item| (item, receiver)) },
        )))
    }
}

type Sender = mpsc::Sender<Result<ModelEvent, ProviderError>>;

/// What reading an answer needs besides the response.
struct Answer {
    names: ToolNameMap,
    model: String,
    idle: Duration,
    /// Kept for a usage estimate when the server reports none.
    request: ModelRequest,
}

async fn read_event_stream(response: reqwest::Response, answer: Answer, sender: Sender) {
    let idle = answer.idle;
    // Any bytes are activity, SSE comments included: the event parser drops `: ping`
    // comments, which a server busy with a long prefill sends and nothing else.
    let started = Instant::now();
    let last_bytes = Arc::new(AtomicU64::new(0));
    let seen = last_bytes.clone();
    let bytes = response.bytes_stream().inspect(move |_| {
        let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        seen.store(elapsed, Ordering::Relaxed);
    });
    let mut events = bytes.eventsource();
    let mut reader = ChunkReader::default();
    let mut done = false;
    loop {
        let mut wait = idle;
        let next = loop {
            match tokio::time::timeout(wait, events.next()).await {
                Ok(next) => break Some(next),
                Err(_) => {
                    let last = Duration::from_millis(last_bytes.load(Ordering::Relaxed));
                    let quiet = started.elapsed().saturating_sub(last);
                    if quiet >= idle {
                        break None;
                    }
                    wait = idle - quiet;
                }
            }
        };
        let Some(next) = next else {
            let error = ProviderError::Stream(format!(
                "the stream stalled: nothing arrived for {} ms",
                idle.as_millis()
            ));
            let _ = sender.send(Err(error)).await;
            return;
        };
        let event = match next {
            None => break,
            Some(Ok(event)) => event,
            Some(Err(error)) => {
                let message = format!("the connection broke mid-stream: {error}");
                let _ = sender.send(Err(ProviderError::Stream(message))).await;
                return;
            }
        };
        let data = event.data.trim();
        if data.is_empty() {
            continue;
        }
        if data == "[DONE]" {
            done = true;
            break;
        }
        let chunk: Value = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(error) => {
                let message = format!("unreadable chunk ({error}): {}", shorten(data));
                let _ = sender.send(Err(ProviderError::Stream(message))).await;
                return;
            }
        };
        match reader.read(&chunk) {
            Ok(deltas) => {
                for delta in deltas {
                    if sender.send(Ok(delta)).await.is_err() {
                        return;
                    }
                }
            }
            Err(error) => {
                let _ = sender.send(Err(error)).await;
                return;
            }
        }
    }
    if !done && !reader.finished() {
        let error = ProviderError::Stream(
            "the stream ended before the model finished (no finish_reason and no [DONE])"
                .to_owned(),
        );
        let _ = sender.send(Err(error)).await;
        return;
    }
    for event in reader.finish(&answer.names, &answer.model, &answer.request) {
        if sender.send(Ok(event)).await.is_err() {
            return;
        }
    }
}

async fn read_json_answer(response: reqwest::Response, answer: Answer, sender: Sender) {
    let idle = answer.idle;
    let body = match tokio::time::timeout(idle, response.text()).await {
        Ok(Ok(body)) => body,
        Ok(Err(error)) => {
            let message = format!("the connection broke: {}", error_chain(&error));
            let _ = sender.send(Err(ProviderError::Stream(message))).await;
            return;
        }
        Err(_) => {
            let message = format!("no answer within {} ms", idle.as_millis());
            let _ = sender.send(Err(ProviderError::Stream(message))).await;
            return;
        }
    };
    let mut reader = ChunkReader::default();
    let events = serde_json::from_str::<Value>(&body)
        .map_err(|error| {
            ProviderError::Stream(format!("unreadable answer ({error}): {}", shorten(&body)))
        })
        .and_then(|answer| reader.read(&answer));
    match events {
        Ok(events) => {
            let finished = reader.finish(&answer.names, &answer.model, &answer.request);
            for event in events.into_iter().chain(finished) {
                if sender.send(Ok(event)).await.is_err() {
                    return;
                }
            }
        }
        Err(error) => {
            let _ = sender.send(Err(error)).await;
        }
    }
}

/// Retry rules of the official SDKs: an `x-should-retry` header decides when present;
/// otherwise 408, 409, 429 and 5xx are retried and everything else is not.
fn should_retry(status: u16, headers: &HeaderMap) -> bool {
    match headers
        .get("x-should-retry")
        .and_then(|value| value.to_str().ok())
    {
        Some("true") => true,
        Some("false") => false,
        _ => matches!(status, 408 | 409 | 429) || status >= 500,
    }
}

/// The wait a server asked for with `retry-after-ms` or `retry-after` (seconds or an HTTP
/// date), when it is between 0 and 60 seconds.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let asked = header("retry-after-ms")
        .and_then(|ms| ms.trim().parse::<f64>().ok())
        .map(|ms| ms / 1000.0)
        .or_else(|| {
            let value = header("retry-after")?.trim();
            value
                .parse::<f64>()
                .ok()
                .or_else(|| seconds_until_http_date(value))
        })?;
    (asked.is_finite() && asked >= 0.0)
        .then(|| Duration::from_secs_f64(asked))
        .filter(|wait| *wait <= MAX_RETRY_AFTER)
}

/// Seconds from now until an HTTP date (`Wed, 21 Oct 2015 07:28:00 GMT`); 0 when it passed.
fn seconds_until_http_date(value: &str) -> Option<f64> {
    let date = httpdate::parse_http_date(value).ok()?;
    let now = std::time::SystemTime::now();
    Some(
        date.duration_since(now)
            .map_or(0.0, |wait| wait.as_secs_f64()),
    )
}

/// The `error.message` of an OpenAI error body, or the body itself.
fn error_message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|value| {
            value
                .get("error")
                .and_then(|error| error.get("message").or(Some(error)))
                .and_then(|message| message.as_str().map(str::to_owned))
        })
        .unwrap_or_else(|| shorten(body.trim()))
}

fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn shorten(text: &str) -> String {
    const MAX: usize = 300;
    if text.chars().count() <= MAX {
        text.to_owned()
    } else {
        format!("{}…", text.chars().take(MAX).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn retry_rules_follow_the_official_sdks() {
        for status in [408, 409, 429, 500, 502, 503, 504] {
            assert!(should_retry(status, &HeaderMap::new()), "{status}");
        }
        for status in [400, 401, 403, 404, 422] {
            assert!(!should_retry(status, &HeaderMap::new()), "{status}");
        }
        assert!(!should_retry(503, &headers(&[("x-should-retry", "false")])));
        assert!(should_retry(400, &headers(&[("x-should-retry", "true")])));
    }

    #[test]
    fn retry_after_is_honoured_up_to_a_minute() {
        assert_eq!(
            retry_after(&headers(&[("retry-after-ms", "250")])),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "2")])),
            Some(Duration::from_secs(2))
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "61")])), None);
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")])), None);
        // A date in the past means "now".
        assert_eq!(
            retry_after(&headers(&[(
                "retry-after",
                "Sun, 06 Nov 1994 08:49:37 GMT"
            )])),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn error_bodies_are_summarised() {
        assert_eq!(
            error_message(r#"{"error": {"message": "Incorrect API key provided"}}"#),
            "Incorrect API key provided"
        );
        assert_eq!(error_message("Bad Gateway"), "Bad Gateway");
    }
}

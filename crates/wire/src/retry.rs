//! One POST, retried as the official SDKs retry.

use std::time::Duration;

use agentic_core::ProviderError;
use reqwest::header::HeaderMap;

/// Longest server-requested wait we honour; longer ones fall back to our own backoff.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// How a request is retried and how long its answer may be silent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// First retry delay; it doubles per retry up to `max_delay`.
    pub base_delay: Duration,
    /// The longest delay between two attempts, unless the server asks for longer.
    pub max_delay: Duration,
    /// How long to wait for the response's headers.
    pub idle: Duration,
}

impl Retry {
    /// Settings given in milliseconds, as the providers' config sections give them.
    pub fn from_millis(
        max_retries: u32,
        base_delay_ms: u64,
        max_delay_ms: u64,
        idle_ms: u64,
    ) -> Self {
        Self {
            max_retries,
            base_delay: Duration::from_millis(base_delay_ms),
            max_delay: Duration::from_millis(max_delay_ms),
            idle: Duration::from_millis(idle_ms),
        }
    }

    /// The wait before retry `attempt` (0 for the first): what the server asked for, else an
    /// exponential backoff with up to 25% jitter, so that clients that failed together do not
    /// retry together.
    pub fn delay(&self, attempt: u32, server_asked: Option<Duration>) -> Duration {
        server_asked.unwrap_or_else(|| {
            let base = self.base_delay.as_secs_f64();
            let exponential =
                (base * 2f64.powi(attempt.min(30) as i32)).min(self.max_delay.as_secs_f64());
            Duration::from_secs_f64(exponential * (1.0 - 0.25 * fastrand::f64()))
        })
    }
}

/// The HTTP client a provider sends with: connecting may take `connect_timeout_ms`; how
/// long an answer may be silent is [`Retry::idle`]'s to say, per request.
///
/// # Errors
/// When the TLS backend cannot be initialised.
pub fn client(connect_timeout_ms: u64) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_millis(connect_timeout_ms))
        .build()
}

/// Sends the request `build` makes (once per attempt) until it succeeds, retrying what
/// [`should_retry`] allows and a connection that failed or stayed silent for `retry.idle`.
/// An error status that is not retried, or the last one, becomes [`ProviderError::Status`]
/// with the body as `error_message` reads it.
pub async fn send(
    url: &str,
    build: impl Fn() -> reqwest::RequestBuilder,
    retry: &Retry,
    error_message: fn(&str) -> String,
) -> Result<reqwest::Response, ProviderError> {
    let mut attempt = 0;
    loop {
        let (error, server_asked) = match tokio::time::timeout(retry.idle, build().send()).await {
            Err(_) => (
                ProviderError::Connection(format!(
                    "no response from {url} within {} ms",
                    retry.idle.as_millis()
                )),
                None,
            ),
            Ok(Ok(response)) if response.status().is_success() => return Ok(response),
            Ok(Ok(response)) => {
                let status = response.status().as_u16();
                let headers = response.headers().clone();
                if attempt < retry.max_retries && should_retry(status, &headers) {
                    tracing::warn!(status, attempt, "model provider error, retrying");
                    tokio::time::sleep(retry.delay(attempt, retry_after(&headers))).await;
                    attempt += 1;
                    continue;
                }
                let body = response.text().await.unwrap_or_default();
                return Err(ProviderError::Status {
                    status,
                    message: error_message(&body),
                });
            }
            Ok(Err(error)) => (
                ProviderError::Connection(format!("{url}: {}", error_chain(&error))),
                None,
            ),
        };
        if attempt >= retry.max_retries {
            return Err(error);
        }
        tracing::warn!(%error, attempt, "model provider unreachable, retrying");
        tokio::time::sleep(retry.delay(attempt, server_asked)).await;
        attempt += 1;
    }
}

/// Retry rules of the official SDKs: an `x-should-retry` header decides when present;
/// otherwise 408, 409, 429 and 5xx (Anthropic's 529 "overloaded" among them) are retried and
/// everything else is not.
pub fn should_retry(status: u16, headers: &HeaderMap) -> bool {
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
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
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

/// An error with its causes, `: `-separated.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `text` cut to 300 characters, for quoting a server's words in an error.
pub fn shorten(text: &str) -> String {
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
        for status in [408, 409, 429, 500, 502, 503, 504, 529] {
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
}

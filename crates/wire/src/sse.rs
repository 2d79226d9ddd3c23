//! Server-sent events read one at a time, with an idle timeout that any bytes reset.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentic_core::ProviderError;
use eventsource_stream::Eventsource as _;
use futures::{Stream, StreamExt as _};

/// One event: its `event:` name (empty when the server sent none) and its `data:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field.
    pub event: String,
    /// The `data:` lines, joined.
    pub data: String,
}

type Events = Pin<Box<dyn Stream<Item = Result<SseEvent, String>> + Send>>;

/// Reads a response's event stream. A stream that sends nothing for `idle` is an error; any
/// bytes count, SSE comments such as the `: ping` a server busy with a long prefill sends
/// included, which the event parser otherwise drops.
pub struct SseReader {
    events: Events,
    started: Instant,
    last_bytes: Arc<AtomicU64>,
    idle: Duration,
}

impl std::fmt::Debug for SseReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseReader")
            .field("idle", &self.idle)
            .finish_non_exhaustive()
    }
}

impl SseReader {
    /// Reads `response`'s body as server-sent events.
    pub fn new(response: reqwest::Response, idle: Duration) -> Self {
        let started = Instant::now();
        let last_bytes = Arc::new(AtomicU64::new(0));
        let seen = last_bytes.clone();
        let bytes = response.bytes_stream().inspect(move |_| {
            let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            seen.store(elapsed, Ordering::Relaxed);
        });
        let events = bytes.eventsource().map(|next| {
            next.map(|event| SseEvent {
                event: event.event,
                data: event.data,
            })
            .map_err(|error| error.to_string())
        });
        Self {
            events: Box::pin(events),
            started,
            last_bytes,
            idle,
        }
    }

    /// The next event, or `None` when the stream ended. A stall or a broken connection is a
    /// [`ProviderError::Stream`] that says which.
    pub async fn next(&mut self) -> Result<Option<SseEvent>, ProviderError> {
        let mut wait = self.idle;
        let next = loop {
            match tokio::time::timeout(wait, self.events.next()).await {
                Ok(next) => break next,
                Err(_) => {
                    let last = Duration::from_millis(self.last_bytes.load(Ordering::Relaxed));
                    let quiet = self.started.elapsed().saturating_sub(last);
                    if quiet >= self.idle {
                        return Err(ProviderError::Stream(format!(
                            "the stream stalled: nothing arrived for {} ms",
                            self.idle.as_millis()
                        )));
                    }
                    wait = self.idle - quiet;
                }
            }
        };
        match next {
            None => Ok(None),
            Some(Ok(event)) => Ok(Some(event)),
            Some(Err(error)) => Err(ProviderError::Stream(format!(
                "the connection broke mid-stream: {error}"
            ))),
        }
    }
}

/// Whether `response` is an event stream (a server that ignored `stream: true`, or an error
/// page, is not).
pub fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"))
}

/// The items a reader task sends, as the stream a provider returns; dropping the stream
/// closes the channel, which tells the task to stop.
pub fn receiver_stream<T: Send + 'static>(
    receiver: tokio::sync::mpsc::Receiver<T>,
) -> Pin<Box<dyn Stream<Item = T> + Send>> {
    Box::pin(futures::stream::unfold(
        receiver,
        |mut receiver| async move { receiver.recv().await.map(|item| (item, receiver)) },
    ))
}

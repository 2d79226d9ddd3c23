//! A real HTTP server on 127.0.0.1 for testing model providers against their wire formats:
//! it answers each request with the next scripted [`Reply`] (a recorded event stream, an
//! error status, a stall, a slow stream) and records what the provider sent.
//!
//! Streams go out in pieces of [`PIECE_BYTES`] bytes, so a provider's reader meets lines and
//! events cut mid-way, as it does from real servers behind proxies.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use futures::StreamExt as _;
use serde_json::Value;

/// How many bytes each write of a stream carries.
pub const PIECE_BYTES: usize = 40;

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A whole event stream (`text/event-stream`), in pieces of [`PIECE_BYTES`].
    Stream(String),
    /// A whole event stream in one write, for measuring a client rather than its resilience.
    Whole(String),
    /// An event stream with a pause before each event: a client may drop it part-way.
    Slow(String, Duration),
    /// The stream's first `events` events, then silence with the connection open.
    StallAfter(String, usize),
    /// An error status with these headers and this body.
    Status {
        /// The HTTP status.
        status: u16,
        /// Headers to send, such as `retry-after`.
        headers: Vec<(String, String)>,
        /// The body, sent as JSON.
        body: String,
    },
}

impl Reply {
    /// An error status with a `retry-after` header of `seconds`.
    pub fn status_retry_after(status: u16, seconds: u64, body: &str) -> Self {
        Self::Status {
            status,
            headers: vec![("retry-after".to_owned(), seconds.to_string())],
            body: body.to_owned(),
        }
    }

    /// An error status without extra headers.
    pub fn status(status: u16, body: &str) -> Self {
        Self::Status {
            status,
            headers: Vec::new(),
            body: body.to_owned(),
        }
    }
}

/// A request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Path and query.
    pub uri: String,
    /// Headers, names in lower case.
    pub headers: BTreeMap<String, String>,
    /// The body as JSON (`null` when it was not JSON).
    pub body: Value,
}

#[derive(Debug, Clone, Default)]
struct Shared {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    requests: Arc<Mutex<Vec<Recorded>>>,
    /// Streams whose client went away before the last event was sent.
    dropped: Arc<AtomicUsize>,
}

/// The server; it stops when dropped.
#[derive(Debug)]
pub struct FakeServer {
    base_url: String,
    shared: Shared,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeServer {
    /// Starts a server on a free port of 127.0.0.1 that answers any POST with `replies`, in
    /// order, then with 500s.
    pub async fn start(replies: Vec<Reply>) -> std::io::Result<Self> {
        let shared = Shared::default();
        lock(&shared.replies).extend(replies);
        let app = Router::new().fallback(answer).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            base_url: format!("http://{address}"),
            shared,
            server,
        })
    }

    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The requests received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.requests).clone()
    }

    /// How many streams lost their client before their last event.
    pub fn dropped_streams(&self) -> usize {
        self.shared.dropped.load(Ordering::SeqCst)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A recorded stream from `dir/name`.
///
/// # Panics
/// When the file cannot be read: a fixture that is missing is a broken test.
pub fn fixture(dir: &Path, name: &str) -> String {
    let path = dir.join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("fixture {}: {error}", path.display()))
}

/// The events of a stream, each with the blank line that ends it.
pub fn events(stream: &str) -> Vec<String> {
    let mut events = Vec::new();
    let mut current = String::new();
    for line in stream.split_inclusive('\n') {
        current.push_str(line);
        if line.trim().is_empty() {
            if !current.trim().is_empty() {
                events.push(std::mem::take(&mut current));
            } else {
                current.clear();
            }
        }
    }
    if !current.trim().is_empty() {
        events.push(current);
    }
    events
}

/// Counts a stream as dropped unless it was sent to the end.
struct DropWatch {
    finished: bool,
    dropped: Arc<AtomicUsize>,
}

impl DropWatch {
    fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for DropWatch {
    fn drop(&mut self) {
        if !self.finished {
            self.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }
}

async fn answer(
    State(shared): State<Shared>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    lock(&shared.requests).push(Recorded {
        uri: uri.to_string(),
        headers: headers
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_owned(),
                    value.to_str().unwrap_or_default().to_owned(),
                )
            })
            .collect(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    let reply = lock(&shared.replies).pop_front();
    match reply {
        Some(Reply::Stream(text)) => stream(pieces(&text), None, false, &shared),
        Some(Reply::Whole(text)) => stream(vec![text], None, false, &shared),
        Some(Reply::Slow(text, pause)) => stream(events(&text), Some(pause), false, &shared),
        Some(Reply::StallAfter(text, count)) => {
            let first = events(&text).into_iter().take(count).collect::<String>();
            stream(pieces(&first), None, true, &shared)
        }
        Some(Reply::Status {
            status,
            headers,
            body,
        }) => {
            let mut response = Response::builder()
                .status(status)
                .header("content-type", "application/json");
            for (name, value) in headers {
                response = response.header(name, value);
            }
            response
                .body(Body::from(body))
                .unwrap_or_else(|_| Response::new(Body::empty()))
        }
        None => Response::builder()
            .status(500)
            .body(Body::from("no scripted reply left"))
            .unwrap_or_else(|_| Response::new(Body::empty())),
    }
}

fn pieces(text: &str) -> Vec<String> {
    text.as_bytes()
        .chunks(PIECE_BYTES)
        .map(|piece| String::from_utf8_lossy(piece).into_owned())
        .collect()
}

/// A `text/event-stream` response sending `writes` in order, pausing before each when asked,
/// and staying open afterwards when `stall`.
fn stream(writes: Vec<String>, pause: Option<Duration>, stall: bool, shared: &Shared) -> Response {
    let watch = DropWatch {
        finished: false,
        dropped: shared.dropped.clone(),
    };
    let state = (writes.into_iter(), watch);
    let body = futures::stream::unfold(state, move |(mut writes, mut watch)| async move {
        match writes.next() {
            Some(write) => {
                if let Some(pause) = pause {
                    tokio::time::sleep(pause).await;
                }
                Some((Ok::<_, Infallible>(write), (writes, watch)))
            }
            None => {
                if stall {
                    tokio::time::sleep(Duration::from_secs(3_600)).await;
                }
                watch.finish();
                None
            }
        }
    })
    .boxed();
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

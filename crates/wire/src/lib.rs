//! HTTP plumbing the model providers share, knowing nothing of any provider's wire format:
//! a POST retried as the official SDKs retry ([`send`]), server-sent events read with an idle
//! timeout ([`SseReader`]) into the stream a provider returns ([`event_stream`], with the
//! provider's [`EventRead`]), and tool ids mapped to the names providers accept
//! ([`ToolNameMap`]).
#![forbid(unsafe_code)]

mod events;
mod names;
mod retry;
mod sse;

pub use events::{EventRead, event_stream};
pub use names::ToolNameMap;
pub use retry::{Retry, client, error_chain, retry_after, send, shorten, should_retry};
pub use sse::{SseEvent, SseParser, SseReader, is_event_stream, sse_events};

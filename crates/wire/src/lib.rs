//! HTTP plumbing the model providers share, knowing nothing of any provider's wire format:
//! a POST retried as the official SDKs retry ([`send`]), server-sent events read with an idle
//! timeout ([`SseReader`]), and tool ids mapped to the names providers accept
//! ([`ToolNameMap`]).
#![forbid(unsafe_code)]

mod names;
mod retry;
mod sse;

pub use names::ToolNameMap;
pub use retry::{Retry, error_chain, retry_after, send, shorten, should_retry};
pub use sse::{SseEvent, SseReader, is_event_stream, receiver_stream};

//! Server-sent events read one at a time, with an idle timeout that any bytes reset.
//!
//! The parser keeps one buffer and a read position, so a network read that carries many
//! events (a fast model, a proxy that batches) is parsed in one pass; a parser that copies
//! the rest of its buffer after each line turns such a read quadratic.

use std::pin::Pin;
use std::time::Duration;

use agentic_core::ProviderError;
use bytes::Bytes;
use futures::{Stream, StreamExt as _};

/// One event: its `event:` name (empty when the server sent none) and its `data:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field.
    pub event: String,
    /// The `data:` lines, joined.
    pub data: String,
}

type Chunks = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// Reads a response's event stream. A stream that sends nothing for `idle` is an error; any
/// bytes count, SSE comments such as the `: ping` a server busy with a long prefill sends
/// included.
pub struct SseReader {
    chunks: Chunks,
    parser: SseParser,
    idle: Duration,
    ended: bool,
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
        Self {
            chunks: Box::pin(response.bytes_stream()),
            parser: SseParser::default(),
            idle,
            ended: false,
        }
    }

    /// The next event, or `None` when the stream ended. A stall or a broken connection is a
    /// [`ProviderError::Stream`] that says which.
    pub async fn next(&mut self) -> Result<Option<SseEvent>, ProviderError> {
        loop {
            if let Some(event) = self.parser.next_event() {
                return Ok(Some(event));
            }
            if self.ended {
                return Ok(None);
            }
            match tokio::time::timeout(self.idle, self.chunks.next()).await {
                Err(_) => {
                    return Err(ProviderError::Stream(format!(
                        "the stream stalled: nothing arrived for {} ms",
                        self.idle.as_millis()
                    )));
                }
                Ok(None) => {
                    self.ended = true;
                    self.parser.end();
                }
                Ok(Some(Ok(bytes))) => self.parser.push(&bytes),
                Ok(Some(Err(error))) => {
                    return Err(ProviderError::Stream(format!(
                        "the connection broke mid-stream: {}",
                        crate::error_chain(&error)
                    )));
                }
            }
        }
    }
}

/// An incremental parser of the event stream format: lines end with LF, CRLF or CR; `data:`
/// lines are joined with LF; a blank line ends an event; comments and `id:`/`retry:` are
/// skipped; an event cut off by the end of the stream is dropped.
#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
    /// Where unread bytes start.
    position: usize,
    event: String,
    data: String,
    has_data: bool,
    ended: bool,
}

impl SseParser {
    /// Adds bytes as they arrived.
    pub fn push(&mut self, bytes: &[u8]) {
        // Drop what was read before growing, so the buffer stays the size of a read.
        if self.position > 0 && self.position * 2 >= self.buffer.len() {
            self.buffer.drain(..self.position);
            self.position = 0;
        }
        self.buffer.extend_from_slice(bytes);
    }

    /// Marks the end of the stream: a last line without its line ending is still read.
    pub fn end(&mut self) {
        self.ended = true;
    }

    /// The next complete event, if the bytes so far hold one.
    pub fn next_event(&mut self) -> Option<SseEvent> {
        while let Some(line) = self.next_line() {
            if line.is_empty() {
                if self.has_data {
                    let mut data = std::mem::take(&mut self.data);
                    if data.ends_with('\n') {
                        data.pop();
                    }
                    self.has_data = false;
                    return Some(SseEvent {
                        event: std::mem::take(&mut self.event),
                        data,
                    });
                }
                self.event.clear();
                continue;
            }
            self.field(&line);
        }
        None
    }

    fn field(&mut self, line: &str) {
        if line.starts_with(':') {
            return;
        }
        let (name, value) = match line.split_once(':') {
            Some((name, value)) => (name, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match name {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            // `id` and `retry` are for reconnecting, which a model answer never does.
            _ => {}
        }
    }

    /// The next whole line, without its ending.
    fn next_line(&mut self) -> Option<String> {
        let rest = &self.buffer[self.position..];
        let Some(end) = rest
            .iter()
            .position(|byte| *byte == b'\n' || *byte == b'\r')
        else {
            if self.ended && !rest.is_empty() {
                let line = String::from_utf8_lossy(rest).into_owned();
                self.position = self.buffer.len();
                return Some(line);
            }
            return None;
        };
        let skip = if rest[end] == b'\r' {
            match rest.get(end + 1) {
                Some(b'\n') => 2,
                Some(_) => 1,
                // A CR at the end of what came: an LF may follow in the next read.
                None if !self.ended => return None,
                None => 1,
            }
        } else {
            1
        };
        let line = String::from_utf8_lossy(&rest[..end]).into_owned();
        self.position += end + skip;
        Some(line)
    }
}

/// The events of a stream of bytes, with no limit on how long it may be silent: for a
/// client that follows a long-lived stream (agentic's own API) rather than a model's answer.
/// An error of the byte stream ends it.
pub fn sse_events<E: Send + 'static>(
    chunks: impl Stream<Item = Result<Bytes, E>> + Send + 'static,
) -> Pin<Box<dyn Stream<Item = Result<SseEvent, E>> + Send>> {
    let state = (Box::pin(chunks), SseParser::default(), false);
    Box::pin(futures::stream::unfold(
        state,
        |(mut chunks, mut parser, mut ended)| async move {
            loop {
                if let Some(event) = parser.next_event() {
                    return Some((Ok(event), (chunks, parser, ended)));
                }
                if ended {
                    return None;
                }
                match chunks.next().await {
                    Some(Ok(bytes)) => parser.push(&bytes),
                    Some(Err(error)) => {
                        ended = true;
                        parser.end();
                        return Some((Err(error), (chunks, parser, ended)));
                    }
                    None => {
                        ended = true;
                        parser.end();
                    }
                }
            }
        },
    ))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn events(pieces: &[&str]) -> Vec<(String, String)> {
        let mut parser = SseParser::default();
        let mut out = Vec::new();
        for piece in pieces {
            parser.push(piece.as_bytes());
            while let Some(event) = parser.next_event() {
                out.push((event.event, event.data));
            }
        }
        parser.end();
        while let Some(event) = parser.next_event() {
            out.push((event.event, event.data));
        }
        out
    }

    #[test]
    fn events_are_read_across_any_cut() {
        let stream = "event: a\ndata: {\"x\": 1}\n\n: ping\n\ndata: two\r\ndata: lines\r\n\r\nevent: c\rdata:no space\r\r";
        let whole = events(&[stream]);
        assert_eq!(
            whole,
            [
                ("a".to_owned(), "{\"x\": 1}".to_owned()),
                (String::new(), "two\nlines".to_owned()),
                ("c".to_owned(), "no space".to_owned()),
            ]
        );
        for cut in 1..stream.len() {
            let (first, second) = stream.split_at(cut);
            assert_eq!(events(&[first, second]), whole, "cut at {cut}");
        }
        let bytes: Vec<String> = stream.chars().map(String::from).collect();
        let pieces: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(events(&pieces), whole);
    }

    #[test]
    fn an_event_cut_off_by_the_end_is_dropped_and_fields_are_reset() {
        assert_eq!(
            events(&["data: whole\n\ndata: cut"]),
            [(String::new(), "whole".to_owned())]
        );
        // An event name without data is not an event, and does not leak into the next.
        assert_eq!(
            events(&["event: lonely\n\ndata: x\n\n"]),
            [(String::new(), "x".to_owned())]
        );
    }

    #[tokio::test]
    async fn a_byte_stream_becomes_its_events_and_an_error_ends_it() {
        let chunks = futures::stream::iter(vec![
            Ok(Bytes::from_static(b"data: one\n\nda")),
            Ok(Bytes::from_static(b"ta: two\n\n")),
            Err("broken"),
            Ok(Bytes::from_static(b"data: never\n\n")),
        ]);
        let read: Vec<Result<String, &str>> = sse_events(chunks)
            .map(|event| event.map(|event| event.data))
            .collect()
            .await;
        assert_eq!(
            read,
            [Ok("one".to_owned()), Ok("two".to_owned()), Err("broken")]
        );
    }
}

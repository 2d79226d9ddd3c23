//! A provider's answer as the stream it returns: server-sent events read by the provider's
//! own [`EventRead`], polled by the caller itself, with no task or channel between them.
//! Dropping the stream drops the response, which closes the connection.

use std::collections::VecDeque;

use agentic_core::{ModelEvent, ModelStream, ProviderError};

use crate::sse::SseReader;

/// What a provider knows of its wire format: the events one SSE event's data gives, whether
/// the answer is complete, and what the end of the stream gives.
pub trait EventRead: Send + 'static {
    /// The events of one SSE event's `data` (trimmed, never empty); an error ends the stream
    /// after the events before it.
    fn read(&mut self, data: &str) -> Result<Vec<ModelEvent>, ProviderError>;

    /// True once the answer is complete (a closing event came): nothing more is read.
    fn finished(&self) -> bool;

    /// The closing events (usage, why the model stopped) once the answer is complete or the
    /// stream ended, or why ending there is an error (a stream cut before its closing event).
    fn finish(self) -> Result<Vec<ModelEvent>, ProviderError>
    where
        Self: Sized;
}

struct State<R> {
    events: SseReader,
    reader: Option<R>,
    queue: VecDeque<Result<ModelEvent, ProviderError>>,
}

/// The stream of `reader`'s events over `events`.
pub fn event_stream<R: EventRead>(events: SseReader, reader: R) -> ModelStream {
    let state = State {
        events,
        reader: Some(reader),
        queue: VecDeque::new(),
    };
    Box::pin(futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(item) = state.queue.pop_front() {
                return Some((item, state));
            }
            let reader = state.reader.as_mut()?;
            if reader.finished() {
                end(&mut state, Ok(()));
                continue;
            }
            match state.events.next().await {
                Ok(Some(event)) => {
                    let data = event.data.trim();
                    if data.is_empty() {
                        continue;
                    }
                    match reader.read(data) {
                        Ok(events) => state.queue.extend(events.into_iter().map(Ok)),
                        Err(error) => end(&mut state, Err(error)),
                    }
                }
                Ok(None) => end(&mut state, Ok(())),
                Err(error) => end(&mut state, Err(error)),
            }
        }
    }))
}

/// Ends the stream: with `error`, or with what the reader's end gives.
fn end<R: EventRead>(state: &mut State<R>, error: Result<(), ProviderError>) {
    let Some(reader) = state.reader.take() else {
        return;
    };
    match error.and_then(|()| reader.finish()) {
        Ok(events) => state.queue.extend(events.into_iter().map(Ok)),
        Err(error) => state.queue.push_back(Err(error)),
    }
}

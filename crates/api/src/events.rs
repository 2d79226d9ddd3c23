//! `GET /api/events/stream`: the caller's events as server-sent events, filtered by prompt or
//! conversation, resumable with `Last-Event-ID` (the `seq` of the last event received).

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use agentic_core::{Event, EventPayload, EventSubscription, Received};
use axum::Extension;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{self, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::AppState;
use crate::auth::UserId;
use crate::error::ApiError;

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct EventsQuery {
    /// Only events of this prompt.
    pub prompt_id: Option<String>,
    /// Only events of prompts of this conversation.
    pub conversation_id: Option<String>,
    /// Same as the `Last-Event-ID` header, for clients that cannot set headers.
    pub last_event_id: Option<u64>,
}

pub(crate) async fn stream(
    State(state): State<AppState>,
    Extension(UserId(user)): Extension<UserId>,
    headers: HeaderMap,
    query: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query?;
    let last_event_id = match headers.get("last-event-id") {
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|text| text.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    ApiError::bad_request("invalid_last_event_id", "Last-Event-ID must be a number")
                })?,
        ),
        None => query.last_event_id,
    };
    let events = &state.service().runtime().services().events;
    // Subscribe before reading the replay window, so nothing falls between the two.
    let subscription = events.subscribe(Some(&user));
    let mut pending = VecDeque::new();
    let mut gap = false;
    let mut last_event_id = last_event_id;
    if let Some(after) = last_event_id {
        if after > events.last_seq() && !events.is_relayed() {
            // An id from before this server started (ids restart with the process): what came
            // since is unknown, and every new event counts.
            gap = true;
            last_event_id = None;
        } else {
            // With several servers, the shared log has what this one never read.
            let (missed, complete) = if events.is_relayed() {
                agentic_conversation::relay::replay_since(
                    state.service().store(),
                    &user,
                    after,
                    events.replay_capacity(),
                )
                .await
                .map_err(|error| ApiError::internal(&error))?
            } else {
                events.replay_since(&user, after)
            };
            // Following one prompt, the window only has to reach back to its creation: a
            // client that starts from 0 on a busy server has missed nothing of its prompt.
            let has_start = |prompt: &str| {
                missed.iter().any(|event| {
                    matches!(&event.payload, EventPayload::PromptCreated { prompt_id, .. } if prompt_id == prompt)
                })
            };
            gap = !complete && !query.prompt_id.as_deref().is_some_and(has_start);
            pending.extend(missed);
        }
    }
    let feed = Feed {
        state: state.clone(),
        user,
        subscription,
        pending,
        last_seq: last_event_id.unwrap_or(0),
        gap,
        prompt_filter: query.prompt_id,
        conversation_filter: query.conversation_id,
        owners: HashMap::new(),
        stopping: state.inner.stopping.clone(),
        _client: agentic_core::telemetry::hold(metrics::gauge!(crate::metrics::SSE_CLIENTS)),
    };
    let keep_alive = Duration::from_secs(state.inner.config.keep_alive_seconds.max(1));
    Ok(Sse::new(feed.into_stream())
        .keep_alive(KeepAlive::new().interval(keep_alive))
        .into_response())
}

struct Feed {
    state: AppState,
    user: String,
    subscription: EventSubscription,
    pending: VecDeque<Arc<Event>>,
    last_seq: u64,
    gap: bool,
    prompt_filter: Option<String>,
    conversation_filter: Option<String>,
    /// Which conversation each prompt seen so far belongs to.
    owners: HashMap<String, Option<String>>,
    stopping: CancellationToken,
    /// Counts this client in the event-stream gauge while it is connected.
    _client: agentic_core::telemetry::Held,
}

impl Feed {
    fn into_stream(self) -> impl Stream<Item = Result<sse::Event, Infallible>> {
        futures::stream::unfold(self, |mut feed| async move {
            let event = feed.next().await?;
            Some((Ok(event), feed))
        })
    }

    async fn next(&mut self) -> Option<sse::Event> {
        if self.gap {
            self.gap = false;
            return Some(
                sse::Event::default()
                    .event("stream.gap")
                    .data(r#"{"message":"some events since Last-Event-ID are no longer kept; reload the prompts you follow"}"#),
            );
        }
        loop {
            if let Some(event) = self.pending.pop_front() {
                // Replayed events may come again live; each is sent once, in order.
                if event.seq <= self.last_seq {
                    continue;
                }
                self.last_seq = event.seq;
                if self.wants(&event).await {
                    let data = serde_json::to_string(&*event).unwrap_or_default();
                    return Some(
                        sse::Event::default()
                            .id(event.seq.to_string())
                            .event(event.payload.name())
                            .data(data),
                    );
                }
                continue;
            }
            let received = tokio::select! {
                () = self.stopping.cancelled() => return None,
                received = self.subscription.next() => received?,
            };
            match received {
                Received::Event(event) => self.pending.push_back(event),
                Received::Lagged(missed) => {
                    return Some(sse::Event::default().event("stream.lagged").data(format!(
                        r#"{{"missed":{missed},"message":"this client fell behind; reconnect with Last-Event-ID to catch up"}}"#
                    )));
                }
            }
        }
    }

    async fn wants(&mut self, event: &Event) -> bool {
        if let Some(prompt) = &self.prompt_filter
            && event.payload.prompt_id() != Some(prompt.as_str())
        {
            return false;
        }
        let Some(conversation) = self.conversation_filter.clone() else {
            return true;
        };
        match &event.payload {
            EventPayload::ConversationUpdated { conversation_id } => {
                conversation_id == &conversation
            }
            EventPayload::PromptCreated {
                prompt_id,
                conversation_id,
                ..
            } => {
                self.owners
                    .insert(prompt_id.clone(), conversation_id.clone());
                conversation_id.as_deref() == Some(conversation.as_str())
            }
            payload => {
                let Some(prompt_id) = payload.prompt_id() else {
                    return false;
                };
                if !self.owners.contains_key(prompt_id) {
                    let owner = self
                        .state
                        .service()
                        .store()
                        .prompt(&self.user, prompt_id)
                        .await
                        .ok()
                        .flatten()
                        .map(|stored| stored.conversation_id);
                    self.owners.insert(prompt_id.to_owned(), owner);
                }
                self.owners
                    .get(prompt_id)
                    .is_some_and(|owner| owner.as_deref() == Some(conversation.as_str()))
            }
        }
    }
}

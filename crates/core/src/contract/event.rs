//! Events: what executors publish and any number of subscribers follow, scoped by user.
//!
//! Publishing never waits. Each subscriber has a bounded window of events; one that falls
//! behind is told how many it missed ([`Received::Lagged`]) instead of slowing the executor.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

use crate::prompt::{PromptOutput, PromptUsage};

/// One published event. `seq` increases by one per event across the whole service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Its place in publication order; with a relay, the shared log's id.
    pub seq: u64,
    /// The user the event is for.
    pub user_id: String,
    /// What happened.
    #[serde(flatten)]
    pub payload: EventPayload,
}

/// A tool's count of its progress: `progress` of `total` (when it knows the total).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StreamProgress {
    /// How far the call is, in the tool's own units.
    pub progress: f64,
    /// What `progress` counts up to, when the tool knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
}

/// What an event says: its JSON `type` is [`EventPayload::name`], its fields are under `data`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data")]
#[non_exhaustive]
pub enum EventPayload {
    /// A prompt was created.
    #[serde(rename = "prompt.created", rename_all = "camelCase")]
    PromptCreated {
        /// The prompt's id.
        prompt_id: String,
        /// The mode that runs it.
        mode: String,
        /// The conversation it belongs to, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        conversation_id: Option<String>,
    },
    /// An output was added or changed (a tool output is published again when its result arrives).
    #[serde(rename = "prompt.output", rename_all = "camelCase")]
    PromptOutput {
        /// The prompt's id.
        prompt_id: String,
        /// The output as it now stands.
        output: PromptOutput,
    },
    /// Text as it is produced: the model's reply, or a running tool's live output (then
    /// `tool_call_id` names the call, and clients may show it apart from the reply).
    #[serde(rename = "prompt.stream", rename_all = "camelCase")]
    PromptStream {
        /// The prompt's id.
        prompt_id: String,
        /// The new text.
        delta: String,
        /// The tool call whose live output this is; absent for the model's reply.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
        /// How far the tool call is, when its tool counts (an MCP server's progress).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        progress: Option<StreamProgress>,
    },
    /// A tool call waits for a person's decision.
    #[serde(rename = "prompt.approval-requested", rename_all = "camelCase")]
    ApprovalRequested {
        /// The prompt's id.
        prompt_id: String,
        /// The call that waits.
        tool_call_id: String,
        /// The dotted id of its tool.
        tool_name: String,
        /// The call's input.
        input: Value,
        /// Why it needs approval.
        reason: String,
        /// When several calls are decided together (the calls of one classic round, or of one
        /// parallel request of a script), all of them in order, this one first: a decision's
        /// `calls` counts their places from 0. Empty for a call decided on its own.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        batch: Vec<BatchedCall>,
    },
    /// The prompt completed.
    #[serde(rename = "prompt.completed", rename_all = "camelCase")]
    PromptCompleted {
        /// The prompt's id.
        prompt_id: String,
        /// Its whole timeline.
        output: Vec<PromptOutput>,
        /// What it spent.
        usage: PromptUsage,
    },
    /// The prompt failed; its outputs are kept.
    #[serde(rename = "prompt.error", rename_all = "camelCase")]
    PromptError {
        /// The prompt's id.
        prompt_id: String,
        /// Why it failed.
        error: String,
    },
    /// Someone stopped the prompt: `output` is its timeline as it stands, tool calls that were
    /// running or waiting closed as errors.
    #[serde(rename = "prompt.cancelled", rename_all = "camelCase")]
    PromptCancelled {
        /// The prompt's id.
        prompt_id: String,
        /// Its timeline as it ended.
        output: Vec<PromptOutput>,
        /// What it spent until then.
        usage: PromptUsage,
    },
    /// A conversation changed.
    #[serde(rename = "conversation.updated", rename_all = "camelCase")]
    ConversationUpdated {
        /// The conversation's id.
        conversation_id: String,
    },
}

impl EventPayload {
    /// The event's name on the wire, e.g. `prompt.output`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::PromptCreated { .. } => "prompt.created",
            Self::PromptOutput { .. } => "prompt.output",
            Self::PromptStream { .. } => "prompt.stream",
            Self::ApprovalRequested { .. } => "prompt.approval-requested",
            Self::PromptCompleted { .. } => "prompt.completed",
            Self::PromptError { .. } => "prompt.error",
            Self::PromptCancelled { .. } => "prompt.cancelled",
            Self::ConversationUpdated { .. } => "conversation.updated",
        }
    }

    /// The prompt this event is about, if any.
    pub fn prompt_id(&self) -> Option<&str> {
        match self {
            Self::PromptCreated { prompt_id, .. }
            | Self::PromptOutput { prompt_id, .. }
            | Self::PromptStream { prompt_id, .. }
            | Self::ApprovalRequested { prompt_id, .. }
            | Self::PromptCompleted { prompt_id, .. }
            | Self::PromptError { prompt_id, .. }
            | Self::PromptCancelled { prompt_id, .. } => Some(prompt_id),
            Self::ConversationUpdated { .. } => None,
        }
    }
}

/// What a subscriber gets from [`EventSubscription::next`].
#[derive(Debug, Clone, PartialEq)]
pub enum Received {
    /// The next event.
    Event(Arc<Event>),
    /// The subscriber fell behind and this many events were dropped for it.
    Lagged(u64),
}

/// The publish/subscribe hub. Cheap to clone; clones share one channel.
#[derive(Debug, Clone)]
pub struct EventService {
    inner: Arc<EventServiceInner>,
}

#[derive(Debug)]
struct EventServiceInner {
    /// Everyone's events, for subscribers of all users.
    sender: broadcast::Sender<Arc<Event>>,
    /// One channel per user with subscribers, so a user's subscriber wakes only for that
    /// user's events (a thousand users' streams cost a thousand wakeups, not a million).
    users: Mutex<std::collections::HashMap<String, broadcast::Sender<Arc<Event>>>>,
    user_capacity: usize,
    /// Subscribers that must see every event of their user, whatever their pace (see
    /// [`EventService::subscribe_lossless`]).
    lossless: Mutex<Vec<(String, mpsc::UnboundedSender<Arc<Event>>)>>,
    next_seq: AtomicU64,
    /// When events go through a shared log (several servers on one database), `publish` hands
    /// them here and they are delivered to this process's subscribers when the log gives them
    /// back, with the log's sequence number ([`EventService::deliver`]).
    relay: std::sync::OnceLock<mpsc::UnboundedSender<(String, EventPayload)>>,
    /// The most recent events, so a reconnecting client can be replayed what it missed.
    recent: Mutex<VecDeque<Arc<Event>>>,
    recent_capacity: usize,
}

/// How many events a subscriber may fall behind before it lags, by default.
pub const DEFAULT_SUBSCRIBER_CAPACITY: usize = 4096;

/// The backlog of one user's subscribers is at most this many events.
const MAX_USER_CAPACITY: usize = 1024;

impl Default for EventService {
    fn default() -> Self {
        Self::new(DEFAULT_SUBSCRIBER_CAPACITY)
    }
}

impl EventService {
    /// `capacity` bounds both each subscriber's backlog and the replay window.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        let (sender, _) = broadcast::channel(capacity);
        Self {
            inner: Arc::new(EventServiceInner {
                sender,
                users: Mutex::default(),
                user_capacity: capacity.min(MAX_USER_CAPACITY),
                lossless: Mutex::default(),
                next_seq: AtomicU64::new(1),
                relay: std::sync::OnceLock::new(),
                recent: Mutex::new(VecDeque::with_capacity(capacity)),
                recent_capacity: capacity,
            }),
        }
    }

    /// Publishes an event for one user. Never blocks, whoever is listening. With a relay (see
    /// [`EventService::relay_to`]) the event goes to the shared log first and reaches
    /// subscribers, here and on every other server, when the log delivers it.
    pub fn publish(&self, user_id: &str, payload: EventPayload) {
        let payload = match self.inner.relay.get() {
            Some(relay) => match relay.send((user_id.to_owned(), payload)) {
                Ok(()) => return,
                // The relay is gone (its server is stopping): deliver here at least.
                Err(mpsc::error::SendError((_, payload))) => payload,
            },
            None => payload,
        };
        // The replay window and the sequence number are updated under one lock so that
        // `seq` order and replay order agree.
        let recent = self
            .inner
            .recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let event = Arc::new(Event {
            seq: self.inner.next_seq.fetch_add(1, Ordering::SeqCst),
            user_id: user_id.to_owned(),
            payload,
        });
        self.dispatch(recent, event);
    }

    /// From now on, `publish` sends events to `relay` instead of delivering them; whoever
    /// reads the relay writes them to the shared log and calls [`EventService::deliver`] for
    /// each event the log gives back, in the log's order. Only the first call takes effect.
    pub fn relay_to(&self, relay: mpsc::UnboundedSender<(String, EventPayload)>) -> bool {
        self.inner.relay.set(relay).is_ok()
    }

    /// Whether events go through a shared log ([`EventService::relay_to`]): their `seq` is then
    /// the log's, the same on every server and kept across restarts.
    pub fn is_relayed(&self) -> bool {
        self.inner.relay.get().is_some()
    }

    /// How many recent events are kept for replay.
    pub fn replay_capacity(&self) -> usize {
        self.inner.recent_capacity
    }

    /// Delivers an event of the shared log to this process's subscribers, with the log's
    /// sequence number, which must grow from call to call.
    pub fn deliver(&self, seq: u64, user_id: &str, payload: EventPayload) {
        let recent = self
            .inner
            .recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.inner.next_seq.fetch_max(seq + 1, Ordering::SeqCst);
        let event = Arc::new(Event {
            seq,
            user_id: user_id.to_owned(),
            payload,
        });
        self.dispatch(recent, event);
    }

    /// Puts an event in the replay window and sends it to its subscribers; `recent` is the
    /// replay lock, held since the event's `seq` was chosen.
    fn dispatch(
        &self,
        mut recent: std::sync::MutexGuard<'_, VecDeque<Arc<Event>>>,
        event: Arc<Event>,
    ) {
        let user_id = event.user_id.as_str();
        if recent.len() == self.inner.recent_capacity {
            recent.pop_front();
        }
        recent.push_back(event.clone());
        // An error only means nobody is subscribed right now.
        let _ = self.inner.sender.send(event.clone());
        let mut users = self
            .inner
            .users
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(sender) = users.get(user_id)
            && sender.send(event.clone()).is_err()
        {
            users.remove(user_id);
        }
        drop(users);
        let mut lossless = self
            .inner
            .lossless
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !lossless.is_empty() {
            // A send fails only once the subscription is dropped.
            lossless.retain(|(user, sender)| user != user_id || sender.send(event.clone()).is_ok());
        }
        drop(lossless);
        drop(recent);
    }

    /// Follows every event of one user, in order, however far the subscriber falls behind:
    /// events wait in an unbounded queue until it reads them. For a consumer that must not
    /// lose events and that lives no longer than the work it follows, such as the CLI printing
    /// one prompt's events as NDJSON. A server's clients use [`Self::subscribe`], whose backlog
    /// is bounded, and replay what they missed.
    pub fn subscribe_lossless(&self, user_id: &str) -> EventSubscription {
        let (sender, receiver) = mpsc::unbounded_channel();
        // Under the replay lock, like `subscribe`, so no event falls between the two.
        let _recent = self
            .inner
            .recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.inner
            .lossless
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((user_id.to_owned(), sender));
        EventSubscription {
            receiver: Receiver::Lossless(receiver),
            user_id: Some(user_id.to_owned()),
        }
    }

    /// Follows events of one user (`Some`) or of everyone (`None`).
    pub fn subscribe(&self, user_id: Option<&str>) -> EventSubscription {
        let receiver = match user_id {
            None => self.inner.sender.subscribe(),
            Some(user_id) => {
                // Under the replay lock, so no event is published between choosing the channel
                // and subscribing to it.
                let _recent = self
                    .inner
                    .recent
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let mut users = self
                    .inner
                    .users
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                users
                    .entry(user_id.to_owned())
                    .or_insert_with(|| broadcast::channel(self.inner.user_capacity).0)
                    .subscribe()
            }
        };
        EventSubscription {
            receiver: Receiver::Bounded(receiver),
            user_id: user_id.map(str::to_owned),
        }
    }

    /// Whether anyone here follows `user_id`'s events: a subscriber of theirs, lossless or
    /// not, or one of everyone's. A relay skips the events nobody here wants.
    pub fn wants(&self, user_id: &str) -> bool {
        if self.inner.sender.receiver_count() > 0 {
            return true;
        }
        let followed = self
            .inner
            .users
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(user_id)
            .is_some_and(|sender| sender.receiver_count() > 0);
        followed
            || self
                .inner
                .lossless
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .iter()
                .any(|(user, _)| user == user_id)
    }

    /// Notes that the shared log's event `seq` went by without being delivered here (nobody
    /// here wanted it), so that [`Self::last_seq`] stays the log's.
    pub fn skip_to(&self, seq: u64) {
        self.inner.next_seq.fetch_max(seq + 1, Ordering::SeqCst);
    }

    /// The `seq` of the most recent event, 0 before the first.
    pub fn last_seq(&self) -> u64 {
        self.inner.next_seq.load(Ordering::SeqCst).saturating_sub(1)
    }

    /// Events of `user_id` published after `after_seq` that are still in the replay window,
    /// oldest first, plus whether the window still reached back that far.
    pub fn replay_since(&self, user_id: &str, after_seq: u64) -> (Vec<Arc<Event>>, bool) {
        let recent = self
            .inner
            .recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let complete = recent
            .front()
            .is_none_or(|oldest| oldest.seq <= after_seq.saturating_add(1));
        let events = recent
            .iter()
            .filter(|event| event.seq > after_seq && event.user_id == user_id)
            .cloned()
            .collect();
        (events, complete)
    }
}

/// A subscriber's view of the event stream.
#[derive(Debug)]
pub struct EventSubscription {
    receiver: Receiver,
    user_id: Option<String>,
}

#[derive(Debug)]
enum Receiver {
    Bounded(broadcast::Receiver<Arc<Event>>),
    Lossless(mpsc::UnboundedReceiver<Arc<Event>>),
}

impl EventSubscription {
    /// Waits for the next event of this subscription's user. `None` once the service is gone.
    pub async fn next(&mut self) -> Option<Received> {
        loop {
            let received = match &mut self.receiver {
                Receiver::Bounded(receiver) => match receiver.recv().await {
                    Ok(event) => event,
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        return Some(Received::Lagged(missed));
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                Receiver::Lossless(receiver) => receiver.recv().await?,
            };
            if self.wants(&received) {
                return Some(Received::Event(received));
            }
        }
    }

    /// The next event if one is already waiting, without blocking.
    pub fn try_next(&mut self) -> Option<Received> {
        loop {
            let received = match &mut self.receiver {
                Receiver::Bounded(receiver) => match receiver.try_recv() {
                    Ok(event) => event,
                    Err(broadcast::error::TryRecvError::Lagged(missed)) => {
                        return Some(Received::Lagged(missed));
                    }
                    Err(_) => return None,
                },
                Receiver::Lossless(receiver) => receiver.try_recv().ok()?,
            };
            if self.wants(&received) {
                return Some(Received::Event(received));
            }
        }
    }

    fn wants(&self, event: &Event) -> bool {
        self.user_id
            .as_deref()
            .is_none_or(|user_id| user_id == event.user_id)
    }
}

/// One of the calls a single decision covers ([`EventPayload::ApprovalRequested`]'s `batch`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchedCall {
    /// The call's id.
    pub tool_call_id: String,
    /// The dotted id of its tool.
    pub tool_name: String,
    /// The call's input.
    pub input: Value,
    /// Why it needs approval.
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(prompt_id: &str, delta: &str) -> EventPayload {
        EventPayload::PromptStream {
            prompt_id: prompt_id.into(),
            delta: delta.into(),
            tool_call_id: None,
            progress: None,
        }
    }

    #[tokio::test]
    async fn subscribers_see_only_their_users_events() {
        let events = EventService::new(16);
        let mut alice = events.subscribe(Some("alice"));
        let mut everyone = events.subscribe(None);
        events.publish("bob", stream("p1", "for bob"));
        events.publish("alice", stream("p2", "for alice"));

        let Some(Received::Event(first)) = alice.next().await else {
            panic!("alice got nothing")
        };
        assert_eq!(first.payload, stream("p2", "for alice"));
        assert_eq!(alice.try_next(), None);
        let Some(Received::Event(first)) = everyone.next().await else {
            panic!("everyone got nothing")
        };
        assert_eq!(first.user_id, "bob");
    }

    #[tokio::test]
    async fn a_lossless_subscriber_gets_every_event_of_its_user_in_order() {
        let events = EventService::new(4);
        let mut lossless = events.subscribe_lossless("alice");
        for n in 0..1000 {
            events.publish("alice", stream("p", &n.to_string()));
            events.publish("bob", stream("q", "not alice's"));
        }
        for n in 0..1000 {
            let Some(Received::Event(event)) = lossless.try_next() else {
                panic!("event {n} is missing")
            };
            assert_eq!(event.payload, stream("p", &n.to_string()));
        }
        assert_eq!(lossless.try_next(), None);
        drop(lossless);
        events.publish("alice", stream("p", "after"));
        assert!(
            events.inner.lossless.lock().unwrap().is_empty(),
            "a dropped subscriber is forgotten"
        );
    }

    #[tokio::test]
    async fn a_slow_subscriber_lags_and_the_publisher_never_waits() {
        let events = EventService::new(4);
        let mut slow = events.subscribe(Some("alice"));
        for n in 0..10 {
            events.publish("alice", stream("p", &n.to_string()));
        }
        assert_eq!(slow.next().await, Some(Received::Lagged(6)));
        let Some(Received::Event(event)) = slow.next().await else {
            panic!("expected an event after the lag")
        };
        assert_eq!(event.payload, stream("p", "6"));
    }

    #[test]
    fn replay_returns_missed_events_and_says_when_the_window_is_too_short() {
        let events = EventService::new(3);
        for n in 0..5 {
            events.publish(
                if n % 2 == 0 { "alice" } else { "bob" },
                stream("p", &n.to_string()),
            );
        }
        // Window holds seq 3, 4, 5.
        let (replayed, complete) = events.replay_since("alice", 2);
        assert!(complete);
        assert_eq!(
            replayed.iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![3, 5]
        );
        let (_, complete) = events.replay_since("alice", 0);
        assert!(!complete);
    }
}

//! Events shared by every server on one PostgreSQL database.
//!
//! `publish` hands each event to the relay instead of delivering it. The relay's writer
//! appends waiting events to `event_log` in one transaction that holds an advisory lock, so
//! ids are given in commit order, and signals them with `NOTIFY agentic_events` (the events
//! themselves when they fit the payload limit, else only their ids). Every server, the writer's
//! own included, `LISTEN`s and delivers the events to its subscribers in id order, with the id
//! as `seq`: every server shows every user's events in one order, and a client that resumes
//! with `Last-Event-ID` on another server gets nothing twice and loses nothing. A lost
//! notification (the listening connection dropped) is made good from the table. Rows older
//! than the retention are pruned.

use std::time::Duration;

use agentic_core::{EventPayload, EventService};
use anyhow::{Context as _, bail};
use sea_orm::{ConnectionTrait, DbBackend, Statement};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{ConversationService, DecisionForwarder, Store};

/// The channel every server listens on.
const CHANNEL: &str = "agentic_events";
/// Where a server is woken to apply the stored decisions of a prompt it holds
/// (`{"to": instance, "promptId": …}`).
const DECISIONS: &str = "agentic_decisions";
/// The advisory lock that orders appends across servers.
const APPEND_LOCK: i64 = 7_416_057_331;
/// NOTIFY payloads must stay under 8,000 bytes; events that do not fit are read from the table.
const INLINE_LIMIT: usize = 7_000;
/// Most events appended in one transaction.
const MAX_BATCH: usize = 512;
/// How long rows stay in `event_log`: the window a client can resume in after a restart.
const RETENTION_MINUTES: i64 = 15;

/// What a notification carries: the ids `from..=to`, and the events when they fit.
#[derive(Debug, Serialize, Deserialize)]
struct Signal {
    from: i64,
    to: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Each event's user and payload, as written: passed on without being parsed twice.
    events: Option<Vec<(String, Box<RawValue>)>>,
}

/// The running relay; it stops when this is dropped. Drop it before the database closes: its
/// listening connection holds on to the pool until then.
#[derive(Debug)]
pub struct EventRelay {
    stop: CancellationToken,
}

impl Drop for EventRelay {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A wake-up for the server that holds a prompt with stored decisions (`decisions.rs`).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wake {
    to: String,
    prompt_id: String,
}

/// Wakes other servers with `NOTIFY agentic_decisions`.
struct NotifyForwarder {
    store: Store,
}

#[async_trait::async_trait]
impl DecisionForwarder for NotifyForwarder {
    async fn wake(&self, instance: &str, prompt_id: &str) -> anyhow::Result<()> {
        let text = serde_json::to_string(&Wake {
            to: instance.to_owned(),
            prompt_id: prompt_id.to_owned(),
        })?;
        self.store
            .connection()
            .execute_raw(Statement::from_sql_and_values(
                DbBackend::Postgres,
                "SELECT pg_notify($1, $2)",
                [DECISIONS.into(), text.into()],
            ))
            .await?;
        Ok(())
    }
}

/// [`start`] for a whole service: its events, and its decisions. An approval or a rejection
/// taken on this server for a prompt that waits on another live server is sent there, and
/// those sent here for this server's prompts are taken here.
pub async fn start_for(service: &ConversationService) -> anyhow::Result<EventRelay> {
    let relay = start_with(
        service.store().clone(),
        service.runtime().services().events.clone(),
        Some(service.clone()),
    )
    .await?;
    service.forward_decisions(std::sync::Arc::new(NotifyForwarder {
        store: service.store().clone(),
    }));
    Ok(relay)
}

/// Starts sharing `events` through the store's PostgreSQL database. Fails on SQLite, where one
/// server is the only server.
pub async fn start(store: Store, events: EventService) -> anyhow::Result<EventRelay> {
    start_with(store, events, None).await
}

async fn start_with(
    store: Store,
    events: EventService,
    decisions: Option<ConversationService>,
) -> anyhow::Result<EventRelay> {
    if store.backend() != DbBackend::Postgres {
        bail!("events are shared between servers only on PostgreSQL");
    }
    let pool = store.connection().get_postgres_connection_pool().clone();
    let mut listener = sea_orm::sqlx::postgres::PgListener::connect_with(&pool)
        .await
        .context("could not open the connection that listens for events")?;
    listener.listen(CHANNEL).await?;
    if decisions.is_some() {
        listener.listen(DECISIONS).await?;
    }
    // Subscribers start after the log's last event; a client that resumes from an earlier
    // one is replayed from the log ([`replay_since`]).
    let last = max_id(&store).await?;
    events.skip_to(u64::try_from(last).unwrap_or_default());
    let (sender, receiver) = mpsc::unbounded_channel();
    events.relay_to(sender);
    let stop = CancellationToken::new();
    tokio::spawn(append(store.clone(), receiver, stop.clone()));
    let own = store.instance_id().map(str::to_owned);
    let decisions = decisions.zip(own);
    tokio::spawn(listen(
        store.clone(),
        events,
        listener,
        last,
        decisions,
        stop.clone(),
    ));
    tokio::spawn(prune(store, stop.clone()));
    Ok(EventRelay { stop })
}

fn deliver(events: &EventService, id: i64, user: &str, payload: &str) {
    let seq = u64::try_from(id).unwrap_or_default();
    // Nobody here follows this user: the event is not read at all. A client that comes
    // later is replayed from the log. So each event is parsed by the servers that show it,
    // not by every server.
    if !events.wants(user) {
        events.skip_to(seq);
        return;
    }
    match serde_json::from_str::<EventPayload>(payload) {
        Ok(payload) => events.deliver(seq, user, payload),
        // From a newer server with an event this one does not know: skip it, keep the order.
        Err(error) => tracing::debug!(%error, id, "skipped an event this server cannot read"),
    }
}

/// Appends what `publish` hands over, batch by batch, until stopped.
async fn append(
    store: Store,
    mut receiver: mpsc::UnboundedReceiver<(String, EventPayload)>,
    stop: CancellationToken,
) {
    loop {
        let first = tokio::select! {
            () = stop.cancelled() => return,
            first = receiver.recv() => match first {
                Some(first) => first,
                None => return,
            },
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match receiver.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        // Each payload is serialised once: the row and the signal carry the same text.
        let rows: Vec<(String, Box<RawValue>)> = batch
            .into_iter()
            .filter_map(|(user, payload)| {
                Some((user, serde_json::value::to_raw_value(&payload).ok()?))
            })
            .collect();
        let mut delay = Duration::from_millis(50);
        loop {
            match append_batch(&store, rows.clone()).await {
                Ok(()) => break,
                Err(error) => {
                    tracing::warn!(error = %format!("{error:#}"), events = rows.len(), "could not append events to the shared log; retrying");
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(delay) => {}
                    }
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
}

/// One transaction: the append lock, the rows, and the signal (sent at commit).
async fn append_batch(store: &Store, rows: Vec<(String, Box<RawValue>)>) -> anyhow::Result<()> {
    store
        .write_with(move |transaction| {
            let rows = rows.clone();
            Box::pin(async move {
                transaction
                    .execute_unprepared(&format!("SELECT pg_advisory_xact_lock({APPEND_LOCK})"))
                    .await?;
                let mut sql =
                    String::from("INSERT INTO event_log (user_id, payload, created_at) VALUES ");
                let mut values: Vec<sea_orm::Value> = Vec::with_capacity(rows.len() * 2);
                for (index, (user, payload)) in rows.iter().enumerate() {
                    if index > 0 {
                        sql.push_str(", ");
                    }
                    sql.push_str(&format!("(${}, ${}, now())", index * 2 + 1, index * 2 + 2));
                    values.push(user.clone().into());
                    values.push(payload.get().to_owned().into());
                }
                sql.push_str(" RETURNING id");
                let returned = transaction
                    .query_all_raw(Statement::from_sql_and_values(
                        DbBackend::Postgres,
                        sql,
                        values,
                    ))
                    .await?;
                let mut ids: Vec<i64> = returned
                    .iter()
                    .map(|row| row.try_get::<i64>("", "id"))
                    .collect::<Result<_, _>>()?;
                ids.sort_unstable();
                let (Some(&from), Some(&to)) = (ids.first(), ids.last()) else {
                    return Ok(());
                };
                let mut signal = Signal {
                    from,
                    to,
                    events: Some(rows),
                };
                let mut text = serde_json::to_string(&signal)?;
                // Contiguous ids (the lock keeps other servers out) let the events ride along.
                if text.len() > INLINE_LIMIT || to - from + 1 != i64::try_from(ids.len())? {
                    signal.events = None;
                    text = serde_json::to_string(&signal)?;
                }
                transaction
                    .execute_raw(Statement::from_sql_and_values(
                        DbBackend::Postgres,
                        "SELECT pg_notify($1, $2)",
                        [CHANNEL.into(), text.into()],
                    ))
                    .await?;
                Ok(())
            })
        })
        .await
}

/// Delivers the log's events in id order as they are signalled, until stopped.
async fn listen(
    store: Store,
    events: EventService,
    mut listener: sea_orm::sqlx::postgres::PgListener,
    mut last: i64,
    decisions: Option<(ConversationService, String)>,
    stop: CancellationToken,
) {
    loop {
        let received = tokio::select! {
            () = stop.cancelled() => return,
            received = listener.try_recv() => received,
        };
        let signal = match received {
            Ok(Some(notification)) if notification.channel() == DECISIONS => {
                match (
                    serde_json::from_str::<Wake>(notification.payload()),
                    &decisions,
                ) {
                    (Ok(wake), Some((service, own))) if &wake.to == own => {
                        let service = service.clone();
                        tokio::spawn(async move {
                            if let Err(error) = service.apply_decisions(&wake.prompt_id).await {
                                tracing::warn!(prompt = %wake.prompt_id, error = %format!("{error:#}"), "could not apply a decision");
                            }
                        });
                    }
                    // From another release, or garbled: the sweep applies what it was about.
                    (Err(error), _) => tracing::debug!(%error, "unreadable decision wake-up"),
                    _ => {}
                }
                continue;
            }
            Ok(Some(notification)) => {
                match serde_json::from_str::<Signal>(notification.payload()) {
                    Ok(signal) => Some(signal),
                    Err(error) => {
                        tracing::warn!(%error, "unreadable event signal");
                        None
                    }
                }
            }
            // The connection dropped; the next call reconnects. What was signalled meanwhile
            // is read from the table.
            Ok(None) => None,
            Err(error) => {
                tracing::warn!(%error, "the event listener failed; retrying");
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_millis(200)) => {}
                }
                None
            }
        };
        let result = match signal {
            Some(signal) if signal.to <= last => Ok(()),
            Some(Signal {
                from,
                events: Some(inline),
                ..
            }) if from == last + 1 => {
                for (offset, (user, payload)) in inline.into_iter().enumerate() {
                    let id = from + i64::try_from(offset).unwrap_or_default();
                    deliver(&events, id, &user, payload.get());
                    last = id;
                }
                Ok(())
            }
            // Ids only, or something was missed before: read from the table.
            _ => catch_up(&store, &events, &mut last).await,
        };
        if let Err(error) = result {
            tracing::warn!(error = %format!("{error:#}"), "could not read events from the shared log");
        }
    }
}

/// The user's events after `after`, from the shared log, oldest first, at most `limit` of
/// them; and whether they reach back that far (the log keeps 15 minutes, and more than
/// `limit` events since is a gap too). What a server replays to a client that resumes with
/// `Last-Event-ID`, whichever server it followed before.
pub async fn replay_since(
    store: &Store,
    user: &str,
    after: u64,
    limit: usize,
) -> anyhow::Result<(Vec<std::sync::Arc<agentic_core::Event>>, bool)> {
    let after = i64::try_from(after).unwrap_or(i64::MAX);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = store
        .connection()
        .query_all_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "SELECT id, payload FROM event_log WHERE user_id = $1 AND id > $2 ORDER BY id LIMIT $3",
            [user.into(), after.into(), (limit + 1).into()],
        ))
        .await?;
    let oldest = store
        .connection()
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT COALESCE(MIN(id), 0) AS id FROM event_log",
        ))
        .await?
        .map(|row| row.try_get::<i64>("", "id"))
        .transpose()?
        .unwrap_or_default();
    let mut complete = oldest <= after.saturating_add(1) || after == 0;
    let mut events = Vec::with_capacity(rows.len());
    for row in rows {
        if i64::try_from(events.len()).unwrap_or(i64::MAX) >= limit {
            complete = false;
            break;
        }
        let id: i64 = row.try_get("", "id")?;
        let payload: String = row.try_get("", "payload")?;
        // An event this server cannot read (from a newer one) is left out, as when live.
        if let Ok(payload) = serde_json::from_str::<EventPayload>(&payload) {
            events.push(std::sync::Arc::new(agentic_core::Event {
                seq: u64::try_from(id).unwrap_or_default(),
                user_id: user.to_owned(),
                payload,
            }));
        }
    }
    Ok((events, complete))
}

/// Delivers every row after `last`, in order.
async fn catch_up(store: &Store, events: &EventService, last: &mut i64) -> anyhow::Result<()> {
    loop {
        let rows = read_rows(
            store,
            &format!(
                "SELECT id, user_id, payload FROM event_log WHERE id > {} ORDER BY id LIMIT 1000",
                *last
            ),
        )
        .await?;
        let done = rows.len() < 1000;
        for (id, user, payload) in rows {
            deliver(events, id, &user, &payload);
            *last = id;
        }
        if done {
            return Ok(());
        }
    }
}

async fn read_rows(store: &Store, sql: &str) -> anyhow::Result<Vec<(i64, String, String)>> {
    let rows = store
        .connection()
        .query_all_raw(Statement::from_string(DbBackend::Postgres, sql.to_owned()))
        .await?;
    rows.iter()
        .map(|row| {
            let id: i64 = row.try_get("", "id")?;
            let user: String = row.try_get("", "user_id")?;
            let payload: String = row.try_get("", "payload")?;
            Ok((id, user, payload))
        })
        .collect()
}

async fn max_id(store: &Store) -> anyhow::Result<i64> {
    let row = store
        .connection()
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT COALESCE(MAX(id), 0) AS id FROM event_log",
        ))
        .await?;
    Ok(match row {
        Some(row) => row.try_get("", "id")?,
        None => 0,
    })
}

/// Removes rows past the retention, once a minute.
async fn prune(store: Store, stop: CancellationToken) {
    let mut ticks = tokio::time::interval(Duration::from_secs(60));
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let pruned = store
            .write_with(|transaction| {
                Box::pin(async move {
                    transaction
                        .execute_unprepared(&format!(
                            "DELETE FROM event_log WHERE created_at < now() - interval '{RETENTION_MINUTES} minutes'"
                        ))
                        .await?;
                    Ok(())
                })
            })
            .await;
        if let Err(error) = pruned {
            tracing::warn!(error = %format!("{error:#}"), "could not prune the shared event log");
        }
    }
}

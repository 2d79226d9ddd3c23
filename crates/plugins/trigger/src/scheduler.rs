//! The scheduler: a background service of `agentic serve` that fires due triggers as prompts
//! in each user's trigger conversation.
//!
//! One pass ([`fire_due`]) reads the triggers due now and, for each, takes its slot with one
//! conditional update (so two servers on one database never fire a slot twice) and moves it on
//! to its first slot after *now*: a trigger that missed many slots while no server ran fires
//! once, not once per slot. A one-shot trigger is marked done when it fires. When the user's
//! trigger conversation is busy (one prompt at a time), the trigger is left due and tried
//! again shortly. Between passes the scheduler sleeps until the next trigger is due, at most
//! `tickMs`, and wakes early when a trigger is created in this process or a fired prompt ends.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use agentic_conversation::background::CancellationToken;
use agentic_conversation::{
    BackgroundService, ConversationError, ConversationInstance, ConversationService, PromptRequest,
    StartedPrompt,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio::sync::Notify;

use crate::schedule::Schedule;
use crate::table::{self, TriggerRow};

/// The title of the conversation fired prompts go to.
pub const TRIGGER_CONVERSATION_TITLE: &str = "Triggers";

/// Most triggers one pass looks at; the rest wait for the next pass, which follows at once.
const PASS_LIMIT: u64 = 100;

/// How the scheduler paces itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerSettings {
    /// The longest sleep between passes.
    pub max_sleep: Duration,
    /// How soon a trigger left due (its conversation was busy, or the pass failed) is tried
    /// again.
    pub retry: Duration,
}

/// What one pass did.
#[derive(Debug, Default)]
pub struct Pass {
    /// Prompts started, stored and holding their conversation, ready to run.
    pub started: Vec<FiredTrigger>,
    /// Triggers left due because their user's trigger conversation was busy.
    pub busy: Vec<String>,
    /// Triggers whose slot another caller took first.
    pub taken: Vec<String>,
    /// Triggers whose slot was used up without a prompt, with why (recorded on the trigger).
    pub failed: Vec<(String, String)>,
    /// The pass saw as many triggers as it may take: more may be due.
    pub more: bool,
}

/// A trigger that fired, and the prompt it started.
#[derive(Debug)]
pub struct FiredTrigger {
    pub trigger_id: String,
    pub prompt: StartedPrompt,
}

/// One pass: fires every trigger due at `now` (up to a limit). The prompts are started, not
/// run: the caller runs them (the scheduler on tasks of its own, a test in place).
pub async fn fire_due(service: &ConversationService, now: DateTime<Utc>) -> anyhow::Result<Pass> {
    let due = table::due(service.store(), now, PASS_LIMIT).await?;
    let mut pass = Pass {
        more: due.len() as u64 >= PASS_LIMIT,
        ..Pass::default()
    };
    // A user's second due trigger would only find the conversation busy with the first.
    let mut busy_users = HashSet::new();
    for row in due {
        if busy_users.contains(&row.user_id) {
            pass.busy.push(row.id);
            continue;
        }
        match fire(service, &row, now).await {
            Ok(Fired::Started(prompt)) => {
                busy_users.insert(row.user_id.clone());
                pass.started.push(FiredTrigger {
                    trigger_id: row.id,
                    prompt,
                });
            }
            Ok(Fired::Busy) => {
                busy_users.insert(row.user_id.clone());
                pass.busy.push(row.id);
            }
            Ok(Fired::Taken) => pass.taken.push(row.id),
            Ok(Fired::Failed(why)) => {
                tracing::warn!(trigger = %row.id, user = %row.user_id, error = %why, "a trigger fired without a prompt");
                pass.failed.push((row.id, why));
            }
            Err(error) => {
                // Left due (the slot was not taken) or taken without a prompt: either way the
                // next pass or slot tries again.
                tracing::warn!(trigger = %row.id, error = %format!("{error:#}"), "could not fire a trigger");
                pass.busy.push(row.id);
            }
        }
    }
    Ok(pass)
}

/// The user's trigger conversation: the one recorded for them, or a new one titled
/// [`TRIGGER_CONVERSATION_TITLE`] when they have none (or deleted it).
pub async fn trigger_conversation(
    service: &ConversationService,
    user_id: &str,
) -> anyhow::Result<ConversationInstance> {
    let store = service.store();
    let known = table::trigger_conversation(store, user_id).await?;
    if let Some(id) = &known {
        match service.get(user_id, id).await {
            Ok(conversation) => return Ok(conversation),
            Err(ConversationError::NotFound(_)) => {}
            Err(error) => return Err(error.into()),
        }
    }
    let mut created = service.create(user_id).await?;
    created.set_title(TRIGGER_CONVERSATION_TITLE).await?;
    let chosen =
        table::set_trigger_conversation(store, user_id, created.id(), known.as_deref()).await?;
    if chosen == created.id() {
        return Ok(created);
    }
    // Another server made the user's trigger conversation at the same time; use theirs.
    if let Err(error) = service.delete(user_id, created.id()).await {
        tracing::warn!(conversation = %created.id(), error = %error, "could not delete a spare trigger conversation");
    }
    Ok(service.get(user_id, &chosen).await?)
}

/// The scheduler, as registered by the plugin.
#[derive(Debug)]
pub struct Scheduler {
    settings: SchedulerSettings,
    wake: Arc<Notify>,
}

impl Scheduler {
    /// `wake` cuts a sleep short, e.g. when a trigger was just created.
    pub fn new(settings: SchedulerSettings, wake: Arc<Notify>) -> Self {
        Self { settings, wake }
    }

    /// How long to sleep after a pass: until the next trigger is due, at most `max_sleep`;
    /// `retry` when something is left due now.
    /// `progressed`: the pass started prompts (taken out of it already).
    async fn sleep_after(
        &self,
        service: &ConversationService,
        pass: Option<&Pass>,
        progressed: bool,
    ) -> Duration {
        let settings = self.settings;
        let mut sleep = settings.max_sleep;
        match pass {
            Some(pass) if pass.more && (progressed || !pass.taken.is_empty()) => {
                return Duration::ZERO;
            }
            Some(pass) if pass.busy.is_empty() => {}
            _ => sleep = sleep.min(settings.retry),
        }
        match table::next_fire_at(service.store()).await {
            Ok(Some(at)) => {
                let now = Utc::now();
                if at <= now {
                    // Due yet not fired: busy, or fired by another server a moment from now.
                    sleep = sleep.min(settings.retry);
                } else if let Ok(until) = (at - now).to_std() {
                    // A few milliseconds late rather than a pass that finds it not yet due.
                    sleep = sleep.min(until + Duration::from_millis(5));
                }
            }
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(error = %format!("{error:#}"), "could not read when the next trigger is due");
                sleep = sleep.min(settings.retry);
            }
        }
        sleep
    }
}

#[async_trait]
impl BackgroundService for Scheduler {
    fn name(&self) -> &str {
        "trigger.scheduler"
    }

    async fn run(&self, service: ConversationService, shutdown: CancellationToken) {
        let mut running = tokio::task::JoinSet::new();
        loop {
            let mut pass = match fire_due(&service, Utc::now()).await {
                Ok(pass) => Some(pass),
                Err(error) => {
                    tracing::warn!(error = %format!("{error:#}"), "a trigger pass failed");
                    None
                }
            };
            let started = pass
                .as_mut()
                .map(|pass| std::mem::take(&mut pass.started))
                .unwrap_or_default();
            let progressed = !started.is_empty();
            for fired in started {
                let wake = self.wake.clone();
                let trigger = fired.trigger_id;
                running.spawn(async move {
                    if let Err(error) = fired.prompt.run().await {
                        tracing::warn!(trigger = %trigger, error = %error, "a triggered prompt failed");
                    }
                    // The conversation is free again: a trigger waiting for it can fire.
                    wake.notify_one();
                });
            }
            let sleep = self.sleep_after(&service, pass.as_ref(), progressed).await;
            while running.try_join_next().is_some() {}
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(sleep) => {}
            }
        }
        // Prompts still running are left to the service's shutdown, which marks them
        // interrupted like those of the HTTP API.
        running.abort_all();
        while running.join_next().await.is_some() {}
    }
}

enum Fired {
    Started(StartedPrompt),
    Busy,
    Taken,
    Failed(String),
}

async fn fire(
    service: &ConversationService,
    row: &TriggerRow,
    now: DateTime<Utc>,
) -> anyhow::Result<Fired> {
    let store = service.store();
    let next = match Schedule::from_stored(&row.kind, &row.schedule)
        .and_then(|schedule| schedule.next_after(now))
    {
        Ok(next) => next,
        Err(why) => {
            // A schedule that can say no next time fires this slot and is done.
            if !table::claim(store, row, None, now).await? {
                return Ok(Fired::Taken);
            }
            let why = format!("the schedule has no next time: {why}");
            table::record_fire(store, &row.id, None, Some(&why)).await?;
            return Ok(Fired::Failed(why));
        }
    };
    let mut conversation = trigger_conversation(service, &row.user_id).await?;
    if conversation.conversation().active_prompt_id.is_some() {
        return Ok(Fired::Busy);
    }
    if !table::claim(store, row, next, now).await? {
        return Ok(Fired::Taken);
    }
    let request = PromptRequest {
        input: Some(row.input.clone()),
        mode: Some(row.mode.clone()),
        ..PromptRequest::default()
    };
    match conversation.start(request).await {
        Ok(prompt) => {
            // The prompt holds its conversation now and must run whatever else fails.
            if let Err(error) =
                table::record_fire(store, &row.id, Some(prompt.prompt_id()), None).await
            {
                tracing::warn!(trigger = %row.id, error = %format!("{error:#}"), "could not record a fire");
            }
            Ok(Fired::Started(prompt))
        }
        Err(ConversationError::Busy { .. }) => {
            // Taken between our look and our start: give the slot back and come again.
            if let Err(error) = table::unclaim(store, row, next).await {
                tracing::warn!(trigger = %row.id, error = %format!("{error:#}"), "could not give back a trigger's slot; it fires at its next one");
            }
            Ok(Fired::Busy)
        }
        Err(error) => {
            let why = error.to_string();
            table::record_fire(store, &row.id, None, Some(&why)).await?;
            Ok(Fired::Failed(why))
        }
    }
}

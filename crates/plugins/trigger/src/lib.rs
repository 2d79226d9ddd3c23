//! The trigger plugin: prompts that run by themselves, on a cron schedule or once at a set
//! time. `trigger.create`, `trigger.list` and `trigger.delete` keep each user's triggers in a
//! table this plugin owns (`triggers`, created by its migration from `setup()`); the
//! [`scheduler`], a background service that `agentic serve` runs, fires them as prompts in the
//! user's trigger conversation.
//!
//! A one-shot trigger that has fired is kept, marked done: `trigger.list` shows it with
//! `status: "done"` (and hides it by default), so the user can see what ran and its prompt.
#![forbid(unsafe_code)]

pub mod schedule;
pub mod scheduler;
pub mod table;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agentic_conversation::{Store, register_background_service, register_migrations};
use agentic_core::{
    Plugin, PluginRegistration, PrepareContext, SetupContext, ToolContext, ToolError, define_tool,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::schedule::Schedule;
use crate::scheduler::{Scheduler, SchedulerSettings};
use crate::table::{Listing, TriggerRow};

agentic_core::inventory::submit! {
    PluginRegistration { id: "trigger", create: create_plugin }
}

/// The plugin, as the runtime creates it; the `agentic` crate links it by feature.
pub fn create_plugin() -> Arc<dyn Plugin> {
    Arc::new(TriggerPlugin::default())
}

#[derive(Debug, Default)]
pub struct TriggerPlugin {
    config: OnceLock<TriggerConfig>,
    /// Wakes this process's scheduler when a trigger is created.
    wake: Arc<Notify>,
}

/// The `trigger` config section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct TriggerConfig {
    /// The longest the scheduler sleeps between passes, in milliseconds; it wakes sooner when
    /// a trigger is due or was created here. Triggers made by another server on the same
    /// database are seen within this time.
    pub tick_ms: u64,
    /// How soon a due trigger whose conversation is busy is tried again, in milliseconds
    /// (at least 10, like `tickMs`).
    pub busy_retry_ms: u64,
    /// How many triggers that can still fire one user may have.
    pub max_per_user: u64,
}

impl Default for TriggerConfig {
    fn default() -> Self {
        Self {
            tick_ms: 30_000,
            busy_retry_ms: 2_000,
            max_per_user: 50,
        }
    }
}

/// The shortest sleep the config can ask for, in milliseconds.
const MIN_SLEEP_MS: u64 = 10;

impl TriggerConfig {
    pub fn scheduler_settings(&self) -> SchedulerSettings {
        SchedulerSettings {
            // A zero would make the scheduler spin on the database.
            max_sleep: Duration::from_millis(self.tick_ms.max(MIN_SLEEP_MS)),
            retry: Duration::from_millis(self.busy_retry_ms.max(MIN_SLEEP_MS)),
        }
    }
}

/// One trigger as tools see it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Trigger {
    pub id: String,
    pub name: String,
    /// The cron expression, or the one-shot time in RFC 3339 (UTC).
    pub schedule: String,
    /// `cron` (fires at every match) or `once` (fires at one time).
    pub kind: String,
    /// What the prompt says when the trigger fires.
    pub input: String,
    /// The execution mode the prompt runs in.
    pub mode: String,
    /// `pending` (will fire) or `done` (a one-shot that fired).
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_fire_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_fired_at: Option<DateTime<Utc>>,
    /// The prompt the last fire started, in the user's "Triggers" conversation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_prompt_id: Option<String>,
    /// Why the last fire started no prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(serialize_with = "agentic_core::tool::rfc3339_millis")]
    pub created_at: DateTime<Utc>,
}

impl From<TriggerRow> for Trigger {
    fn from(row: TriggerRow) -> Self {
        Self {
            id: row.id,
            name: row.name,
            schedule: row.schedule,
            kind: row.kind,
            input: row.input,
            mode: row.mode,
            status: if row.done { "done" } else { "pending" }.to_owned(),
            next_fire_at: row.next_fire_at,
            last_fired_at: row.last_fired_at,
            last_prompt_id: row.last_prompt_id,
            last_error: row.last_error,
            created_at: row.created_at,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateInput {
    /// A short name for the user, e.g. `Morning briefing`.
    pub name: String,
    /// When to fire: a standard 5-field cron expression in UTC (minute hour day-of-month month
    /// day-of-week, e.g. `0 9 * * MON-FRI` or `*/30 * * * *`; `@daily` and the like work), or
    /// one RFC 3339 time in the future with its offset (e.g. `2026-12-01T09:00:00+01:00`) to
    /// fire once.
    pub schedule: String,
    /// What the prompt says when it fires, written as the user's request.
    pub input: String,
    /// The execution mode to run it in: `classic` (default), `code`, or another one this
    /// runtime has.
    #[serde(default)]
    pub mode: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListInput {
    /// `pending` (default), `done` or `all`.
    #[serde(default)]
    pub status: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ListOutput {
    pub triggers: Vec<Trigger>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteInput {
    pub id: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Deleted {
    pub id: String,
    pub deleted: bool,
}

/// `trigger.create`'s work: checks the input and stores the trigger for `user_id`.
pub async fn create_trigger(
    store: &Store,
    services: &agentic_core::Services,
    config: &TriggerConfig,
    user_id: &str,
    input: CreateInput,
    now: DateTime<Utc>,
) -> Result<Trigger, ToolError> {
    let name = non_empty(&input.name, "name")?;
    let prompt = non_empty(&input.input, "input")?;
    let schedule = Schedule::parse(&input.schedule, now).map_err(ToolError::failed)?;
    let mode = match input.mode.as_deref().map(str::trim) {
        None | Some("") => agentic_core::prompt::DEFAULT_MODE.to_owned(),
        Some(mode) => mode.to_owned(),
    };
    services.modes.get(&mode).map_err(ToolError::failed)?;
    let pending = table::count_pending(store, user_id)
        .await
        .map_err(internal)?;
    if pending >= config.max_per_user {
        return Err(ToolError::failed(format!(
            "you already have {pending} pending triggers, the most allowed; delete one first \
             (trigger.list shows them)"
        )));
    }
    let next = schedule.next_after(now).map_err(ToolError::failed)?;
    let row = TriggerRow {
        id: uuid::Uuid::new_v4().to_string(),
        user_id: user_id.to_owned(),
        name,
        schedule: schedule.stored_text(&input.schedule),
        kind: schedule.kind().to_owned(),
        input: prompt,
        mode,
        next_fire_at: next,
        done: false,
        last_fired_at: None,
        last_prompt_id: None,
        last_error: None,
        created_at: now,
        updated_at: now,
    };
    table::insert(store, row.clone()).await.map_err(internal)?;
    Ok(row.into())
}

/// `trigger.list`'s work.
pub async fn list_triggers(
    store: &Store,
    user_id: &str,
    status: Option<&str>,
) -> Result<ListOutput, ToolError> {
    let listing = match status.unwrap_or("pending") {
        "pending" => Listing::Pending,
        "done" => Listing::Done,
        "all" => Listing::All,
        other => {
            return Err(ToolError::failed(format!(
                "status \"{other}\" is not one of pending, done, all"
            )));
        }
    };
    let rows = table::list(store, user_id, listing)
        .await
        .map_err(internal)?;
    Ok(ListOutput {
        triggers: rows.into_iter().map(Trigger::from).collect(),
    })
}

/// `trigger.delete`'s work.
pub async fn delete_trigger(store: &Store, user_id: &str, id: &str) -> Result<Deleted, ToolError> {
    if !table::delete(store, user_id, id).await.map_err(internal)? {
        return Err(ToolError::failed(format!(
            "no trigger with id \"{id}\"; trigger.list with status \"all\" shows yours"
        )));
    }
    Ok(Deleted {
        id: id.to_owned(),
        deleted: true,
    })
}

fn store(context: &ToolContext) -> Result<Store, ToolError> {
    agentic_conversation::tool_database(&context.services, "triggers need")
}

fn internal(error: impl std::fmt::Display) -> ToolError {
    ToolError::failed(format!(
        "the triggers could not be read or changed: {error}"
    ))
}

fn non_empty(text: &str, what: &str) -> Result<String, ToolError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(ToolError::failed(format!("{what} must not be empty")));
    }
    Ok(text.to_owned())
}

#[async_trait]
impl Plugin for TriggerPlugin {
    fn id(&self) -> &str {
        "trigger"
    }

    fn everyday(&self) -> bool {
        true
    }

    fn config_schema(&self) -> serde_json::Value {
        agentic_core::schema_of::<TriggerConfig>()
    }

    async fn setup(&self, context: &mut SetupContext<'_>) -> anyhow::Result<()> {
        let config: TriggerConfig = context.config.plugin("trigger")?;
        register_migrations(context, "trigger", vec![table::migration()]);
        register_background_service(
            context,
            Arc::new(Scheduler::new(
                config.scheduler_settings(),
                self.wake.clone(),
            )),
        );
        let _ = self.config.set(config);
        Ok(())
    }

    async fn prepare(&self, context: &mut PrepareContext) -> anyhow::Result<()> {
        let config = self.config.get().cloned().unwrap_or_default();
        let wake = self.wake.clone();
        context.add_tool(
            define_tool(
                "trigger.create",
                "Schedule a prompt to run by itself later: on a cron schedule (5 fields, UTC) or \
                 once at an RFC 3339 time. It runs in the user's \"Triggers\" conversation while \
                 the agentic server runs",
                move |cx, input: CreateInput| {
                    let config = config.clone();
                    let wake = wake.clone();
                    async move {
                        let store = store(&cx)?;
                        let trigger = create_trigger(
                            &store,
                            &cx.services,
                            &config,
                            &cx.user_id,
                            input,
                            Utc::now(),
                        )
                        .await?;
                        wake.notify_one();
                        Ok(trigger)
                    }
                },
            )
            .into_arc(),
        );
        context.add_tool(
            define_tool(
                "trigger.list",
                "The user's triggers: pending (default), done or all",
                |cx, input: ListInput| async move {
                    list_triggers(&store(&cx)?, &cx.user_id, input.status.as_deref()).await
                },
            )
            .read_only()
            .into_arc(),
        );
        context.add_tool(
            define_tool(
                "trigger.delete",
                "Delete a trigger by id, so it fires no more",
                |cx, input: DeleteInput| async move {
                    delete_trigger(&store(&cx)?, &cx.user_id, input.id.trim()).await
                },
            )
            .into_arc(),
        );
        Ok(())
    }
}

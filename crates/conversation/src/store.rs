//! The database: connecting (SQLite tuned for concurrent writers, or PostgreSQL), and every
//! read and write conversations need. Every write is a [`crate::writes::Write`], applied by
//! the group-committing writer.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agentic_core::prompt::{ModelKind, Prompt, PromptOutput, PromptState, PromptUsage};
use agentic_core::{Extensions, PromptChange};
use anyhow::{Context as _, bail};
use chrono::{DateTime, Utc};
use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use sea_orm::{
    ColumnTrait, ConnectOptions, ConnectionTrait, Database, DatabaseConnection,
    DatabaseTransaction, DbBackend, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
    SqliteTransactionMode, Statement, TransactionOptions,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::entity::{conversation, instance, prompt, prompt_output};
use crate::writes::{PromptSave, Write, Writer, Written};

/// The environment variable that selects the database, e.g. `postgres://…` or `sqlite://…`.
pub const DATABASE_URL_ENV: &str = "AGENTIC_DATABASE_URL";

/// How long a SQLite writer waits for another process's write lock before giving up.
pub const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Options for every write transaction: `BEGIN IMMEDIATE` on SQLite, so a writer takes the
/// lock up front and waits its turn (busy timeout) instead of failing when it upgrades a read.
pub(crate) fn write_options() -> TransactionOptions {
    TransactionOptions {
        sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
        ..TransactionOptions::default()
    }
}

/// Where the default SQLite file lives: `<platform data dir>/agentic/agentic.db`.
pub fn default_database_path() -> anyhow::Result<PathBuf> {
    let base = dirs::data_dir()
        .or_else(|| dirs::home_dir().map(|home| home.join(".local/share")))
        .context("no data directory on this platform; set AGENTIC_DATABASE_URL")?;
    Ok(base.join("agentic").join("agentic.db"))
}

/// `sqlite://` URL for a file path.
pub fn sqlite_url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

/// The URL to use: `AGENTIC_DATABASE_URL` when set, else the default SQLite file.
pub fn database_url_from_env() -> anyhow::Result<String> {
    match std::env::var(DATABASE_URL_ENV) {
        Ok(url) if !url.trim().is_empty() => Ok(url),
        _ => Ok(sqlite_url(&default_database_path()?)),
    }
}

/// A conversation as callers see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Conversation {
    pub id: String,
    pub user_id: String,
    pub title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The prompt running or waiting for approval, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_prompt_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Tokens and cost of every prompt of the conversation, archived ones included: filled in
    /// where conversations are listed (`conversations`) and shown with their prompts (the
    /// API's `GET /api/conversations/{id}`), empty elsewhere.
    #[serde(default)]
    pub usage: PromptUsage,
    #[serde(skip)]
    pub title_fixed: bool,
    #[serde(skip)]
    pub state: serde_json::Map<String, Value>,
}

/// A prompt as stored: the prompt and where it sits.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoredPrompt {
    #[serde(flatten)]
    pub prompt: Prompt,
    pub conversation_id: String,
    pub position: i64,
    /// Compressed into the conversation's summary.
    pub archived: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What startup recovery did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Prompts that were running (or waiting in a mode that cannot resume) and are now
    /// `interrupted`.
    pub interrupted: Vec<String>,
    /// Prompts still waiting for approval, resumable.
    pub waiting: Vec<String>,
}

/// An instance on another host that has not renewed its lease for this long is gone (the
/// default of `[conversation] leaseSeconds`).
pub const INSTANCE_LEASE: Duration = Duration::from_secs(60);

pub use agentic_core::{INTERRUPTED_TOOL_ERROR, TAKEN_OVER_TOOL_ERROR};

/// The database behind conversations.
#[derive(Clone)]
pub struct Store {
    db: DatabaseConnection,
    /// Applies every write; on SQLite, batched into group commits by one task of this process
    /// (other processes still meet the busy timeout).
    writer: Writer,
    /// This process's row in `instances`, once registered.
    instance_id: Arc<OnceLock<String>>,
    /// How long an instance on another host is taken for alive after its last heartbeat,
    /// in milliseconds (`[conversation] leaseSeconds`).
    lease_ms: Arc<std::sync::atomic::AtomicU64>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Connects and runs every migration (ours and the plugins' in `extensions`).
    pub async fn open(url: &str, extensions: &Extensions) -> anyhow::Result<Self> {
        let store = Self::connect(url).await?;
        crate::migration::migrate(&store.db, extensions).await?;
        Ok(store)
    }

    /// Connects without migrating. SQLite gets WAL, `synchronous=NORMAL`, a busy timeout and
    /// foreign keys; its file and directory are created when missing.
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        let redacted = redact_url(url);
        if url.starts_with("sqlite:") {
            if let Some(path) = sqlite_file(url)
                && let Some(parent) = path.parent()
                && !parent.as_os_str().is_empty()
            {
                std::fs::create_dir_all(parent).with_context(|| {
                    format!(
                        "could not create the database directory {}",
                        parent.display()
                    )
                })?;
            }
            let mut options = ConnectOptions::new(url.to_owned());
            options
                .max_connections(8)
                .min_connections(1)
                .sqlx_logging(false)
                .map_sqlx_sqlite_opts(|options| {
                    options
                        .create_if_missing(true)
                        .journal_mode(SqliteJournalMode::Wal)
                        .synchronous(SqliteSynchronous::Normal)
                        .busy_timeout(SQLITE_BUSY_TIMEOUT)
                        .foreign_keys(true)
                });
            // Opening runs `PRAGMA journal_mode=WAL`, which can meet SQLITE_BUSY without the
            // busy handler's help while another process checkpoints or recovers the WAL; retry
            // for as long as the busy timeout would have waited.
            let started = std::time::Instant::now();
            let db = loop {
                match Database::connect(options.clone()).await {
                    Ok(db) => break db,
                    Err(error)
                        if error.to_string().contains("database is locked")
                            && started.elapsed() < SQLITE_BUSY_TIMEOUT =>
                    {
                        tokio::time::sleep(Duration::from_millis(50 + fastrand::u64(0..100))).await;
                    }
                    Err(error) => {
                        return Err(anyhow::Error::new(error)
                            .context(format!("could not open the SQLite database {redacted}")));
                    }
                }
            };
            Ok(Self {
                writer: Writer::new(db.clone(), true),
                db,
                instance_id: Arc::default(),
                lease_ms: Arc::new(std::sync::atomic::AtomicU64::new(lease_ms(INSTANCE_LEASE))),
            })
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let mut options = ConnectOptions::new(url.to_owned());
            options
                .max_connections(16)
                .min_connections(1)
                .connect_timeout(Duration::from_secs(10))
                .sqlx_logging(false);
            let db = Database::connect(options)
                .await
                .with_context(|| format!("could not connect to PostgreSQL at {redacted}"))?;
            Ok(Self {
                writer: Writer::new(db.clone(), false),
                db,
                instance_id: Arc::default(),
                lease_ms: Arc::new(std::sync::atomic::AtomicU64::new(lease_ms(INSTANCE_LEASE))),
            })
        } else {
            bail!(
                "unsupported database URL {redacted}: use sqlite://<path> or postgres://<host>/<db>"
            )
        }
    }

    pub fn connection(&self) -> &DatabaseConnection {
        &self.db
    }

    pub fn backend(&self) -> DbBackend {
        self.db.get_database_backend()
    }

    pub(crate) async fn write(&self, write: Write) -> anyhow::Result<Written> {
        self.writer.write(write).await
    }

    /// A plugin's write to its own tables, through the same writer as ours: on SQLite it
    /// shares a `BEGIN IMMEDIATE` group commit, and the answer comes once it is committed. The
    /// closure may run more than once (a failed batch is retried write by write) and must not
    /// act outside the transaction.
    pub async fn write_with<T, F>(&self, write: F) -> anyhow::Result<T>
    where
        T: Send + 'static,
        F: for<'a> Fn(&'a DatabaseTransaction) -> futures::future::BoxFuture<'a, anyhow::Result<T>>
            + Send
            + Sync
            + 'static,
    {
        let custom: crate::writes::CustomWrite = Arc::new(move |transaction| {
            let written = write(transaction);
            Box::pin(async move { Ok(Box::new(written.await?) as Box<dyn std::any::Any + Send>) })
        });
        match self.write(Write::Custom(custom)).await? {
            Written::Value(value) => value
                .downcast::<T>()
                .map(|value| *value)
                .map_err(|_| anyhow::anyhow!("a custom write answered with another type")),
            other => bail!("unexpected answer to a custom write: {other:?}"),
        }
    }

    /// `PRAGMA integrity_check` on SQLite (`ok` when sound); PostgreSQL answers `ok`.
    pub async fn integrity_check(&self) -> anyhow::Result<String> {
        if self.backend() != DbBackend::Sqlite {
            return Ok("ok".to_owned());
        }
        let rows = self
            .db
            .query_all_raw(Statement::from_string(
                DbBackend::Sqlite,
                "PRAGMA integrity_check",
            ))
            .await?;
        let mut lines = Vec::new();
        for row in rows {
            lines.push(row.try_get_by_index::<String>(0)?);
        }
        Ok(lines.join("\n"))
    }

    /// Closes the pool; SQLite checkpoints its WAL into the main file.
    pub async fn close(self) -> anyhow::Result<()> {
        self.db.close().await?;
        Ok(())
    }

    // ----- instances -----

    /// Records this process as a user of the database; prompts it runs carry its id.
    pub async fn register_instance(&self) -> anyhow::Result<String> {
        if let Some(id) = self.instance_id.get() {
            return Ok(id.clone());
        }
        let id = uuid::Uuid::new_v4().to_string();
        let now = Utc::now();
        self.write(Write::RegisterInstance(instance::Model {
            id: id.clone(),
            host: host_name(),
            pid: i64::from(std::process::id()),
            started_at: now,
            last_seen: now,
        }))
        .await?;
        Ok(self.instance_id.get_or_init(|| id).clone())
    }

    /// How long an instance on another host counts as alive after its last heartbeat.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Sets [`Store::lease`] (every server on a database should use the same).
    pub fn set_lease(&self, lease: Duration) {
        self.lease_ms
            .store(lease_ms(lease), std::sync::atomic::Ordering::Relaxed);
    }

    pub fn instance_id(&self) -> Option<&str> {
        self.instance_id.get().map(String::as_str)
    }

    /// Renews this process's lease.
    pub async fn heartbeat(&self) -> anyhow::Result<()> {
        let Some(id) = self.instance_id() else {
            return Ok(());
        };
        let renewed = self
            .write(Write::Heartbeat {
                instance: id.to_owned(),
            })
            .await?;
        if matches!(renewed, Written::Count(0)) {
            // Another process took us for dead (e.g. the database was out of reach for longer
            // than the lease) and swept our row: come back.
            tracing::warn!("this process's instance row was gone; registering again");
            let now = Utc::now();
            self.write(Write::RegisterInstance(instance::Model {
                id: id.to_owned(),
                host: host_name(),
                pid: i64::from(std::process::id()),
                started_at: now,
                last_seen: now,
            }))
            .await?;
        }
        Ok(())
    }

    /// Removes this process's row, e.g. at a clean shutdown.
    pub async fn unregister_instance(&self) -> anyhow::Result<()> {
        let Some(id) = self.instance_id() else {
            return Ok(());
        };
        self.write(Write::DeleteInstances {
            ids: vec![id.to_owned()],
        })
        .await?;
        Ok(())
    }

    /// Instances still alive: this one, and those that renewed their lease lately — on this
    /// host only if their process also still exists (so a killed process is found dead at
    /// once, and a reused pid is found dead when its lease runs out). Rows of the others are
    /// deleted.
    pub(crate) async fn live_instances(&self) -> anyhow::Result<HashSet<String>> {
        let host = host_name();
        let cutoff = Utc::now() - chrono::Duration::from_std(self.lease())?;
        let mut live = HashSet::new();
        let mut dead = Vec::new();
        for row in instance::Entity::find().all(&self.db).await? {
            let alive = if Some(row.id.as_str()) == self.instance_id() {
                true
            } else if row.host == host && can_see_processes() {
                row.last_seen > cutoff && u32::try_from(row.pid).is_ok_and(process_exists)
            } else {
                row.last_seen > cutoff
            };
            if alive {
                live.insert(row.id);
            } else {
                dead.push(row.id);
            }
        }
        if !dead.is_empty() {
            self.write(Write::DeleteInstances { ids: dead }).await?;
        }
        Ok(live)
    }

    // ----- conversations -----

    pub async fn create_conversation(
        &self,
        user_id: &str,
        title: &str,
    ) -> anyhow::Result<Conversation> {
        let now = Utc::now();
        let model = conversation::Model {
            id: uuid::Uuid::new_v4().to_string(),
            user_id: user_id.to_owned(),
            title: title.to_owned(),
            title_fixed: false,
            summary: None,
            state: Value::Object(serde_json::Map::new()),
            active_prompt_id: None,
            created_at: now,
            updated_at: now,
        };
        self.write(Write::CreateConversation(model.clone())).await?;
        Ok(conversation_from_model(model))
    }

    /// The user's conversation with this id; another user's is `None`. Its `usage` is left
    /// empty: this runs at every prompt's start, and the prompts that sum to it are read where
    /// it is shown.
    pub async fn conversation(
        &self,
        user_id: &str,
        id: &str,
    ) -> anyhow::Result<Option<Conversation>> {
        Ok(conversation::Entity::find_by_id(id.to_owned())
            .filter(conversation::Column::UserId.eq(user_id))
            .one(&self.db)
            .await?
            .map(conversation_from_model))
    }

    /// The user's conversations, most recently updated first, each with its usage.
    pub async fn conversations(&self, user_id: &str) -> anyhow::Result<Vec<Conversation>> {
        let mut conversations: Vec<Conversation> = conversation::Entity::find()
            .filter(conversation::Column::UserId.eq(user_id))
            .order_by_desc(conversation::Column::UpdatedAt)
            .all(&self.db)
            .await?
            .into_iter()
            .map(conversation_from_model)
            .collect();
        let mut usage = self.usage_by_conversation(user_id).await?;
        for conversation in &mut conversations {
            if let Some(usage) = usage.remove(&conversation.id) {
                conversation.usage = usage;
            }
        }
        Ok(conversations)
    }

    /// The summed usage of the user's prompts by conversation.
    async fn usage_by_conversation(
        &self,
        user_id: &str,
    ) -> anyhow::Result<HashMap<String, PromptUsage>> {
        let query = prompt::Entity::find()
            .select_only()
            .column(prompt::Column::ConversationId)
            .column(prompt::Column::Usage)
            .filter(prompt::Column::UserId.eq(user_id));
        let rows: Vec<(String, Value)> = query.into_tuple().all(&self.db).await?;
        let mut sums: HashMap<String, PromptUsage> = HashMap::new();
        for (conversation, usage) in rows {
            // A row whose usage does not read (an older shape) counts as none.
            let usage: PromptUsage = serde_json::from_value(usage).unwrap_or_default();
            sums.entry(conversation).or_default().add(&usage);
        }
        Ok(sums)
    }

    /// Deletes a conversation with its prompts; `false` when the user has none with this id.
    pub async fn delete_conversation(&self, user_id: &str, id: &str) -> anyhow::Result<bool> {
        let written = self
            .write(Write::DeleteConversation {
                user_id: user_id.to_owned(),
                id: id.to_owned(),
            })
            .await?;
        Ok(matches!(written, Written::Count(deleted) if deleted > 0))
    }

    pub async fn set_title(&self, id: &str, title: &str, fixed: bool) -> anyhow::Result<()> {
        self.write(Write::SetTitle {
            id: id.to_owned(),
            title: title.to_owned(),
            fixed,
        })
        .await?;
        Ok(())
    }

    /// A claim token for this process: `claim:<instance>:<8 hex>` (51 characters, within the
    /// column's 64), so that recovery can tell whose it is.
    pub fn claim_token(&self) -> String {
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        format!(
            "claim:{}:{}",
            self.instance_id().unwrap_or("none"),
            &nonce[..8]
        )
    }

    /// Makes `prompt_id` the conversation's active prompt. Fails with the active prompt's id
    /// when another one holds it. Safe across processes: one conditional update decides.
    pub async fn claim(
        &self,
        conversation_id: &str,
        prompt_id: &str,
    ) -> anyhow::Result<Result<(), String>> {
        match self
            .write(Write::Claim {
                conversation_id: conversation_id.to_owned(),
                holder: prompt_id.to_owned(),
            })
            .await?
        {
            Written::Claim(claim) => Ok(claim),
            other => bail!("unexpected answer to a claim: {other:?}"),
        }
    }

    /// Ends a prompt's hold on its conversation and records the state it leaves behind.
    pub async fn release(
        &self,
        conversation_id: &str,
        prompt_id: &str,
        state: Option<serde_json::Map<String, Value>>,
    ) -> anyhow::Result<()> {
        self.write(Write::Release {
            conversation_id: conversation_id.to_owned(),
            holder: prompt_id.to_owned(),
            state: state.map(Value::Object),
        })
        .await?;
        Ok(())
    }

    // ----- prompts -----

    /// Stores a new prompt at the end of its conversation; returns its position.
    pub async fn insert_prompt(
        &self,
        conversation_id: &str,
        prompt: &Prompt,
    ) -> anyhow::Result<i64> {
        self.insert_claimed_prompt(conversation_id, prompt, None, None)
            .await
    }

    /// Stores a new prompt and, in the same transaction, hands the conversation's hold from
    /// `claim` (a token from [`Store::claim`]) to the prompt and sets `title`.
    pub async fn insert_claimed_prompt(
        &self,
        conversation_id: &str,
        prompt: &Prompt,
        claim: Option<&str>,
        title: Option<&str>,
    ) -> anyhow::Result<i64> {
        let now = Utc::now();
        let model = prompt::Model {
            id: prompt.id.clone(),
            conversation_id: conversation_id.to_owned(),
            user_id: prompt.user_id.clone(),
            position: 0,
            mode: prompt.mode.clone(),
            model: prompt.model.as_str().to_owned(),
            state: prompt.state.as_str().to_owned(),
            visible: prompt.visible,
            input: prompt.input.clone(),
            output: serde_json::to_value(&prompt.output)?,
            usage: serde_json::to_value(&prompt.usage)?,
            error: prompt.error.clone(),
            archived: false,
            instance_id: self.instance_id().map(str::to_owned),
            created_at: now,
            updated_at: now,
        };
        match self
            .write(Write::InsertPrompt {
                model,
                claim: claim.map(str::to_owned),
                title: title.map(str::to_owned),
            })
            .await?
        {
            Written::Position(position) => Ok(position),
            other => bail!("unexpected answer to a prompt insert: {other:?}"),
        }
    }

    /// Commits one change of a prompt. While it runs, the changed output goes to the journal;
    /// once it rests, the whole timeline is folded into the prompt row and the journal cleared.
    pub async fn save_prompt(&self, prompt: &Prompt, change: PromptChange) -> anyhow::Result<()> {
        let resting = prompt.state != PromptState::Running;
        let journal = match change {
            PromptChange::Output(index) if !resting => match prompt.output.get(index) {
                Some(output) => Some((i64::try_from(index)?, serde_json::to_value(output)?)),
                None => None,
            },
            _ => None,
        };
        self.write(Write::SavePrompt(PromptSave {
            id: prompt.id.clone(),
            state: prompt.state,
            visible: prompt.visible,
            usage: serde_json::to_value(&prompt.usage)?,
            error: prompt.error.clone(),
            instance_id: self.instance_id().map(str::to_owned),
            journal,
            output: if resting {
                Some(serde_json::to_value(&prompt.output)?)
            } else {
                None
            },
        }))
        .await?;
        Ok(())
    }

    /// Appends an entry to a prompt's mode journal ([`PromptCheckpoint::append_journal`]).
    ///
    /// [`PromptCheckpoint::append_journal`]: agentic_core::PromptCheckpoint::append_journal
    pub async fn append_journal(&self, prompt_id: &str, entry: &Value) -> anyhow::Result<()> {
        self.write(Write::AppendJournal {
            prompt_id: prompt_id.to_owned(),
            entry: serde_json::to_string(entry)?,
        })
        .await?;
        Ok(())
    }

    /// A prompt's mode journal, oldest entry first.
    pub async fn journal_entries(&self, prompt_id: &str) -> anyhow::Result<Vec<Value>> {
        let rows = crate::entity::prompt_journal::Entity::find()
            .filter(crate::entity::prompt_journal::Column::PromptId.eq(prompt_id))
            .order_by_asc(crate::entity::prompt_journal::Column::Id)
            .all(&self.db)
            .await?;
        rows.iter()
            .map(|row| Ok(serde_json::from_str(&row.entry)?))
            .collect()
    }

    /// Drops the journals of prompts that completed, failed or were cancelled; returns how
    /// many entries went.
    pub async fn prune_journals(&self) -> anyhow::Result<u64> {
        match self.write(Write::PruneJournals).await? {
            Written::Count(count) => Ok(count),
            other => bail!("unexpected answer to a journal prune: {other:?}"),
        }
    }

    /// Every prompt of a conversation, in order, archived ones included.
    pub async fn conversation_prompts(
        &self,
        conversation_id: &str,
    ) -> anyhow::Result<Vec<StoredPrompt>> {
        let rows = prompt::Entity::find()
            .filter(prompt::Column::ConversationId.eq(conversation_id))
            .order_by_asc(prompt::Column::Position)
            .all(&self.db)
            .await?;
        let running: Vec<String> = rows
            .iter()
            .filter(|row| row.state == PromptState::Running.as_str())
            .map(|row| row.id.clone())
            .collect();
        let mut journal = if running.is_empty() {
            Vec::new()
        } else {
            prompt_output::Entity::find()
                .filter(prompt_output::Column::PromptId.is_in(running))
                .order_by_asc(prompt_output::Column::PromptId)
                .order_by_asc(prompt_output::Column::Position)
                .all(&self.db)
                .await?
        };
        let mut prompts = Vec::with_capacity(rows.len());
        for row in rows {
            let own: Vec<prompt_output::Model> = if row.state == PromptState::Running.as_str() {
                let (own, rest) = journal
                    .into_iter()
                    .partition(|entry| entry.prompt_id == row.id);
                journal = rest;
                own
            } else {
                Vec::new()
            };
            prompts.push(stored_prompt(row, own)?);
        }
        Ok(prompts)
    }

    /// One prompt of the user's; another user's is `None`.
    pub async fn prompt(
        &self,
        user_id: &str,
        prompt_id: &str,
    ) -> anyhow::Result<Option<StoredPrompt>> {
        let Some(row) = prompt::Entity::find_by_id(prompt_id.to_owned())
            .filter(prompt::Column::UserId.eq(user_id))
            .one(&self.db)
            .await?
        else {
            return Ok(None);
        };
        let journal = self.journal(&row).await?;
        Ok(Some(stored_prompt(row, journal)?))
    }

    /// The server whose process last ran the user's prompt, when that server is still alive
    /// and is not this one: where a decision about the prompt has to go.
    pub async fn live_owner(
        &self,
        user_id: &str,
        prompt_id: &str,
    ) -> anyhow::Result<Option<String>> {
        let Some(row) = prompt::Entity::find_by_id(prompt_id.to_owned())
            .filter(prompt::Column::UserId.eq(user_id))
            .one(&self.db)
            .await?
        else {
            return Ok(None);
        };
        let Some(owner) = row.instance_id else {
            return Ok(None);
        };
        if Some(owner.as_str()) == self.instance_id() {
            return Ok(None);
        }
        Ok(self
            .live_instances()
            .await?
            .contains(&owner)
            .then_some(owner))
    }

    async fn journal(&self, row: &prompt::Model) -> anyhow::Result<Vec<prompt_output::Model>> {
        if row.state != PromptState::Running.as_str() {
            return Ok(Vec::new());
        }
        Ok(prompt_output::Entity::find()
            .filter(prompt_output::Column::PromptId.eq(row.id.as_str()))
            .order_by_asc(prompt_output::Column::Position)
            .all(&self.db)
            .await?)
    }

    /// Marks prompts archived and sets the summary that replaces them in history.
    pub async fn archive(
        &self,
        conversation_id: &str,
        prompt_ids: &[String],
        summary: &str,
    ) -> anyhow::Result<()> {
        self.write(Write::Archive {
            conversation_id: conversation_id.to_owned(),
            prompt_ids: prompt_ids.to_vec(),
            summary: summary.to_owned(),
        })
        .await?;
        Ok(())
    }

    /// Makes this instance the owner of every `running` prompt whose instance is gone and that
    /// `resumable` accepts, one prompt at a time and only if no other instance took it first;
    /// returns the prompts it took, as stored.
    pub async fn take_over(
        &self,
        resumable: &(dyn Fn(&Prompt) -> bool + Send + Sync),
    ) -> anyhow::Result<Vec<StoredPrompt>> {
        let Some(me) = self.instance_id().map(str::to_owned) else {
            return Ok(Vec::new());
        };
        let owners = self.owners_of(&[PromptState::Running]).await?;
        if owners.is_empty() {
            return Ok(Vec::new());
        }
        let live = self.live_instances().await?;
        let mut taken = Vec::new();
        for (id, owner) in owners {
            if owner
                .as_ref()
                .is_some_and(|instance| live.contains(instance))
            {
                continue;
            }
            // Read whole only now: the live servers' prompts, usually all of them, are not.
            let Some(row) = prompt::Entity::find_by_id(id)
                .filter(prompt::Column::State.eq(PromptState::Running.as_str()))
                .one(&self.db)
                .await?
            else {
                continue;
            };
            let previous = row.instance_id.clone();
            if previous != owner {
                continue;
            }
            let journal = self.journal(&row).await?;
            let Ok(stored) = stored_prompt(row, journal) else {
                continue;
            };
            if !resumable(&stored.prompt) {
                continue;
            }
            if self
                .reassign(&stored.prompt.id, PromptState::Running, previous, &me)
                .await?
            {
                taken.push(stored);
            }
        }
        Ok(taken)
    }

    /// The ids and owners of the prompts in `states`, without their outputs: what the sweeps
    /// look at before they read a prompt whole.
    async fn owners_of(
        &self,
        states: &[PromptState],
    ) -> anyhow::Result<Vec<(String, Option<String>)>> {
        Ok(prompt::Entity::find()
            .select_only()
            .column(prompt::Column::Id)
            .column(prompt::Column::InstanceId)
            .filter(prompt::Column::State.is_in(states.iter().map(|state| state.as_str())))
            .into_tuple()
            .all(&self.db)
            .await?)
    }

    /// Makes this process the owner of a prompt waiting for approval whose owner is gone, so
    /// that of two servers taking decisions about it at once only one rebuilds it (and runs
    /// the approved call). False when another instance took it first; true when it is
    /// already this one's.
    pub async fn adopt_waiting(&self, prompt_id: &str) -> anyhow::Result<bool> {
        let Some(me) = self.instance_id().map(str::to_owned) else {
            return Ok(true);
        };
        let Some(row) = prompt::Entity::find_by_id(prompt_id.to_owned())
            .one(&self.db)
            .await?
        else {
            return Ok(false);
        };
        if row.instance_id.as_deref() == Some(me.as_str()) {
            return Ok(true);
        }
        self.reassign(
            prompt_id,
            PromptState::WaitingForApproval,
            row.instance_id,
            &me,
        )
        .await
    }

    /// Makes instance `to` the owner of a prompt in `state` that `previous` owned, in one
    /// conditional `UPDATE`: of several servers trying at once, one wins (true).
    async fn reassign(
        &self,
        prompt_id: &str,
        state: PromptState,
        previous: Option<String>,
        to: &str,
    ) -> anyhow::Result<bool> {
        let (id, to) = (prompt_id.to_owned(), to.to_owned());
        let changed = self
            .write_with(move |transaction| {
                let (id, to, previous) = (id.clone(), to.clone(), previous.clone());
                Box::pin(async move {
                    let update = prompt::Entity::update_many()
                        .col_expr(
                            prompt::Column::InstanceId,
                            sea_orm::sea_query::Expr::value(Some(to)),
                        )
                        .filter(prompt::Column::Id.eq(id))
                        .filter(prompt::Column::State.eq(state.as_str()));
                    let update = match previous {
                        Some(previous) => update.filter(prompt::Column::InstanceId.eq(previous)),
                        None => update.filter(prompt::Column::InstanceId.is_null()),
                    };
                    Ok(update.exec(transaction).await?.rows_affected)
                })
            })
            .await?;
        Ok(changed == 1)
    }

    /// Run at startup and then now and again: every `running` prompt of an instance that is
    /// gone becomes `interrupted` with its pending tool results closed as errors, and so does
    /// every such prompt waiting for approval in a mode that cannot resume (`resumable` says
    /// which can). Their conversations are released. Prompts of live instances are theirs.
    pub async fn recover(
        &self,
        resumable: &(dyn Fn(&Prompt) -> bool + Send + Sync),
    ) -> anyhow::Result<Recovery> {
        let owners = self
            .owners_of(&[PromptState::Running, PromptState::WaitingForApproval])
            .await?;
        let claimed = conversation::Entity::find()
            .filter(conversation::Column::ActivePromptId.like("claim:%"))
            .all(&self.db)
            .await?;
        // Read after the prompts and the claims: an instance registers before it stores a
        // prompt or takes a conversation, so every instance named above is in this list if it
        // is alive.
        let live = self.live_instances().await?;
        let mut recovery = Recovery::default();
        // Conversations held by a claim token of a process that is gone (it died between
        // taking the conversation and storing its prompt) are released.
        for conversation in claimed {
            let Some(token) = conversation.active_prompt_id else {
                continue;
            };
            let owner = token.split(':').nth(1).unwrap_or_default();
            if !live.contains(owner) {
                self.release(&conversation.id, &token, None).await?;
            }
        }
        for (id, owner) in owners {
            if owner
                .as_ref()
                .is_some_and(|instance| live.contains(instance))
            {
                continue;
            }
            let Some(row) = prompt::Entity::find_by_id(id)
                .filter(prompt::Column::State.is_in([
                    PromptState::Running.as_str(),
                    PromptState::WaitingForApproval.as_str(),
                ]))
                .one(&self.db)
                .await?
            else {
                continue;
            };
            if row.instance_id != owner {
                continue;
            }
            let conversation_id = row.conversation_id.clone();
            let id = row.id.clone();
            let journal = self.journal(&row).await?;
            let mut prompt = match stored_prompt(row, journal) {
                Ok(stored) => stored.prompt,
                Err(error) => {
                    tracing::error!(prompt = %id, error = %format!("{error:#}"), "cannot read a prompt left unfinished; leaving it as it is");
                    continue;
                }
            };
            if prompt.state == PromptState::WaitingForApproval && resumable(&prompt) {
                recovery.waiting.push(prompt.id.clone());
                continue;
            }
            let was_waiting = prompt.state == PromptState::WaitingForApproval;
            interrupt(&mut prompt, was_waiting);
            self.save_prompt(&prompt, PromptChange::Prompt).await?;
            self.release(&conversation_id, &prompt.id, None).await?;
            recovery.interrupted.push(prompt.id);
        }
        if !recovery.interrupted.is_empty() {
            tracing::warn!(
                prompts = recovery.interrupted.len(),
                "marked prompts interrupted by the last shutdown"
            );
        }
        Ok(recovery)
    }
}

/// Ends a prompt as `interrupted`, closing its pending tool results as errors so the
/// conversation stays valid for the model.
pub fn interrupt(prompt: &mut Prompt, was_waiting: bool) {
    if was_waiting {
        prompt.close_pending_tools(
            agentic_core::ErrorKind::InterruptedWaiting,
            "Interrupted: the process stopped while this tool call waited for approval; it did \
             not run",
        );
    } else {
        prompt.close_pending_tools(agentic_core::ErrorKind::Interrupted, INTERRUPTED_TOOL_ERROR);
    }
    prompt.state = PromptState::Interrupted;
    prompt.error = Some(if was_waiting {
        "interrupted: the process stopped while the prompt waited for approval".to_owned()
    } else {
        "interrupted: the process stopped while the prompt was running".to_owned()
    });
}

fn conversation_from_model(model: conversation::Model) -> Conversation {
    Conversation {
        id: model.id,
        user_id: model.user_id,
        title: model.title,
        summary: model.summary,
        active_prompt_id: model.active_prompt_id,
        created_at: model.created_at,
        updated_at: model.updated_at,
        usage: PromptUsage::default(),
        title_fixed: model.title_fixed,
        state: match model.state {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        },
    }
}

fn stored_prompt(
    row: prompt::Model,
    journal: Vec<prompt_output::Model>,
) -> anyhow::Result<StoredPrompt> {
    let state: PromptState = serde_json::from_value(Value::String(row.state.clone()))
        .with_context(|| format!("prompt {} has an unknown state {:?}", row.id, row.state))?;
    let model: ModelKind = row
        .model
        .parse()
        .map_err(|error: String| anyhow::anyhow!(error))?;
    let mut output: Vec<PromptOutput> = serde_json::from_value(row.output)
        .with_context(|| format!("prompt {} has an unreadable timeline", row.id))?;
    for entry in journal {
        let position = usize::try_from(entry.position)?;
        let item: PromptOutput = serde_json::from_value(entry.output)
            .with_context(|| format!("prompt {} has an unreadable output", row.id))?;
        if position < output.len() {
            output[position] = item;
        } else {
            output.push(item);
        }
    }
    let usage: PromptUsage = serde_json::from_value(row.usage).unwrap_or_default();
    Ok(StoredPrompt {
        prompt: Prompt {
            id: row.id,
            user_id: row.user_id,
            model,
            mode: row.mode,
            visible: row.visible,
            state,
            input: row.input,
            output,
            usage,
            error: row.error,
        },
        conversation_id: row.conversation_id,
        position: row.position,
        archived: row.archived,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

fn lease_ms(lease: Duration) -> u64 {
    u64::try_from(lease.as_millis()).unwrap_or(u64::MAX)
}

/// The host an instance row names. Servers that name the same host judge each other by
/// process id; others by lease. `AGENTIC_INSTANCE_HOST` overrides the system's host name,
/// for hosts whose names are not unique (or to try the lease path on one machine).
fn host_name() -> String {
    std::env::var("AGENTIC_INSTANCE_HOST")
        .ok()
        .filter(|name| !name.trim().is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Whether this system shows processes under `/proc` (Linux); elsewhere leases decide.
fn can_see_processes() -> bool {
    Path::new("/proc/self").exists()
}

fn process_exists(pid: u32) -> bool {
    let path = PathBuf::from(format!("/proc/{pid}/stat"));
    match std::fs::read_to_string(path) {
        // A zombie has exited; it only waits for its parent to notice.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_none_or(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn sqlite_file(url: &str) -> Option<PathBuf> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next().unwrap_or_default();
    if path.is_empty() || path == ":memory:" {
        None
    } else {
        Some(PathBuf::from(path))
    }
}

/// The URL without its password, for messages.
fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

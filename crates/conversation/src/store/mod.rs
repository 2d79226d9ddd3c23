//! The database: connecting (SQLite tuned for concurrent writers, or PostgreSQL), and every
//! read and write conversations need, by subject: `instances`, `conversations`, `prompts`
//! and `takeover`. Every write is a `writes::Write`, applied by
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

mod conversations;
mod instances;
mod prompts;
mod snapshot;
mod takeover;

use instances::lease_ms;
use prompts::stored_prompt;
pub use takeover::interrupt;

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
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recovery {
    /// Prompts that were running (or waiting in a mode that cannot resume) and are now
    /// `interrupted`.
    pub interrupted: Vec<String>,
    /// Prompts still waiting for approval, resumable.
    pub waiting: Vec<String>,
    /// Prompts someone had asked to cancel before their process died, now `cancelled`: each
    /// with its user and the event that says so, for the caller to publish.
    pub cancelled: Vec<(String, String, agentic_core::EventPayload)>,
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

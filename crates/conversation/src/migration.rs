//! Migrations: ours first, then every plugin's, each applied once and recorded in
//! `agentic_migrations`.
//!
//! A plugin adds its own tables from `setup()` with [`register_migrations`]; the store runs
//! them at startup with the same code on SQLite and PostgreSQL.

use std::sync::Arc;

use agentic_core::plugin::{Extensions, SetupContext};
use anyhow::Context as _;
use sea_orm::sea_query::{ColumnDef, ForeignKey, ForeignKeyAction, Index, Table};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement, TransactionTrait};
use sea_orm_migration::{MigrationName, MigrationTrait, SchemaManager};

use crate::store::write_options;

/// Migrations that plugins registered during `setup()`, in registration order.
pub type PluginMigrations = crate::registry::Registry<(String, Arc<dyn MigrationTrait>)>;

impl PluginMigrations {
    /// `plugin/migration` names, in the order they run.
    pub fn names(&self) -> Vec<String> {
        self.list()
            .iter()
            .map(|(plugin, migration)| format!("{plugin}/{}", migration.name()))
            .collect()
    }
}

/// Where plugins find the database: filled when a [`crate::ConversationService`] opens it.
#[derive(Debug, Default)]
pub struct DatabaseSlot {
    store: std::sync::OnceLock<crate::Store>,
}

impl DatabaseSlot {
    pub fn set(&self, store: crate::Store) {
        let _ = self.store.set(store);
    }

    pub fn get(&self) -> Option<&crate::Store> {
        self.store.get()
    }
}

/// The database, for a plugin's tools: `None` when agentic runs without one (e.g. a bare
/// runtime in a test).
pub fn database(services: &agentic_core::Services) -> Option<crate::Store> {
    services
        .extensions
        .get::<DatabaseSlot>()
        .and_then(|slot| slot.get().cloned())
}

/// Gives the plugins of `services` that keep tables a database in memory, dropped with the
/// runtime, if any plugin keeps tables: for a replay, whose tools must change nothing.
pub async fn attach_scratch_database(services: &agentic_core::Services) -> anyhow::Result<()> {
    if services.extensions.get::<DatabaseSlot>().is_none() {
        return Ok(());
    }
    attach_database(services, "sqlite::memory:").await.map(drop)
}

/// Opens (and migrates) the database at `url` and makes it the one `services`' plugins use,
/// as [`crate::ConversationService::open`] does; for runtimes without a conversation service,
/// such as a plugin's tests.
pub async fn attach_database(
    services: &agentic_core::Services,
    url: &str,
) -> anyhow::Result<crate::Store> {
    let store = crate::Store::open(url, &services.extensions).await?;
    services
        .extensions
        .get::<DatabaseSlot>()
        .context("no plugin of this runtime keeps tables (none registered migrations)")?
        .set(store.clone());
    Ok(store)
}

/// The database for a plugin's tools, or the error they give without one. `needed_by` names
/// who needs it, e.g. `"the todo list needs"`.
pub fn tool_database(
    services: &agentic_core::Services,
    needed_by: &str,
) -> Result<crate::Store, agentic_core::ToolError> {
    database(services).ok_or_else(|| {
        agentic_core::ToolError::failed(format!(
            "{needed_by} the conversation database, which is not open here"
        ))
    })
}

/// Registers a plugin's migrations from its `setup()`. They run after ours, in the order
/// given, once per database; their names are recorded as `<plugin>/<migration name>`.
pub fn register_migrations(
    context: &mut SetupContext<'_>,
    plugin: &str,
    migrations: Vec<Arc<dyn MigrationTrait>>,
) {
    context.extensions.get_or_insert_default::<DatabaseSlot>();
    let registry = context
        .extensions
        .get_or_insert_default::<PluginMigrations>();
    for migration in migrations {
        registry.push((plugin.to_owned(), migration));
    }
}

/// The advisory lock under which servers on one PostgreSQL database migrate, one at a time.
const MIGRATION_LOCK: i64 = 7_416_057_330;

/// Applies every migration not yet recorded, each in its own write transaction.
pub async fn migrate(db: &DatabaseConnection, extensions: &Extensions) -> anyhow::Result<()> {
    let backend = db.get_database_backend();
    // `CREATE TABLE IF NOT EXISTS` is not atomic across sessions on PostgreSQL: servers
    // started together on an empty database must take turns from the first statement on.
    let transaction = db.begin_with_options(write_options()).await?;
    if backend == DbBackend::Postgres {
        transaction
            .execute_unprepared(&format!("SELECT pg_advisory_xact_lock({MIGRATION_LOCK})"))
            .await?;
    }
    transaction
        .execute_unprepared(
            "CREATE TABLE IF NOT EXISTS agentic_migrations (\
               name VARCHAR(255) NOT NULL PRIMARY KEY, \
               applied_at VARCHAR(64) NOT NULL)",
        )
        .await
        .context("could not create the migrations table")?;
    transaction
        .commit()
        .await
        .context("could not create the migrations table")?;

    let mut all: Vec<(String, Arc<dyn MigrationTrait>)> = core_migrations()
        .into_iter()
        .map(|migration| (format!("agentic/{}", migration.name()), migration))
        .collect();
    if let Some(registry) = extensions.get::<PluginMigrations>() {
        all.extend(
            registry
                .list()
                .into_iter()
                .map(|(plugin, migration)| (format!("{plugin}/{}", migration.name()), migration)),
        );
    }

    for (name, migration) in all {
        let transaction = db.begin_with_options(write_options()).await?;
        if backend == DbBackend::Postgres {
            // Servers starting together take turns; the second finds the migration applied.
            transaction
                .execute_unprepared(&format!("SELECT pg_advisory_xact_lock({MIGRATION_LOCK})"))
                .await?;
        }
        let applied = transaction
            .query_one_raw(Statement::from_sql_and_values(
                backend,
                match backend {
                    DbBackend::Postgres => "SELECT name FROM agentic_migrations WHERE name = $1",
                    _ => "SELECT name FROM agentic_migrations WHERE name = ?",
                },
                [name.clone().into()],
            ))
            .await?
            .is_some();
        if applied {
            transaction.rollback().await?;
            continue;
        }
        let manager = SchemaManager::new(&transaction);
        migration
            .up(&manager)
            .await
            .with_context(|| format!("migration {name} failed"))?;
        transaction
            .execute_raw(Statement::from_sql_and_values(
                backend,
                match backend {
                    DbBackend::Postgres => {
                        "INSERT INTO agentic_migrations (name, applied_at) VALUES ($1, $2)"
                    }
                    _ => "INSERT INTO agentic_migrations (name, applied_at) VALUES (?, ?)",
                },
                [name.clone().into(), chrono::Utc::now().to_rfc3339().into()],
            ))
            .await?;
        transaction
            .commit()
            .await
            .with_context(|| format!("could not commit migration {name}"))?;
        tracing::info!(migration = %name, "applied");
    }
    Ok(())
}

/// A non-null `timestamp with time zone` column: how every table of ours (and of plugins that
/// want to match) stores times.
pub fn timestamp(name: &'static str) -> ColumnDef {
    ColumnDef::new(name)
        .timestamp_with_time_zone()
        .not_null()
        .to_owned()
}

/// The `id` primary key of a table: a generated id as text (UUIDs), as in all our tables.
pub fn id_key() -> ColumnDef {
    ColumnDef::new("id")
        .string_len(64)
        .not_null()
        .primary_key()
        .to_owned()
}

/// The non-null `user_id` column that scopes a row to its user.
pub fn user_id() -> ColumnDef {
    ColumnDef::new("user_id")
        .string_len(255)
        .not_null()
        .to_owned()
}

fn core_migrations() -> Vec<Arc<dyn MigrationTrait>> {
    vec![
        Arc::new(CreateConversations),
        Arc::new(CreateEventLog),
        Arc::new(CreatePromptJournal),
        Arc::new(IndexEventLogByUser),
        Arc::new(CreatePromptDecisions),
        Arc::new(CreateApprovalScopes),
    ]
}

/// Scopes granted with decisions (`entity::approval_scope`).
struct CreateApprovalScopes;

impl MigrationName for CreateApprovalScopes {
    fn name(&self) -> &str {
        "0006_approval_scopes"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for CreateApprovalScopes {
    async fn up(&self, manager: &SchemaManager) -> Result<(), sea_orm::DbErr> {
        manager
            .create_table(
                Table::create()
                    .table("approval_scopes")
                    .col(id_key())
                    .col(user_id())
                    .col(ColumnDef::new("reach").string_len(32).not_null())
                    .col(ColumnDef::new("tool").string_len(255).not_null())
                    .col(ColumnDef::new("conversation_id").string_len(64).null())
                    .col(ColumnDef::new("prompt_id").string_len(64).not_null())
                    .col(ColumnDef::new("tool_call_id").string_len(255).not_null())
                    .col(timestamp("created_at"))
                    .col(
                        ColumnDef::new("expires_at")
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .col(
                        ColumnDef::new("revoked_at")
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .to_owned(),
            )
            .await?;
        // A call's check reads the user's scopes of one conversation or prompt.
        manager
            .create_index(
                Index::create()
                    .name("approval_scopes_user")
                    .table("approval_scopes")
                    .col("user_id")
                    .col("conversation_id")
                    .to_owned(),
            )
            .await
    }
}

/// Decisions kept until applied (`entity::prompt_decision`).
struct CreatePromptDecisions;

impl MigrationName for CreatePromptDecisions {
    fn name(&self) -> &str {
        "0005_prompt_decisions"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for CreatePromptDecisions {
    async fn up(&self, manager: &SchemaManager) -> Result<(), sea_orm::DbErr> {
        manager
            .create_table(
                Table::create()
                    .table("prompt_decisions")
                    .col(id_key())
                    .col(ColumnDef::new("prompt_id").string_len(64).not_null())
                    .col(user_id())
                    .col(ColumnDef::new("tool_call_id").string_len(255).not_null())
                    .col(ColumnDef::new("verdict").text().not_null())
                    .col(timestamp("created_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .name("prompt_decisions_prompt")
                            .from("prompt_decisions", "prompt_id")
                            .to("prompts", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        // One decision per call (and one cancel per prompt): a second is refused at once.
        manager
            .create_index(
                Index::create()
                    .name("prompt_decisions_call")
                    .table("prompt_decisions")
                    .col("prompt_id")
                    .col("tool_call_id")
                    .unique()
                    .to_owned(),
            )
            .await
    }
}

/// A user's events in order, for replaying from the shared log (`relay::replay_since`).
struct IndexEventLogByUser;

impl MigrationName for IndexEventLogByUser {
    fn name(&self) -> &str {
        "0004_event_log_by_user"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for IndexEventLogByUser {
    async fn up(&self, manager: &SchemaManager) -> Result<(), sea_orm::DbErr> {
        manager
            .create_index(
                Index::create()
                    .name("event_log_user_id")
                    .table("event_log")
                    .col("user_id")
                    .col("id")
                    .to_owned(),
            )
            .await
    }
}

/// Each prompt's mode journal (`entity::prompt_journal`).
struct CreatePromptJournal;

impl MigrationName for CreatePromptJournal {
    fn name(&self) -> &str {
        "0003_prompt_journal"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for CreatePromptJournal {
    async fn up(&self, manager: &SchemaManager) -> Result<(), sea_orm::DbErr> {
        manager
            .create_table(
                Table::create()
                    .table("prompt_journal")
                    .col(
                        ColumnDef::new("id")
                            .big_integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(ColumnDef::new("prompt_id").string_len(64).not_null())
                    .col(ColumnDef::new("entry").text().not_null())
                    .foreign_key(
                        ForeignKey::create()
                            .name("prompt_journal_prompt")
                            .from("prompt_journal", "prompt_id")
                            .to("prompts", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("prompt_journal_prompt")
                    .table("prompt_journal")
                    .col("prompt_id")
                    .col("id")
                    .to_owned(),
            )
            .await
    }
}

/// The log through which servers on one PostgreSQL share their events (`relay.rs`); unused
/// on SQLite.
struct CreateEventLog;

impl MigrationName for CreateEventLog {
    fn name(&self) -> &str {
        "0002_event_log"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for CreateEventLog {
    async fn up(&self, manager: &SchemaManager) -> Result<(), sea_orm::DbErr> {
        manager
            .create_table(
                Table::create()
                    .table("event_log")
                    .if_not_exists()
                    .col(
                        ColumnDef::new("id")
                            .big_integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(user_id())
                    .col(ColumnDef::new("payload").text().not_null())
                    .col(timestamp("created_at"))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("event_log_created_at")
                    .table("event_log")
                    .col("created_at")
                    .to_owned(),
            )
            .await
    }
}

/// The first schema: conversations, prompts and the output journal.
struct CreateConversations;

impl MigrationName for CreateConversations {
    fn name(&self) -> &str {
        "0001_conversations"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for CreateConversations {
    async fn up(&self, manager: &SchemaManager) -> Result<(), sea_orm::DbErr> {
        manager
            .create_table(
                Table::create()
                    .table("conversations")
                    .col(id_key())
                    .col(user_id())
                    .col(ColumnDef::new("title").text().not_null())
                    .col(ColumnDef::new("title_fixed").boolean().not_null())
                    .col(ColumnDef::new("summary").text())
                    .col(ColumnDef::new("state").json().not_null())
                    .col(ColumnDef::new("active_prompt_id").string_len(64))
                    .col(timestamp("created_at"))
                    .col(timestamp("updated_at"))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("conversations_user_updated")
                    .table("conversations")
                    .col("user_id")
                    .col("updated_at")
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table("prompts")
                    .col(id_key())
                    .col(ColumnDef::new("conversation_id").string_len(64).not_null())
                    .col(user_id())
                    .col(ColumnDef::new("position").big_integer().not_null())
                    .col(ColumnDef::new("mode").string_len(64).not_null())
                    .col(ColumnDef::new("model").string_len(64).not_null())
                    .col(ColumnDef::new("state").string_len(32).not_null())
                    .col(ColumnDef::new("visible").boolean().not_null())
                    .col(ColumnDef::new("input").text())
                    .col(ColumnDef::new("output").json().not_null())
                    .col(ColumnDef::new("usage").json().not_null())
                    .col(ColumnDef::new("error").text())
                    .col(ColumnDef::new("archived").boolean().not_null())
                    .col(ColumnDef::new("instance_id").string_len(64))
                    .col(timestamp("created_at"))
                    .col(timestamp("updated_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .name("prompts_conversation")
                            .from("prompts", "conversation_id")
                            .to("conversations", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("prompts_conversation_position")
                    .table("prompts")
                    .col("conversation_id")
                    .col("position")
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("prompts_state")
                    .table("prompts")
                    .col("state")
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table("instances")
                    .col(id_key())
                    .col(ColumnDef::new("host").string_len(255).not_null())
                    .col(ColumnDef::new("pid").big_integer().not_null())
                    .col(timestamp("started_at"))
                    .col(timestamp("last_seen"))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table("prompt_outputs")
                    .col(ColumnDef::new("prompt_id").string_len(64).not_null())
                    .col(ColumnDef::new("position").big_integer().not_null())
                    .col(ColumnDef::new("output").json().not_null())
                    .primary_key(Index::create().col("prompt_id").col("position"))
                    .foreign_key(
                        ForeignKey::create()
                            .name("prompt_outputs_prompt")
                            .from("prompt_outputs", "prompt_id")
                            .to("prompts", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        Ok(())
    }
}

/// A migration that creates tables, then indexes on them: a plugin's first migration, without
/// its own `MigrationName` and `MigrationTrait`. Register it with [`register_migrations`].
#[derive(Debug, Clone)]
pub struct CreateTables {
    name: &'static str,
    tables: Vec<sea_orm::sea_query::TableCreateStatement>,
    indexes: Vec<sea_orm::sea_query::IndexCreateStatement>,
}

impl CreateTables {
    /// A migration recorded as `name` (e.g. `0001_todos`), which must never change.
    pub fn new(name: &'static str) -> Self {
        Self {
            name,
            tables: Vec::new(),
            indexes: Vec::new(),
        }
    }

    /// A table it creates, in order.
    #[must_use]
    pub fn table(mut self, table: &mut sea_orm::sea_query::TableCreateStatement) -> Self {
        self.tables.push(table.to_owned());
        self
    }

    /// An index it creates once the tables are there.
    #[must_use]
    pub fn index(mut self, index: &mut sea_orm::sea_query::IndexCreateStatement) -> Self {
        self.indexes.push(index.to_owned());
        self
    }
}

impl MigrationName for CreateTables {
    fn name(&self) -> &str {
        self.name
    }
}

#[async_trait::async_trait]
impl MigrationTrait for CreateTables {
    async fn up(&self, manager: &SchemaManager) -> Result<(), sea_orm::DbErr> {
        for table in &self.tables {
            manager.create_table(table.clone()).await?;
        }
        for index in &self.indexes {
            manager.create_index(index.clone()).await?;
        }
        Ok(())
    }
}

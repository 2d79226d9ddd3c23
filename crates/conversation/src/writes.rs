//! Every write the store makes, as data, and the group commit that applies them.
//!
//! On SQLite, writes of this process go to one writer task. It takes whatever writes are
//! waiting, applies them in one `BEGIN IMMEDIATE` transaction, commits once, and only then
//! answers each caller: a caller still hears back only after its write is committed (which
//! survives a crash of the process; with `synchronous=NORMAL`, not a power cut), but a
//! thousand concurrent prompts share a few commits instead of queueing for one each. When a
//! write of the batch fails, the batch is rolled back and each write is applied on its own, so
//! the failure stays with its write. Within a batch, consecutive checkpoints of distinct prompts
//! are merged into three statements, since each statement is a round trip to sqlx's SQLite
//! thread. On PostgreSQL each write is its own transaction; the server runs them in parallel.

use std::any::Any;
use std::sync::Arc;

use agentic_core::PromptState;
use anyhow::{Context as _, bail};
use chrono::Utc;
use sea_orm::sea_query::{CaseStatement, Expr, OnConflict};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction, EntityTrait,
    QueryFilter, QuerySelect, Set, TransactionTrait,
};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// Seconds per database commit (one commit may carry many writes), by `backend`.
const DB_WRITE_SECONDS: &str = "agentic_db_write_duration_seconds";
/// Writes (rows changed by one caller) per commit, by `backend`.
const DB_WRITES: &str = "agentic_db_writes_total";

/// Describes the store's metrics for the exporter's `# HELP` lines.
fn describe_metrics() {
    metrics::describe_histogram!(
        DB_WRITE_SECONDS,
        metrics::Unit::Seconds,
        "Database commit latency, by backend"
    );
    metrics::describe_counter!(DB_WRITES, "Writes committed, by backend");
}

use crate::entity::{conversation, instance, prompt, prompt_journal, prompt_output};

/// Most writes applied in one transaction.
const MAX_BATCH: usize = 256;

/// A plugin's own write, applied like ours (batched on SQLite, retried alone if its batch
/// fails, so it may run more than once before it commits: it must not have effects outside
/// the transaction).
pub(crate) type CustomWrite = Arc<
    dyn for<'a> Fn(
            &'a DatabaseTransaction,
        ) -> futures::future::BoxFuture<'a, anyhow::Result<Box<dyn Any + Send>>>
        + Send
        + Sync,
>;

/// One write.
#[derive(Clone)]
pub(crate) enum Write {
    Custom(CustomWrite),
    RegisterInstance(instance::Model),
    Heartbeat {
        instance: String,
    },
    DeleteInstances {
        ids: Vec<String>,
    },
    CreateConversation(conversation::Model),
    DeleteConversation {
        user_id: String,
        id: String,
    },
    SetTitle {
        id: String,
        title: String,
        fixed: bool,
    },
    Claim {
        conversation_id: String,
        holder: String,
    },
    Release {
        conversation_id: String,
        holder: String,
        state: Option<Value>,
    },
    /// A new prompt at the end of its conversation (`position` is filled in). With `claim`,
    /// the conversation's hold passes from that token to the prompt; with `title`, the
    /// conversation gets it.
    InsertPrompt {
        model: prompt::Model,
        claim: Option<String>,
        title: Option<String>,
    },
    SavePrompt(PromptSave),
    /// One entry of a prompt's mode journal.
    AppendJournal {
        prompt_id: String,
        entry: String,
    },
    Archive {
        conversation_id: String,
        prompt_ids: Vec<String>,
        summary: String,
    },
}

/// One checkpoint of a prompt: the changed output (while it runs) and its row's fields.
#[derive(Debug, Clone)]
pub(crate) struct PromptSave {
    pub id: String,
    pub state: PromptState,
    pub visible: bool,
    pub usage: Value,
    pub error: Option<String>,
    pub instance_id: Option<String>,
    /// `(position, output)` to journal, while the prompt runs.
    pub journal: Option<(i64, Value)>,
    /// The whole timeline, once the prompt rests.
    pub output: Option<Value>,
}

impl std::fmt::Debug for Write {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Custom(_) => f.write_str("Custom"),
            Self::RegisterInstance(model) => {
                f.debug_tuple("RegisterInstance").field(model).finish()
            }
            Self::Heartbeat { instance } => f
                .debug_struct("Heartbeat")
                .field("instance", instance)
                .finish(),
            Self::DeleteInstances { ids } => {
                f.debug_struct("DeleteInstances").field("ids", ids).finish()
            }
            Self::CreateConversation(model) => f
                .debug_tuple("CreateConversation")
                .field(&model.id)
                .finish(),
            Self::DeleteConversation { id, .. } => f
                .debug_struct("DeleteConversation")
                .field("id", id)
                .finish(),
            Self::SetTitle { id, .. } => f.debug_struct("SetTitle").field("id", id).finish(),
            Self::Claim {
                conversation_id,
                holder,
            } => f
                .debug_struct("Claim")
                .field("conversation_id", conversation_id)
                .field("holder", holder)
                .finish(),
            Self::Release {
                conversation_id,
                holder,
                ..
            } => f
                .debug_struct("Release")
                .field("conversation_id", conversation_id)
                .field("holder", holder)
                .finish(),
            Self::InsertPrompt { model, .. } => f
                .debug_struct("InsertPrompt")
                .field("id", &model.id)
                .finish(),
            Self::SavePrompt(save) => f.debug_struct("SavePrompt").field("id", &save.id).finish(),
            Self::AppendJournal { prompt_id, .. } => f
                .debug_struct("AppendJournal")
                .field("prompt_id", prompt_id)
                .finish(),
            Self::Archive {
                conversation_id, ..
            } => f
                .debug_struct("Archive")
                .field("conversation_id", conversation_id)
                .finish(),
        }
    }
}

/// What a write answers.
#[derive(Debug)]
pub(crate) enum Written {
    Done,
    /// What a custom write returned, of the type its caller asked for.
    Value(Box<dyn Any + Send>),
    /// Rows affected.
    Count(u64),
    /// A claim: `Err(holder)` when another prompt holds the conversation.
    Claim(Result<(), String>),
    Position(i64),
}

async fn apply(transaction: &DatabaseTransaction, write: Write) -> anyhow::Result<Written> {
    match write {
        Write::Custom(write) => Ok(Written::Value(write(transaction).await?)),
        Write::RegisterInstance(model) => {
            instance::Entity::insert(instance::ActiveModel {
                id: Set(model.id),
                host: Set(model.host),
                pid: Set(model.pid),
                started_at: Set(model.started_at),
                last_seen: Set(model.last_seen),
            })
            .exec_without_returning(transaction)
            .await
            .context("could not register this process")?;
            Ok(Written::Done)
        }
        Write::Heartbeat { instance } => {
            let renewed = instance::Entity::update_many()
                .col_expr(instance::Column::LastSeen, Expr::value(Utc::now()))
                .filter(instance::Column::Id.eq(instance))
                .exec(transaction)
                .await?;
            Ok(Written::Count(renewed.rows_affected))
        }
        Write::DeleteInstances { ids } => {
            let deleted = instance::Entity::delete_many()
                .filter(instance::Column::Id.is_in(ids))
                .exec(transaction)
                .await?;
            Ok(Written::Count(deleted.rows_affected))
        }
        Write::CreateConversation(model) => {
            conversation::Entity::insert(conversation::ActiveModel {
                id: Set(model.id),
                user_id: Set(model.user_id),
                title: Set(model.title),
                title_fixed: Set(model.title_fixed),
                summary: Set(model.summary),
                state: Set(model.state),
                active_prompt_id: Set(model.active_prompt_id),
                created_at: Set(model.created_at),
                updated_at: Set(model.updated_at),
            })
            .exec_without_returning(transaction)
            .await
            .context("could not create the conversation")?;
            Ok(Written::Done)
        }
        Write::DeleteConversation { user_id, id } => {
            let deleted = conversation::Entity::delete_many()
                .filter(conversation::Column::Id.eq(id))
                .filter(conversation::Column::UserId.eq(user_id))
                .exec(transaction)
                .await?;
            Ok(Written::Count(deleted.rows_affected))
        }
        Write::SetTitle { id, title, fixed } => {
            conversation::Entity::update_many()
                .col_expr(conversation::Column::Title, Expr::value(title))
                .col_expr(conversation::Column::TitleFixed, Expr::value(fixed))
                .filter(conversation::Column::Id.eq(id))
                .exec(transaction)
                .await?;
            Ok(Written::Done)
        }
        Write::Claim {
            conversation_id,
            holder,
        } => {
            let claimed = conversation::Entity::update_many()
                .col_expr(conversation::Column::ActivePromptId, Expr::value(holder))
                .filter(conversation::Column::Id.eq(conversation_id.as_str()))
                .filter(conversation::Column::ActivePromptId.is_null())
                .exec(transaction)
                .await?
                .rows_affected;
            if claimed == 1 {
                return Ok(Written::Claim(Ok(())));
            }
            let current = conversation::Entity::find_by_id(conversation_id)
                .one(transaction)
                .await?
                .and_then(|conversation| conversation.active_prompt_id)
                .unwrap_or_default();
            Ok(Written::Claim(Err(current)))
        }
        Write::Release {
            conversation_id,
            holder,
            state,
        } => {
            let mut update = conversation::Entity::update_many()
                .col_expr(
                    conversation::Column::ActivePromptId,
                    Expr::value(Option::<String>::None),
                )
                .col_expr(conversation::Column::UpdatedAt, Expr::value(Utc::now()));
            if let Some(state) = state {
                update = update.col_expr(conversation::Column::State, Expr::value(state));
            }
            update
                .filter(conversation::Column::Id.eq(conversation_id))
                .filter(conversation::Column::ActivePromptId.eq(holder))
                .exec(transaction)
                .await?;
            Ok(Written::Done)
        }
        Write::InsertPrompt {
            model,
            claim,
            title,
        } => {
            // Positions are max + 1: on PostgreSQL, concurrent inserts into one conversation
            // take turns on its row. (SQLite has one writer already.)
            if transaction.get_database_backend() == sea_orm::DbBackend::Postgres {
                conversation::Entity::find_by_id(model.conversation_id.as_str())
                    .lock_exclusive()
                    .one(transaction)
                    .await?;
            }
            let last: Option<i64> = prompt::Entity::find()
                .select_only()
                .column_as(prompt::Column::Position.max(), "max")
                .filter(prompt::Column::ConversationId.eq(model.conversation_id.as_str()))
                .into_tuple::<Option<i64>>()
                .one(transaction)
                .await?
                .flatten();
            let position = last.map_or(0, |last| last + 1);
            let (conversation_id, now) = (model.conversation_id.clone(), model.created_at);
            prompt::Entity::insert(prompt::ActiveModel {
                id: Set(model.id.clone()),
                conversation_id: Set(model.conversation_id),
                user_id: Set(model.user_id),
                position: Set(position),
                mode: Set(model.mode),
                model: Set(model.model),
                state: Set(model.state),
                visible: Set(model.visible),
                input: Set(model.input),
                output: Set(model.output),
                usage: Set(model.usage),
                error: Set(model.error),
                archived: Set(model.archived),
                instance_id: Set(model.instance_id),
                created_at: Set(model.created_at),
                updated_at: Set(model.updated_at),
            })
            .exec_without_returning(transaction)
            .await
            .context("could not store the prompt")?;
            let prompt_id = model.id;
            let mut update = conversation::Entity::update_many()
                .col_expr(conversation::Column::UpdatedAt, Expr::value(now))
                .filter(conversation::Column::Id.eq(conversation_id));
            if let Some(title) = title {
                update = update.col_expr(conversation::Column::Title, Expr::value(title));
            }
            if let Some(token) = &claim {
                update = update
                    .col_expr(conversation::Column::ActivePromptId, Expr::value(prompt_id))
                    .filter(conversation::Column::ActivePromptId.eq(token.as_str()));
            }
            let updated = update.exec(transaction).await?.rows_affected;
            if claim.is_some() && updated != 1 {
                bail!("the conversation's claim was lost before the prompt was stored");
            }
            Ok(Written::Position(position))
        }
        Write::SavePrompt(save) => {
            apply_saves(transaction, &[&save]).await?;
            Ok(Written::Done)
        }
        Write::AppendJournal { prompt_id, entry } => {
            prompt_journal::Entity::insert(prompt_journal::ActiveModel {
                prompt_id: Set(prompt_id),
                entry: Set(entry),
                ..Default::default()
            })
            .exec_without_returning(transaction)
            .await
            .context("could not append to the prompt's journal")?;
            Ok(Written::Done)
        }
        Write::Archive {
            conversation_id,
            prompt_ids,
            summary,
        } => {
            prompt::Entity::update_many()
                .col_expr(prompt::Column::Archived, Expr::value(true))
                .filter(prompt::Column::ConversationId.eq(conversation_id.as_str()))
                .filter(prompt::Column::Id.is_in(prompt_ids))
                .exec(transaction)
                .await?;
            conversation::Entity::update_many()
                .col_expr(conversation::Column::Summary, Expr::value(summary))
                .filter(conversation::Column::Id.eq(conversation_id))
                .exec(transaction)
                .await?;
            Ok(Written::Done)
        }
    }
}

type Reply = oneshot::Sender<anyhow::Result<Written>>;

/// Applies writes: batched through one task on SQLite, one transaction each on PostgreSQL.
#[derive(Clone)]
pub(crate) struct Writer {
    db: DatabaseConnection,
    queue: Option<mpsc::UnboundedSender<(Write, Reply)>>,
}

impl Writer {
    pub(crate) fn new(db: DatabaseConnection, group_commit: bool) -> Self {
        describe_metrics();
        let queue = group_commit.then(|| {
            let (sender, receiver) = mpsc::unbounded_channel();
            tokio::spawn(group_commit_loop(db.clone(), receiver));
            sender
        });
        Self { db, queue }
    }

    /// Applies one write and waits until it is durable; its latency (queue and commit, as
    /// the caller waits) goes to the database-write metrics.
    pub(crate) async fn write(&self, write: Write) -> anyhow::Result<Written> {
        let start = std::time::Instant::now();
        let result = self.write_now(write).await;
        let backend = match self.db.get_database_backend() {
            sea_orm::DbBackend::Sqlite => "sqlite",
            sea_orm::DbBackend::Postgres => "postgres",
            _ => "other",
        };
        metrics::histogram!(DB_WRITE_SECONDS, "backend" => backend)
            .record(start.elapsed().as_secs_f64());
        if result.is_ok() {
            metrics::counter!(DB_WRITES, "backend" => backend).increment(1);
        }
        result
    }

    async fn write_now(&self, write: Write) -> anyhow::Result<Written> {
        let Some(queue) = &self.queue else {
            return apply_alone(&self.db, write).await;
        };
        let (reply, answer) = oneshot::channel();
        queue
            .send((write, reply))
            .map_err(|_| anyhow::anyhow!("the database writer has stopped"))?;
        answer
            .await
            .map_err(|_| anyhow::anyhow!("the database writer stopped before answering"))?
    }
}

async fn group_commit_loop(
    db: DatabaseConnection,
    mut receiver: mpsc::UnboundedReceiver<(Write, Reply)>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = receiver.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match receiver.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        commit_batch(&db, &mut batch).await;
    }
}

async fn commit_batch(db: &DatabaseConnection, batch: &mut Vec<(Write, Reply)>) {
    // The common case: every write succeeds, and the batch costs one transaction.
    match apply_all(db, batch).await {
        Ok(written) => {
            for ((_, reply), written) in batch.drain(..).zip(written) {
                let _ = reply.send(Ok(written));
            }
        }
        // One write failed (or the commit did): nothing of the batch was kept. Apply each on
        // its own, so the failure stays with the write that caused it.
        Err(_) => {
            for (write, reply) in batch.drain(..) {
                let _ = reply.send(apply_alone(db, write).await);
            }
        }
    }
}

async fn apply_all(
    db: &DatabaseConnection,
    batch: &[(Write, Reply)],
) -> anyhow::Result<Vec<Written>> {
    let transaction = db
        .begin_with_options(crate::store::write_options())
        .await
        .context("could not start a write transaction")?;
    let mut written = Vec::with_capacity(batch.len());
    let mut next = 0;
    while next < batch.len() {
        let saves = distinct_saves(&batch[next..]);
        if !saves.is_empty() {
            apply_saves(&transaction, &saves).await?;
            written.extend(saves.iter().map(|_| Written::Done));
            next += saves.len();
        } else {
            written.push(apply(&transaction, batch[next].0.clone()).await?);
            next += 1;
        }
    }
    transaction.commit().await.context("could not commit")?;
    Ok(written)
}

/// Most prompt checkpoints merged into one set of statements. Each merged column is a `CASE`
/// over the prompts' ids, so the work per row grows with the group.
const MAX_MERGED_SAVES: usize = 32;

/// The checkpoints at the start of `batch` that can be merged: consecutive, and of distinct
/// prompts, so their order within the group does not matter.
fn distinct_saves(batch: &[(Write, Reply)]) -> Vec<&PromptSave> {
    let mut saves: Vec<&PromptSave> = Vec::new();
    for (write, _) in batch.iter().take(MAX_MERGED_SAVES) {
        match write {
            Write::SavePrompt(save) if saves.iter().all(|seen| seen.id != save.id) => {
                saves.push(save);
            }
            _ => break,
        }
    }
    saves
}

/// Prompts' checkpoints, however many, in at most three statements: one insert of every
/// journalled output, one update of every prompt row, one journal delete for the prompts
/// that came to rest. Each statement is a round trip to the database's worker thread,
/// which under load costs more than the statement.
async fn apply_saves(
    transaction: &DatabaseTransaction,
    saves: &[&PromptSave],
) -> anyhow::Result<()> {
    let journal: Vec<prompt_output::ActiveModel> = saves
        .iter()
        .filter_map(|save| {
            let (position, output) = save.journal.as_ref()?;
            Some(prompt_output::ActiveModel {
                prompt_id: Set(save.id.clone()),
                position: Set(*position),
                output: Set(output.clone()),
            })
        })
        .collect();
    if !journal.is_empty() {
        prompt_output::Entity::insert_many(journal)
            .on_conflict(
                OnConflict::columns([
                    prompt_output::Column::PromptId,
                    prompt_output::Column::Position,
                ])
                .update_column(prompt_output::Column::Output)
                .to_owned(),
            )
            .exec_without_returning(transaction)
            .await
            .context("could not journal the outputs")?;
    }

    // One `CASE id WHEN … THEN … END` per column; a column only some saves change keeps its
    // value for the others. A lone save sets its values directly.
    let by_id = |value: &dyn Fn(&PromptSave) -> Option<Expr>, column: prompt::Column| {
        if let [save] = saves
            && let Some(value) = value(save)
        {
            return value;
        }
        let mut case = CaseStatement::new();
        let mut all = true;
        for save in saves {
            match value(save) {
                Some(value) => case = case.case(prompt::Column::Id.eq(save.id.as_str()), value),
                None => all = false,
            }
        }
        if !all {
            case = case.finally(Expr::col(column));
        }
        let expression: Expr = case.into();
        expression
    };
    let ids: Vec<&str> = saves.iter().map(|save| save.id.as_str()).collect();
    let mut update = prompt::Entity::update_many()
        .col_expr(
            prompt::Column::State,
            by_id(
                &|save| Some(Expr::value(save.state.as_str())),
                prompt::Column::State,
            ),
        )
        .col_expr(
            prompt::Column::Visible,
            by_id(
                &|save| Some(Expr::value(save.visible)),
                prompt::Column::Visible,
            ),
        )
        .col_expr(
            prompt::Column::Usage,
            by_id(
                &|save| Some(Expr::value(save.usage.clone())),
                prompt::Column::Usage,
            ),
        )
        .col_expr(
            prompt::Column::Error,
            by_id(
                &|save| Some(Expr::value(save.error.clone())),
                prompt::Column::Error,
            ),
        )
        .col_expr(prompt::Column::UpdatedAt, Expr::value(Utc::now()));
    if saves.iter().any(|save| save.instance_id.is_some()) {
        update = update.col_expr(
            prompt::Column::InstanceId,
            by_id(
                &|save| save.instance_id.clone().map(Expr::value),
                prompt::Column::InstanceId,
            ),
        );
    }
    if saves.iter().any(|save| save.output.is_some()) {
        update = update.col_expr(
            prompt::Column::Output,
            by_id(
                &|save| save.output.clone().map(Expr::value),
                prompt::Column::Output,
            ),
        );
    }
    let updated = update
        .filter(prompt::Column::Id.is_in(ids))
        .exec(transaction)
        .await?
        .rows_affected;
    if updated != saves.len() as u64 {
        if let [save] = saves {
            bail!(
                "prompt {} is not stored (was its conversation deleted?)",
                save.id
            );
        }
        // The batch is applied again one write at a time, which names the missing prompt.
        bail!(
            "{} of {} prompts to save are not stored",
            saves.len() as u64 - updated,
            saves.len()
        );
    }

    let resting: Vec<&str> = saves
        .iter()
        .filter(|save| save.output.is_some())
        .map(|save| save.id.as_str())
        .collect();
    if !resting.is_empty() {
        prompt_output::Entity::delete_many()
            .filter(prompt_output::Column::PromptId.is_in(resting))
            .exec(transaction)
            .await?;
    }
    Ok(())
}

async fn apply_alone(db: &DatabaseConnection, write: Write) -> anyhow::Result<Written> {
    let transaction = db
        .begin_with_options(crate::store::write_options())
        .await
        .context("could not start a write transaction")?;
    let written = apply(&transaction, write).await?;
    transaction.commit().await.context("could not commit")?;
    Ok(written)
}

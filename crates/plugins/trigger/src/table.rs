//! The plugin's tables and every read and write of them: `triggers` (one row per trigger, with
//! its `next_fire_at`) and `trigger_conversations` (each user's trigger conversation).
//!
//! Writes go through [`Store::write_with`]; each closure does nothing outside its transaction,
//! as that allows it to run twice.

use agentic_conversation::CreateTables;
use agentic_conversation::Store;
use agentic_conversation::migration::{id_key, timestamp, user_id};
use agentic_conversation::sea_orm_migration::MigrationTrait;
use chrono::{DateTime, Utc};
use sea_orm::sea_query::{ColumnDef, Index, Table};
use sea_orm::{
    ActiveValue::NotSet, ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};

pub mod triggers {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "triggers")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub user_id: String,
        #[sea_orm(column_type = "Text")]
        pub name: String,
        /// The cron expression, or the one-shot time in RFC 3339.
        #[sea_orm(column_type = "Text")]
        pub schedule: String,
        /// `cron` or `once`.
        pub kind: String,
        #[sea_orm(column_type = "Text")]
        pub input: String,
        pub mode: String,
        /// When it fires next; `None` once a one-shot has fired.
        pub next_fire_at: Option<DateTimeUtc>,
        /// A one-shot that has fired (or a schedule that can fire no more).
        pub done: bool,
        pub last_fired_at: Option<DateTimeUtc>,
        pub last_prompt_id: Option<String>,
        #[sea_orm(column_type = "Text", nullable)]
        pub last_error: Option<String>,
        pub created_at: DateTimeUtc,
        pub updated_at: DateTimeUtc,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod trigger_conversations {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "trigger_conversations")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub user_id: String,
        pub conversation_id: String,
        pub created_at: DateTimeUtc,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub use triggers::Model as TriggerRow;

/// Creates both tables.
pub(crate) fn migration() -> std::sync::Arc<dyn MigrationTrait> {
    std::sync::Arc::new(
        CreateTables::new("0001_triggers")
            .table(
                Table::create()
                    .table("triggers")
                    .col(id_key())
                    .col(user_id())
                    .col(ColumnDef::new("name").text().not_null())
                    .col(ColumnDef::new("schedule").text().not_null())
                    .col(ColumnDef::new("kind").string_len(16).not_null())
                    .col(ColumnDef::new("input").text().not_null())
                    .col(ColumnDef::new("mode").string_len(64).not_null())
                    .col(ColumnDef::new("next_fire_at").timestamp_with_time_zone())
                    .col(ColumnDef::new("done").boolean().not_null())
                    .col(ColumnDef::new("last_fired_at").timestamp_with_time_zone())
                    .col(ColumnDef::new("last_prompt_id").string_len(64))
                    .col(ColumnDef::new("last_error").text())
                    .col(timestamp("created_at"))
                    .col(timestamp("updated_at")),
            )
            .index(
                Index::create()
                    .name("triggers_user")
                    .table("triggers")
                    .col("user_id"),
            )
            .index(
                Index::create()
                    .name("triggers_due")
                    .table("triggers")
                    .col("done")
                    .col("next_fire_at"),
            )
            .table(
                Table::create()
                    .table("trigger_conversations")
                    .col(
                        ColumnDef::new("user_id")
                            .string_len(255)
                            .not_null()
                            .primary_key(),
                    )
                    .col(ColumnDef::new("conversation_id").string_len(64).not_null())
                    .col(timestamp("created_at")),
            ),
    )
}

/// Which of a user's triggers to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    Pending,
    Done,
    All,
}

pub async fn insert(store: &Store, row: TriggerRow) -> anyhow::Result<()> {
    store
        .write_with(move |transaction| {
            let row = row.clone();
            Box::pin(async move {
                triggers::Entity::insert(active(row))
                    .exec_without_returning(transaction)
                    .await?;
                Ok(())
            })
        })
        .await?;
    Ok(())
}

/// The user's triggers, oldest first.
pub async fn list(
    store: &Store,
    user_id: &str,
    listing: Listing,
) -> anyhow::Result<Vec<TriggerRow>> {
    let mut query = triggers::Entity::find()
        .filter(triggers::Column::UserId.eq(user_id))
        .order_by_asc(triggers::Column::CreatedAt)
        .order_by_asc(triggers::Column::Id);
    match listing {
        Listing::Pending => query = query.filter(triggers::Column::Done.eq(false)),
        Listing::Done => query = query.filter(triggers::Column::Done.eq(true)),
        Listing::All => {}
    }
    Ok(query.all(store.connection()).await?)
}

/// How many triggers the user has that can still fire.
pub async fn count_pending(store: &Store, user_id: &str) -> anyhow::Result<u64> {
    Ok(triggers::Entity::find()
        .filter(triggers::Column::UserId.eq(user_id))
        .filter(triggers::Column::Done.eq(false))
        .count(store.connection())
        .await?)
}

pub async fn get(store: &Store, user_id: &str, id: &str) -> anyhow::Result<Option<TriggerRow>> {
    Ok(triggers::Entity::find_by_id(id.to_owned())
        .filter(triggers::Column::UserId.eq(user_id))
        .one(store.connection())
        .await?)
}

/// Deletes the user's trigger; `false` when they have none with this id.
pub async fn delete(store: &Store, user_id: &str, id: &str) -> anyhow::Result<bool> {
    let (user_id, id) = (user_id.to_owned(), id.to_owned());
    let deleted = store
        .write_with(move |transaction| {
            let (user_id, id) = (user_id.clone(), id.clone());
            Box::pin(async move {
                let result = triggers::Entity::delete_many()
                    .filter(triggers::Column::Id.eq(id))
                    .filter(triggers::Column::UserId.eq(user_id))
                    .exec(transaction)
                    .await?;
                Ok(result.rows_affected)
            })
        })
        .await?;
    Ok(deleted > 0)
}

/// Triggers of every user due at `now`, the most overdue first.
pub async fn due(store: &Store, now: DateTime<Utc>, limit: u64) -> anyhow::Result<Vec<TriggerRow>> {
    Ok(triggers::Entity::find()
        .filter(triggers::Column::Done.eq(false))
        .filter(triggers::Column::NextFireAt.lte(now))
        .order_by_asc(triggers::Column::NextFireAt)
        .order_by_asc(triggers::Column::Id)
        .limit(limit)
        .all(store.connection())
        .await?)
}

/// The earliest time any trigger fires next.
pub async fn next_fire_at(store: &Store) -> anyhow::Result<Option<DateTime<Utc>>> {
    Ok(triggers::Entity::find()
        .filter(triggers::Column::Done.eq(false))
        .filter(triggers::Column::NextFireAt.is_not_null())
        .order_by_asc(triggers::Column::NextFireAt)
        .one(store.connection())
        .await?
        .and_then(|row| row.next_fire_at))
}

/// Takes the slot `row.next_fire_at` for this process: one conditional update moves the
/// trigger on to `next` (or marks it done when `next` is `None`), and only if nobody moved it
/// first. `true` when this call took it; a second caller with the same row gets `false`, in
/// this process or another.
pub async fn claim(
    store: &Store,
    row: &TriggerRow,
    next: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> anyhow::Result<bool> {
    let Some(slot) = row.next_fire_at else {
        return Ok(false);
    };
    let id = row.id.clone();
    let claimed = store
        .write_with(move |transaction| {
            let id = id.clone();
            Box::pin(async move {
                let result = triggers::Entity::update_many()
                    .set(triggers::ActiveModel {
                        next_fire_at: Set(next),
                        done: Set(next.is_none()),
                        last_fired_at: Set(Some(now)),
                        updated_at: Set(now),
                        ..Default::default()
                    })
                    .filter(triggers::Column::Id.eq(id))
                    .filter(triggers::Column::Done.eq(false))
                    .filter(triggers::Column::NextFireAt.eq(slot))
                    .exec(transaction)
                    .await?;
                Ok(result.rows_affected)
            })
        })
        .await?;
    Ok(claimed == 1)
}

/// Gives back a slot taken with [`claim`] that could not start (its conversation turned out
/// busy): the trigger is due again, as it was, unless someone changed it since.
pub async fn unclaim(
    store: &Store,
    row: &TriggerRow,
    claimed_next: Option<DateTime<Utc>>,
) -> anyhow::Result<()> {
    let before = row.clone();
    store
        .write_with(move |transaction| {
            let before = before.clone();
            Box::pin(async move {
                let mut update = triggers::Entity::update_many()
                    .set(triggers::ActiveModel {
                        next_fire_at: Set(before.next_fire_at),
                        done: Set(false),
                        last_fired_at: Set(before.last_fired_at),
                        updated_at: Set(before.updated_at),
                        ..Default::default()
                    })
                    .filter(triggers::Column::Id.eq(before.id));
                update = match claimed_next {
                    Some(next) => update
                        .filter(triggers::Column::Done.eq(false))
                        .filter(triggers::Column::NextFireAt.eq(next)),
                    None => update
                        .filter(triggers::Column::Done.eq(true))
                        .filter(triggers::Column::NextFireAt.is_null()),
                };
                update.exec(transaction).await?;
                Ok(())
            })
        })
        .await?;
    Ok(())
}

/// Records how a fire went: the prompt it started, or why none started.
pub async fn record_fire(
    store: &Store,
    id: &str,
    prompt_id: Option<&str>,
    error: Option<&str>,
) -> anyhow::Result<()> {
    let (id, prompt_id, error) = (
        id.to_owned(),
        prompt_id.map(str::to_owned),
        error.map(str::to_owned),
    );
    store
        .write_with(move |transaction| {
            let (id, prompt_id, error) = (id.clone(), prompt_id.clone(), error.clone());
            Box::pin(async move {
                let mut changes = triggers::ActiveModel {
                    last_error: Set(error),
                    ..Default::default()
                };
                if prompt_id.is_some() {
                    changes.last_prompt_id = Set(prompt_id);
                }
                triggers::Entity::update_many()
                    .set(changes)
                    .filter(triggers::Column::Id.eq(id))
                    .exec(transaction)
                    .await?;
                Ok(())
            })
        })
        .await?;
    Ok(())
}

/// The id of the user's trigger conversation, if one was made.
pub async fn trigger_conversation(store: &Store, user_id: &str) -> anyhow::Result<Option<String>> {
    Ok(
        trigger_conversations::Entity::find_by_id(user_id.to_owned())
            .one(store.connection())
            .await?
            .map(|row| row.conversation_id),
    )
}

/// Makes `conversation_id` the user's trigger conversation, unless another process made one
/// first, and answers which one is the user's now. `replacing` is the id of a conversation
/// that is gone (the user deleted it): the row moves on from it.
pub async fn set_trigger_conversation(
    store: &Store,
    user_id: &str,
    conversation_id: &str,
    replacing: Option<&str>,
) -> anyhow::Result<String> {
    let (user, conversation, gone) = (
        user_id.to_owned(),
        conversation_id.to_owned(),
        replacing.map(str::to_owned),
    );
    store
        .write_with(move |transaction| {
            let (user, conversation, gone) = (user.clone(), conversation.clone(), gone.clone());
            Box::pin(async move {
                match gone {
                    Some(gone) => {
                        trigger_conversations::Entity::update_many()
                            .set(trigger_conversations::ActiveModel {
                                user_id: NotSet,
                                conversation_id: Set(conversation),
                                created_at: Set(Utc::now()),
                            })
                            .filter(trigger_conversations::Column::UserId.eq(user))
                            .filter(trigger_conversations::Column::ConversationId.eq(gone))
                            .exec(transaction)
                            .await?;
                    }
                    None => {
                        trigger_conversations::Entity::insert(trigger_conversations::ActiveModel {
                            user_id: Set(user),
                            conversation_id: Set(conversation),
                            created_at: Set(Utc::now()),
                        })
                        .on_conflict_do_nothing()
                        .exec_without_returning(transaction)
                        .await?;
                    }
                }
                Ok(())
            })
        })
        .await?;
    trigger_conversation(store, user_id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("the trigger conversation of {user_id} was not recorded"))
}

fn active(row: TriggerRow) -> triggers::ActiveModel {
    triggers::ActiveModel {
        id: Set(row.id),
        user_id: Set(row.user_id),
        name: Set(row.name),
        schedule: Set(row.schedule),
        kind: Set(row.kind),
        input: Set(row.input),
        mode: Set(row.mode),
        next_fire_at: Set(row.next_fire_at),
        done: Set(row.done),
        last_fired_at: Set(row.last_fired_at),
        last_prompt_id: Set(row.last_prompt_id),
        last_error: Set(row.last_error),
        created_at: Set(row.created_at),
        updated_at: Set(row.updated_at),
    }
}

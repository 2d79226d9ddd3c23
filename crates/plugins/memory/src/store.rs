//! The plugin's two tables (`memory_blocks` for core and working blocks, `memory_archival` for
//! archival entries), their migration, and every read and write of them. Reads are always
//! filtered by user; writes go through the conversation store's writer.

use std::collections::HashSet;

use agentic_conversation::CreateTables;
use agentic_conversation::migration::{id_key, timestamp, user_id};
use agentic_conversation::sea_orm_migration::MigrationTrait;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use sea_orm::sea_query::{ColumnDef, Expr, Index, Table};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, QuerySelect, Set, TryInsertResult,
};
use serde::{Deserialize, Serialize};

use crate::config::{BlockConfig, MemoryConfig};
use crate::{Permission, Tier, WriteMode};

pub(crate) mod block {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "memory_blocks")]
    pub(crate) struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub user_id: String,
        /// `core` or `working`.
        pub tier: String,
        pub label: String,
        #[sea_orm(column_type = "Text")]
        pub content: String,
        pub permission: String,
        pub created_at: DateTimeUtc,
        pub updated_at: DateTimeUtc,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub(crate) enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub(crate) mod archival {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "memory_archival")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub user_id: String,
        pub label: String,
        #[sea_orm(column_type = "Text")]
        pub content: String,
        /// Label and content lower-cased in Rust, so `LIKE` matches case-insensitively on
        /// SQLite and PostgreSQL alike, beyond ASCII too.
        #[sea_orm(column_type = "Text")]
        pub search_text: String,
        /// The conversation compression filed this entry from.
        pub conversation_id: Option<String>,
        pub prompt_id: Option<String>,
        pub created_at: DateTimeUtc,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// Creates both tables.
pub(crate) fn migration() -> std::sync::Arc<dyn MigrationTrait> {
    std::sync::Arc::new(
        CreateTables::new("0001_memory")
            .table(
                Table::create()
                    .table("memory_blocks")
                    .col(id_key())
                    .col(user_id())
                    .col(ColumnDef::new("tier").string_len(16).not_null())
                    .col(ColumnDef::new("label").string_len(64).not_null())
                    .col(ColumnDef::new("content").text().not_null())
                    .col(ColumnDef::new("permission").string_len(16).not_null())
                    .col(timestamp("created_at"))
                    .col(timestamp("updated_at")),
            )
            .index(
                Index::create()
                    .name("memory_blocks_user_tier_label")
                    .table("memory_blocks")
                    .col("user_id")
                    .col("tier")
                    .col("label")
                    .unique(),
            )
            .table(
                Table::create()
                    .table("memory_archival")
                    .col(id_key())
                    .col(user_id())
                    .col(ColumnDef::new("label").string_len(64).not_null())
                    .col(ColumnDef::new("content").text().not_null())
                    .col(ColumnDef::new("search_text").text().not_null())
                    .col(ColumnDef::new("conversation_id").string_len(64))
                    .col(ColumnDef::new("prompt_id").string_len(64))
                    .col(timestamp("created_at")),
            )
            .index(
                Index::create()
                    .name("memory_archival_user_created")
                    .table("memory_archival")
                    .col("user_id")
                    .col("created_at"),
            )
            .index(
                Index::create()
                    .name("memory_archival_user_label")
                    .table("memory_archival")
                    .col("user_id")
                    .col("label"),
            ),
    )
}

/// A core or working block as tools and the prompt see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Block {
    pub tier: Tier,
    pub label: String,
    pub permission: Permission,
    pub content: String,
    /// Characters it holds.
    pub chars: usize,
    /// Characters it may hold.
    pub limit: usize,
}

/// One archival entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub id: String,
    pub label: String,
    pub content: String,
    /// Set on entries filed by context compression: the conversation they came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    #[serde(serialize_with = "agentic_core::tool::rfc3339_millis")]
    pub created_at: DateTime<Utc>,
}

impl From<archival::Model> for Entry {
    fn from(model: archival::Model) -> Self {
        Self {
            id: model.id,
            label: model.label,
            content: model.content,
            conversation_id: model.conversation_id,
            created_at: model.created_at,
        }
    }
}

/// A user's core and working blocks: configured ones first (core, then working, in config
/// order), then the ones the model created, oldest first.
pub(crate) async fn user_blocks(
    db: &impl ConnectionTrait,
    config: &MemoryConfig,
    user_id: &str,
) -> Result<Vec<Block>, DbErr> {
    let rows = block::Entity::find()
        .filter(block::Column::UserId.eq(user_id))
        .order_by_asc(block::Column::CreatedAt)
        .order_by_asc(block::Column::Label)
        .all(db)
        .await?;
    Ok(merge_blocks(config, &rows))
}

/// The blocks a user has from config alone, for when no database is open.
pub(crate) fn configured_blocks(config: &MemoryConfig) -> Vec<Block> {
    merge_blocks(config, &[])
}

/// Writes a block inside `transaction`: checks the block's permission, the mode, the size
/// limit and the tier's block count against what is stored now, then stores the new content.
pub(crate) async fn write_block(
    transaction: &impl ConnectionTrait,
    write: &BlockWrite,
) -> Result<Outcome, DbErr> {
    let row = block::Entity::find()
        .filter(block::Column::UserId.eq(write.user_id.as_str()))
        .filter(block::Column::Tier.eq(write.tier.as_str()))
        .filter(block::Column::Label.eq(write.label.as_str()))
        .lock_exclusive()
        .one(transaction)
        .await?;
    let config = &write.config;
    let configured = config.configured(write.tier, &write.label);
    let limit = config.limit(write.tier, configured);
    let name = format!("{} memory block \"{}\"", write.tier, write.label);
    let current = effective_block(config, write.tier, configured, row.as_ref());
    let (content, permission) = match &current {
        Some(block) => {
            if let Some(asked) = write.permission
                && asked != block.permission
            {
                return Ok(Outcome::refused(format!(
                    "{name} has permission \"{}\", and a write cannot change an existing \
                     block's permission",
                    block.permission
                )));
            }
            match block.permission {
                Permission::ReadOnly => {
                    return Ok(Outcome::refused(format!("{name} is read-only")));
                }
                Permission::Append if write.mode == WriteMode::Replace => {
                    return Ok(Outcome::refused(format!(
                        "{name} only takes appends; write with mode \"append\""
                    )));
                }
                Permission::Familiar if !write.approved => {
                    return Ok(Outcome::needs_approval(&name));
                }
                _ => {}
            }
            let content = match write.mode {
                WriteMode::Replace => write.content.clone(),
                WriteMode::Append => append_text(&block.content, &write.content),
            };
            (content, block.permission)
        }
        None => {
            let stored: Vec<String> = block::Entity::find()
                .select_only()
                .column(block::Column::Label)
                .filter(block::Column::UserId.eq(write.user_id.as_str()))
                .filter(block::Column::Tier.eq(write.tier.as_str()))
                .into_tuple()
                .all(transaction)
                .await?;
            let mut labels: HashSet<&str> = stored.iter().map(String::as_str).collect();
            labels.extend(config.blocks(write.tier).iter().map(|b| b.label.as_str()));
            let max = config.max_blocks(write.tier);
            if labels.len() >= max {
                return Ok(Outcome::refused(format!(
                    "{} memory holds at most {max} blocks; replace or append to one of them \
                     (memory.list shows them)",
                    write.tier
                )));
            }
            let permission = write.permission.unwrap_or_default();
            if permission == Permission::Familiar && !write.approved {
                return Ok(Outcome::needs_approval(&name));
            }
            (write.content.clone(), permission)
        }
    };
    let chars = content.chars().count();
    if chars > limit {
        return Ok(Outcome::refused(format!(
            "{name} would hold {chars} characters, over its limit of {limit}; write less, or \
             replace what is there with a shorter version"
        )));
    }
    match row {
        Some(row) => {
            block::Entity::update_many()
                .col_expr(block::Column::Content, Expr::value(content.clone()))
                .col_expr(block::Column::Permission, Expr::value(permission.as_str()))
                .col_expr(block::Column::UpdatedAt, Expr::value(write.now))
                .filter(block::Column::Id.eq(row.id))
                .exec(transaction)
                .await?;
        }
        None => {
            let inserted = block::Entity::insert(block::ActiveModel {
                id: Set(write.new_id.clone()),
                user_id: Set(write.user_id.clone()),
                tier: Set(write.tier.as_str().to_owned()),
                label: Set(write.label.clone()),
                content: Set(content.clone()),
                permission: Set(permission.as_str().to_owned()),
                created_at: Set(write.now),
                updated_at: Set(write.now),
            })
            .on_conflict_do_nothing_on([
                block::Column::UserId,
                block::Column::Tier,
                block::Column::Label,
            ])
            .exec_without_returning(transaction)
            .await?;
            if !matches!(inserted, TryInsertResult::Inserted(1)) {
                return Ok(Outcome::refused(format!(
                    "{name} was created by another call at the same moment; write again"
                )));
            }
        }
    }
    Ok(Outcome::Written(Block {
        tier: write.tier,
        label: write.label.clone(),
        permission,
        chars,
        content,
        limit,
    }))
}

/// Everything a block write needs, computed before the transaction (it may run twice).
#[derive(Debug, Clone)]
pub(crate) struct BlockWrite {
    pub user_id: String,
    pub tier: Tier,
    pub label: String,
    pub content: String,
    pub mode: WriteMode,
    pub permission: Option<Permission>,
    /// Whether this call went through a person's approval.
    pub approved: bool,
    /// The id the block gets if this write creates it.
    pub new_id: String,
    pub now: DateTime<Utc>,
    pub config: std::sync::Arc<MemoryConfig>,
}

/// What a block write did, passed back from its transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Written(Block),
    Refused {
        message: String,
        /// The block is familiar and this call had no approval.
        needs_approval: bool,
    },
}

impl Outcome {
    fn refused(message: String) -> Self {
        Self::Refused {
            message,
            needs_approval: false,
        }
    }

    fn needs_approval(name: &str) -> Self {
        Self::Refused {
            message: format!(
                "{name} is familiar: every write needs a person's approval, and this call was \
                 not approved, so nothing was written; call memory.write again to ask"
            ),
            needs_approval: true,
        }
    }
}

/// An archival entry about to be inserted.
pub(crate) fn new_entry(
    user_id: &str,
    label: &str,
    content: &str,
    conversation: Option<(&str, &str)>,
    now: DateTime<Utc>,
) -> archival::Model {
    archival::Model {
        id: uuid::Uuid::new_v4().to_string(),
        user_id: user_id.to_owned(),
        label: label.to_owned(),
        content: content.to_owned(),
        search_text: format!("{label}\n{content}").to_lowercase(),
        conversation_id: conversation.map(|(conversation, _)| conversation.to_owned()),
        prompt_id: conversation.map(|(_, prompt)| prompt.to_owned()),
        created_at: now,
    }
}

/// Inserts archival entries inside `transaction`.
pub(crate) async fn insert_entries(
    transaction: &impl ConnectionTrait,
    entries: &[archival::Model],
) -> Result<(), DbErr> {
    if entries.is_empty() {
        return Ok(());
    }
    archival::Entity::insert_many(entries.iter().map(|entry| archival::ActiveModel {
        id: Set(entry.id.clone()),
        user_id: Set(entry.user_id.clone()),
        label: Set(entry.label.clone()),
        content: Set(entry.content.clone()),
        search_text: Set(entry.search_text.clone()),
        conversation_id: Set(entry.conversation_id.clone()),
        prompt_id: Set(entry.prompt_id.clone()),
        created_at: Set(entry.created_at),
    }))
    .exec_without_returning(transaction)
    .await?;
    Ok(())
}

/// A user's archival entries with this label, newest first.
pub(crate) async fn entries_with_label(
    db: &impl ConnectionTrait,
    user_id: &str,
    label: &str,
    limit: u64,
) -> Result<Vec<Entry>, DbErr> {
    let rows = archival::Entity::find()
        .filter(archival::Column::UserId.eq(user_id))
        .filter(archival::Column::Label.eq(label))
        .order_by_desc(archival::Column::CreatedAt)
        .order_by_desc(archival::Column::Id)
        .limit(limit)
        .all(db)
        .await?;
    Ok(rows.into_iter().map(Entry::from).collect())
}

/// A user's archival labels with how many entries each has, by label.
pub(crate) async fn archival_labels(
    db: &impl ConnectionTrait,
    user_id: &str,
    limit: u64,
) -> Result<Vec<(String, i64)>, DbErr> {
    archival::Entity::find()
        .select_only()
        .column(archival::Column::Label)
        .column_as(archival::Column::Id.count(), "entries")
        .filter(archival::Column::UserId.eq(user_id))
        .group_by(archival::Column::Label)
        .order_by_asc(archival::Column::Label)
        .limit(limit)
        .into_tuple()
        .all(db)
        .await
}

/// How many archival entries a user has.
pub(crate) async fn archival_count(db: &impl ConnectionTrait, user_id: &str) -> Result<u64, DbErr> {
    archival::Entity::find()
        .filter(archival::Column::UserId.eq(user_id))
        .count(db)
        .await
}

/// A user's newest archival entries that contain at least one of `terms` (lower-case words)
/// in their label or content: the candidates search ranks.
pub(crate) async fn archival_candidates(
    db: &impl ConnectionTrait,
    user_id: &str,
    terms: &[String],
    limit: u64,
) -> Result<Vec<Entry>, DbErr> {
    let mut any = Condition::any();
    for term in terms {
        // Terms are letters and digits only, so they hold no LIKE wildcard to escape.
        any = any.add(archival::Column::SearchText.contains(term.as_str()));
    }
    let rows = archival::Entity::find()
        .filter(archival::Column::UserId.eq(user_id))
        .filter(any)
        .order_by_desc(archival::Column::CreatedAt)
        .order_by_desc(archival::Column::Id)
        .limit(limit)
        .all(db)
        .await?;
    Ok(rows.into_iter().map(Entry::from).collect())
}

fn merge_blocks(config: &MemoryConfig, rows: &[block::Model]) -> Vec<Block> {
    let mut blocks = Vec::new();
    for tier in [Tier::Core, Tier::Working] {
        for configured in config.blocks(tier) {
            let row = rows
                .iter()
                .find(|row| row.tier == tier.as_str() && row.label == configured.label);
            blocks.extend(effective_block(config, tier, Some(configured), row));
        }
    }
    for row in rows {
        let Some(tier) = Tier::from_block_column(&row.tier) else {
            continue;
        };
        if config.configured(tier, &row.label).is_none() {
            blocks.extend(effective_block(config, tier, None, Some(row)));
        }
    }
    blocks
}

/// A block as it stands: a configured block takes its permission from config (so an operator
/// can tighten it), and a read-only configured block its content too (nobody else can write
/// it); otherwise the stored row, or the configured starting content until the first write.
fn effective_block(
    config: &MemoryConfig,
    tier: Tier,
    configured: Option<&BlockConfig>,
    row: Option<&block::Model>,
) -> Option<Block> {
    let (permission, content) = match (configured, row) {
        (Some(configured), Some(row)) if configured.permission != Permission::ReadOnly => {
            (configured.permission, row.content.clone())
        }
        (Some(configured), _) => (configured.permission, configured.content.clone()),
        (None, Some(row)) => (
            Permission::from_column(&row.permission),
            row.content.clone(),
        ),
        (None, None) => return None,
    };
    Some(Block {
        tier,
        label: configured
            .map(|configured| configured.label.clone())
            .or_else(|| row.map(|row| row.label.clone()))
            .unwrap_or_default(),
        permission,
        chars: content.chars().count(),
        content,
        limit: config.limit(tier, configured),
    })
}

/// `addition` on a new line after `existing` (or alone when the block is empty).
fn append_text(existing: &str, addition: &str) -> String {
    if existing.is_empty() {
        addition.to_owned()
    } else {
        format!("{existing}\n{addition}")
    }
}

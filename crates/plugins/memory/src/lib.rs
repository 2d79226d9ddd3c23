//! The memory plugin: what an agent remembers about and for each user, in three tiers kept in
//! tables this plugin owns (created by its migration from `setup()`).
//!
//! - **core** blocks (e.g. `persona`, `human`) go into every prompt's context;
//! - **working** blocks are notes the agent keeps for itself and reads back when it needs
//!   them (only their labels are in the context);
//! - **archival** entries are only ever appended, and found with `memory.search` (portable
//!   `LIKE` matching ranked in Rust; see [`search`]). Context compression files the prompts
//!   it archives here too (label `conversation`), through the conversation crate's
//!   compression hook.
//!
//! Tools: `memory.read`, `memory.write`, `memory.list`, `memory.search`. Every block has a
//! [`Permission`]; configured blocks (`[memory] core = [...]`, `working = [...]`) take theirs
//! from config, others keep the one they were created with, and `memory.write` never changes
//! it. Writes to `familiar` blocks wait for a person's approval.
#![forbid(unsafe_code)]

pub mod config;
pub mod search;
mod store;
mod types;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use agentic_conversation::{
    ArchivedHistory, CompressionHook, DatabaseSlot, Store, register_compression_hook,
    register_migrations,
};
use agentic_core::{
    Plugin, PluginRegistration, PrepareContext, SetupContext, ToolContext, ToolError, define_tool,
};
use anyhow::Context as _;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

pub use config::{BlockConfig, MemoryConfig};
pub use store::{Block, Entry};
pub use types::*;

agentic_core::inventory::submit! {
    PluginRegistration { id: "memory", create: create_plugin }
}

/// The plugin, as the runtime creates it; the `agentic` crate links it by feature.
pub fn create_plugin() -> Arc<dyn Plugin> {
    Arc::new(MemoryPlugin::default())
}

/// The label of archival entries filed by context compression.
pub const COMPRESSED_LABEL: &str = "conversation";
/// Most archival entries `memory.read` returns.
const MAX_READ_ENTRIES: u64 = 50;
/// Most archival entries search ranks: the newest that contain any query word.
const SEARCH_CANDIDATES: u64 = 200;
/// Most hits `memory.search` returns.
const MAX_SEARCH_HITS: usize = 25;
/// Characters of each hit's content `memory.search` shows; `memory.read` gives the rest.
const HIT_CHARS: usize = 1_000;
/// Characters of the new content an approval request shows.
const APPROVAL_PREVIEW_CHARS: usize = 300;

#[derive(Debug, Default)]
pub struct MemoryPlugin {
    config: OnceLock<Arc<MemoryConfig>>,
}

/// The (tier, label) of blocks whose writes need approval, for one prompt's tools. Shared by
/// `memory.write`'s approval rule and its handler, which adds a block it finds familiar.
type FamiliarBlocks = Arc<Mutex<HashSet<(Tier, String)>>>;

#[async_trait]
impl Plugin for MemoryPlugin {
    fn id(&self) -> &str {
        "memory"
    }

    fn everyday(&self) -> bool {
        true
    }

    fn config_schema(&self) -> Value {
        agentic_core::schema_of::<MemoryConfig>()
    }

    async fn setup(&self, context: &mut SetupContext<'_>) -> anyhow::Result<()> {
        let config: MemoryConfig = if context.config.section("memory").is_null() {
            MemoryConfig::default()
        } else {
            context
                .config
                .plugin("memory")
                .context("invalid `memory` config section")?
        };
        config.validate()?;
        register_migrations(context, "memory", vec![store::migration()]);
        if config.archive_compressed {
            let slot = context
                .extensions
                .get::<DatabaseSlot>()
                .context("registering migrations should have added the database slot")?;
            register_compression_hook(context, Arc::new(FileCompressedHistory { slot }));
        }
        let _ = self.config.set(Arc::new(config));
        Ok(())
    }

    async fn prepare(&self, context: &mut PrepareContext) -> anyhow::Result<()> {
        let config = self.config.get().cloned().unwrap_or_default();
        let (blocks, archival_entries) = match agentic_conversation::database(&context.services) {
            Some(store) => {
                let db = store.connection();
                let blocks = store::user_blocks(db, &config, &context.user_id)
                    .await
                    .context("could not read memory blocks")?;
                let entries = store::archival_count(db, &context.user_id)
                    .await
                    .context("could not count archival memory")?;
                (blocks, entries)
            }
            None => (store::configured_blocks(&config), 0),
        };
        add_memory_context(context, &blocks, archival_entries);
        let familiar: FamiliarBlocks = Arc::new(Mutex::new(
            blocks
                .iter()
                .filter(|block| block.permission == Permission::Familiar)
                .map(|block| (block.tier, block.label.clone()))
                .collect(),
        ));
        add_tools(context, &config, &familiar);
        Ok(())
    }
}

/// Core blocks whole, one context item each; working labels and the archival count in one.
fn add_memory_context(context: &mut PrepareContext, blocks: &[Block], archival_entries: u64) {
    for block in blocks.iter().filter(|block| block.tier == Tier::Core) {
        let content = if block.content.is_empty() {
            "(empty)"
        } else {
            block.content.as_str()
        };
        context.add_context(
            &format!("Core memory: {} ({})", block.label, block.permission),
            content,
        );
    }
    let working: Vec<String> = blocks
        .iter()
        .filter(|block| block.tier == Tier::Working)
        .map(|block| {
            format!(
                "{} ({}, {}/{} characters)",
                block.label, block.permission, block.chars, block.limit
            )
        })
        .collect();
    let mut lines = Vec::new();
    if !working.is_empty() {
        lines.push(format!(
            "Working memory blocks (memory.read gives their content): {}.",
            working.join(", ")
        ));
    }
    if archival_entries > 0 {
        let entries = if archival_entries == 1 {
            "entry"
        } else {
            "entries"
        };
        lines.push(format!(
            "Archival memory holds {archival_entries} {entries}; memory.search finds them."
        ));
    }
    if !lines.is_empty() {
        context.add_context("Memory", &lines.join("\n"));
    }
}

fn add_tools(context: &mut PrepareContext, config: &Arc<MemoryConfig>, familiar: &FamiliarBlocks) {
    let read_config = config.clone();
    context.add_tool(
        define_tool(
            "memory.read",
            "Read a core or working memory block by label, or the newest archival entries with \
             a label",
            move |cx, input: ReadInput| {
                let config = read_config.clone();
                async move { read(&cx, &config, input).await }
            },
        )
        .read_only()
        .into_arc(),
    );
    let write_config = config.clone();
    let write_familiar = familiar.clone();
    let approval_familiar = familiar.clone();
    context.add_tool(
        define_tool(
            "memory.write",
            "Write memory. Core blocks are in every prompt (keep them short), working blocks are \
             notes you read back with memory.read, archival entries are appended and found with \
             memory.search. Mode replace (default) or append; a block's permission may refuse \
             either, and writes to familiar blocks wait for the user's approval",
            move |cx, input: WriteInput| {
                let config = write_config.clone();
                let familiar = write_familiar.clone();
                async move { write(&cx, &config, &familiar, input).await }
            },
        )
        .approval_when(move |input: &WriteInput| approval_reason(&approval_familiar, input))
        .into_arc(),
    );
    let list_config = config.clone();
    context.add_tool(
        define_tool(
            "memory.list",
            "List memory blocks (label, permission, size) and archival topics",
            move |cx, input: ListInput| {
                let config = list_config.clone();
                async move { list(&cx, &config, input).await }
            },
        )
        .read_only()
        .into_arc(),
    );
    let search_config = config.clone();
    context.add_tool(
        define_tool(
            "memory.search",
            "Search archival memory (and working blocks if asked) for words; best matches first",
            move |cx, input: SearchInput| {
                let config = search_config.clone();
                async move { search(&cx, &config, input).await }
            },
        )
        .read_only()
        .into_arc(),
    );
}

/// Why a write needs approval: the block is familiar, or the write would create one.
fn approval_reason(familiar: &FamiliarBlocks, input: &WriteInput) -> Option<String> {
    if input.tier == Tier::Archival {
        return None;
    }
    let known = lock(familiar).contains(&(input.tier, input.label.clone()));
    if !known && input.permission != Some(Permission::Familiar) {
        return None;
    }
    let verb = match input.mode {
        _ if !known => "creates",
        Some(WriteMode::Append) => "appends to",
        _ if input.content.is_empty() => "empties",
        _ => "replaces",
    };
    let block = format!(
        "{verb} the familiar {} memory block \"{}\"",
        input.tier, input.label
    );
    if input.content.is_empty() {
        return Some(block);
    }
    let (preview, _) = search::excerpt(&input.content, &[], APPROVAL_PREVIEW_CHARS);
    Some(format!("{block}: {preview:?}"))
}

async fn read(
    cx: &ToolContext,
    config: &MemoryConfig,
    input: ReadInput,
) -> Result<ReadOutput, ToolError> {
    check_label(&input.label).map_err(ToolError::failed)?;
    let store = store(cx)?;
    let db = store.connection();
    if input.tier == Tier::Archival {
        let limit = input.limit.unwrap_or(10);
        if !(1..=MAX_READ_ENTRIES).contains(&limit) {
            return Err(ToolError::failed(format!(
                "limit must be between 1 and {MAX_READ_ENTRIES}, got {limit}"
            )));
        }
        let entries = store::entries_with_label(db, &cx.user_id, &input.label, limit)
            .await
            .map_err(internal)?;
        if entries.is_empty() {
            return Err(ToolError::failed(format!(
                "no archival entries labelled \"{}\"; memory.list shows the labels, \
                 memory.search finds entries by content",
                input.label
            )));
        }
        return Ok(ReadOutput::Entries {
            tier: Tier::Archival,
            label: input.label,
            entries,
        });
    }
    if input.limit.is_some() {
        return Err(ToolError::failed(
            "limit is for archival reads only; a block is read whole",
        ));
    }
    store::user_blocks(db, config, &cx.user_id)
        .await
        .map_err(internal)?
        .into_iter()
        .find(|block| block.tier == input.tier && block.label == input.label)
        .map(ReadOutput::Block)
        .ok_or_else(|| {
            ToolError::failed(format!(
                "no {} memory block \"{}\"; memory.list shows yours",
                input.tier, input.label
            ))
        })
}

async fn write(
    cx: &ToolContext,
    config: &Arc<MemoryConfig>,
    familiar: &FamiliarBlocks,
    input: WriteInput,
) -> Result<WriteOutput, ToolError> {
    check_label(&input.label).map_err(ToolError::failed)?;
    if input.content.contains('\0') {
        return Err(ToolError::failed("content must not contain NUL characters"));
    }
    let store = store(cx)?;
    let now = Utc::now();
    if input.tier == Tier::Archival {
        return write_archival(&store, config, &cx.user_id, input, now).await;
    }
    let mode = input.mode.unwrap_or(WriteMode::Replace);
    if mode == WriteMode::Append && input.content.is_empty() {
        return Err(ToolError::failed("nothing to append: content is empty"));
    }
    let write = store::BlockWrite {
        user_id: cx.user_id.clone(),
        tier: input.tier,
        label: input.label.clone(),
        // What the approval rule decided for this very input is what a person was asked.
        approved: approval_reason(familiar, &input).is_some(),
        content: input.content,
        mode,
        permission: input.permission,
        new_id: uuid::Uuid::new_v4().to_string(),
        now,
        config: config.clone(),
    };
    let outcome = store
        .write_with(move |transaction| {
            let write = write.clone();
            Box::pin(async move { Ok(store::write_block(transaction, &write).await?) })
        })
        .await
        .map_err(internal)?;
    match outcome {
        store::Outcome::Written(block) => {
            if block.permission == Permission::Familiar {
                lock(familiar).insert((block.tier, block.label.clone()));
            }
            Ok(WriteOutput::Block(block))
        }
        store::Outcome::Refused {
            message,
            needs_approval,
        } => {
            if needs_approval {
                // The block turned familiar after this prompt's tools were made: from now on
                // the approval rule knows, so the next call asks a person.
                lock(familiar).insert((input.tier, input.label));
            }
            Err(ToolError::failed(message))
        }
    }
}

async fn write_archival(
    store: &Store,
    config: &MemoryConfig,
    user_id: &str,
    input: WriteInput,
    now: DateTime<Utc>,
) -> Result<WriteOutput, ToolError> {
    if input.mode == Some(WriteMode::Replace) {
        return Err(ToolError::failed(
            "archival memory only grows: each write appends a new entry, so use mode \"append\" \
             or leave mode out",
        ));
    }
    if input.permission.is_some() {
        return Err(ToolError::failed(
            "archival entries have no permission: they are appended and never changed",
        ));
    }
    if input.content.trim().is_empty() {
        return Err(ToolError::failed("content must not be empty"));
    }
    let limit = config.limit(Tier::Archival, None);
    let chars = input.content.chars().count();
    if chars > limit {
        return Err(ToolError::failed(format!(
            "an archival entry holds at most {limit} characters, got {chars}; split it into \
             several entries"
        )));
    }
    let entry = store::new_entry(user_id, &input.label, &input.content, None, now);
    let entries = vec![entry.clone()];
    store
        .write_with(move |transaction| {
            let entries = entries.clone();
            Box::pin(async move {
                store::insert_entries(transaction, &entries).await?;
                Ok(())
            })
        })
        .await
        .map_err(internal)?;
    Ok(WriteOutput::Entry(entry.into()))
}

async fn list(
    cx: &ToolContext,
    config: &MemoryConfig,
    input: ListInput,
) -> Result<ListOutput, ToolError> {
    let store = store(cx)?;
    let db = store.connection();
    let blocks = if input.tier == Some(Tier::Archival) {
        Vec::new()
    } else {
        store::user_blocks(db, config, &cx.user_id)
            .await
            .map_err(internal)?
            .into_iter()
            .filter(|block| input.tier.is_none_or(|tier| tier == block.tier))
            .map(|block| BlockSummary {
                tier: block.tier,
                label: block.label,
                permission: block.permission,
                chars: block.chars,
                limit: block.limit,
            })
            .collect()
    };
    let archival = if matches!(input.tier, None | Some(Tier::Archival)) {
        let entries = store::archival_count(db, &cx.user_id)
            .await
            .map_err(internal)?;
        let labels = store::archival_labels(db, &cx.user_id, 100)
            .await
            .map_err(internal)?
            .into_iter()
            .map(|(label, entries)| LabelCount { label, entries })
            .collect();
        Some(ArchivalSummary { entries, labels })
    } else {
        None
    };
    Ok(ListOutput { blocks, archival })
}

async fn search(
    cx: &ToolContext,
    config: &MemoryConfig,
    input: SearchInput,
) -> Result<SearchOutput, ToolError> {
    let terms = search::query_terms(&input.query);
    if terms.is_empty() {
        return Err(ToolError::failed(format!(
            "the query {:?} has no words to search for",
            search::excerpt(&input.query, &[], 80).0
        )));
    }
    let limit = input.limit.unwrap_or(5);
    if !(1..=MAX_SEARCH_HITS).contains(&limit) {
        return Err(ToolError::failed(format!(
            "limit must be between 1 and {MAX_SEARCH_HITS}, got {limit}"
        )));
    }
    let store = store(cx)?;
    let db = store.connection();
    let mut scored: Vec<(search::Score, Hit)> = Vec::new();
    if input.include_working {
        let blocks = store::user_blocks(db, config, &cx.user_id)
            .await
            .map_err(internal)?;
        for block in blocks
            .into_iter()
            .filter(|block| block.tier == Tier::Working)
        {
            let score = search::score(&format!("{}\n{}", block.label, block.content), &terms);
            if !score.matched.is_empty() {
                scored.push((score, hit(Tier::Working, block.label, None, &block.content)));
            }
        }
    }
    let entries = store::archival_candidates(db, &cx.user_id, &terms, SEARCH_CANDIDATES)
        .await
        .map_err(internal)?;
    for entry in entries {
        let score = search::score(&format!("{}\n{}", entry.label, entry.content), &terms);
        if score.matched.is_empty() {
            continue;
        }
        let mut found = hit(Tier::Archival, entry.label, Some(entry.id), &entry.content);
        found.conversation_id = entry.conversation_id;
        found.created_at = Some(entry.created_at);
        scored.push((score, found));
    }
    // More words matched, then more occurrences, then newer (working blocks are current).
    scored.sort_by(|(a_score, a), (b_score, b)| {
        b_score
            .matched
            .len()
            .cmp(&a_score.matched.len())
            .then(b_score.occurrences.cmp(&a_score.occurrences))
            .then(b.created_at.is_none().cmp(&a.created_at.is_none()))
            .then(b.created_at.cmp(&a.created_at))
    });
    let hits = scored
        .into_iter()
        .take(limit)
        .map(|(score, mut hit)| {
            let (content, truncated) = search::excerpt(&hit.content, &score.matched, HIT_CHARS);
            hit.content = content;
            hit.truncated = truncated;
            hit.matched = score.matched;
            hit
        })
        .collect();
    Ok(SearchOutput { hits })
}

fn hit(tier: Tier, label: String, id: Option<String>, content: &str) -> Hit {
    Hit {
        tier,
        label,
        id,
        content: content.to_owned(),
        truncated: false,
        matched: Vec::new(),
        conversation_id: None,
        created_at: None,
    }
}

fn store(context: &ToolContext) -> Result<Store, ToolError> {
    agentic_conversation::tool_database(&context.services, "memory needs")
}

fn internal(error: impl std::fmt::Display) -> ToolError {
    ToolError::failed(format!("memory could not be read or written: {error}"))
}

fn lock(familiar: &FamiliarBlocks) -> std::sync::MutexGuard<'_, HashSet<(Tier, String)>> {
    familiar.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Files the prompts context compression archives as archival entries labelled
/// [`COMPRESSED_LABEL`], one per prompt, tagged with their conversation.
struct FileCompressedHistory {
    slot: Arc<DatabaseSlot>,
}

#[async_trait]
impl CompressionHook for FileCompressedHistory {
    async fn archived(&self, archived: &ArchivedHistory) -> anyhow::Result<()> {
        let store = self
            .slot
            .get()
            .context("the conversation database is not open")?;
        let now = Utc::now();
        let entries: Vec<_> = archived
            .prompts
            .iter()
            .filter(|prompt| !prompt.text.trim().is_empty())
            .enumerate()
            .map(|(index, prompt)| {
                // A microsecond apart, so newest-first reads keep the conversation's order.
                let at =
                    now - chrono::Duration::microseconds((archived.prompts.len() - index) as i64);
                // PostgreSQL text cannot hold NUL; a prompt's input might.
                let text = prompt.text.trim_end().replace('\0', "");
                store::new_entry(
                    &archived.user_id,
                    COMPRESSED_LABEL,
                    &text,
                    Some((&archived.conversation_id, &prompt.prompt_id)),
                    at,
                )
            })
            .collect();
        store
            .write_with(move |transaction| {
                let entries = entries.clone();
                Box::pin(async move {
                    store::insert_entries(transaction, &entries).await?;
                    Ok(())
                })
            })
            .await?;
        Ok(())
    }
}

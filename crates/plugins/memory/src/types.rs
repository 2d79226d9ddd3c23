//! The memory tools' inputs and outputs, as their schemas declare them, and the rules a label
//! follows.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::search;
use crate::store::{Block, Entry};

/// A memory tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Blocks that are in every prompt.
    Core,
    /// Blocks the agent reads back when it needs them.
    Working,
    /// Entries that are only appended, found by search.
    Archival,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Core => "core",
            Self::Working => "working",
            Self::Archival => "archival",
        }
    }

    pub(crate) fn from_block_column(value: &str) -> Option<Self> {
        match value {
            "core" => Some(Self::Core),
            "working" => Some(Self::Working),
            _ => None,
        }
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who may change a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Permission {
    /// Every write is refused.
    ReadOnly,
    /// Writes may only append.
    Append,
    /// Writes may replace or append.
    #[default]
    ReadWrite,
    /// Writes may replace or append, each after a person approves it.
    Familiar,
}

impl Permission {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::Append => "append",
            Self::ReadWrite => "read-write",
            Self::Familiar => "familiar",
        }
    }

    /// A stored value; anything unknown is treated as read-only, the safe side.
    pub(crate) fn from_column(value: &str) -> Self {
        match value {
            "append" => Self::Append,
            "read-write" => Self::ReadWrite,
            "familiar" => Self::Familiar,
            _ => Self::ReadOnly,
        }
    }
}

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a write changes a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WriteMode {
    /// The content becomes the block's whole content.
    Replace,
    /// The content is added on a new line at the end.
    Append,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteInput {
    pub tier: Tier,
    /// The block's label: 1 to 64 letters, digits, `-`, `_`, `.` or `:`, starting with a
    /// letter or digit (`project-notes`); for archival, the entry's topic.
    #[schemars(regex(pattern = LABEL_PATTERN))]
    pub label: String,
    pub content: String,
    /// `replace` (default for blocks) or `append`. Archival writes always append a new entry.
    #[serde(default)]
    pub mode: Option<WriteMode>,
    /// Only when creating a block (default `read-write`); an existing block keeps its own.
    #[serde(default)]
    pub permission: Option<Permission>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadInput {
    pub tier: Tier,
    /// A block's label (letters, digits, `-`, `_`, `.`, `:`); for archival, the topic whose
    /// entries to read.
    #[schemars(regex(pattern = LABEL_PATTERN))]
    pub label: String,
    /// Archival only: how many entries, newest first (default 10, at most 50).
    #[serde(default)]
    pub limit: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListInput {
    /// Only this tier; every tier when absent.
    #[serde(default)]
    pub tier: Option<Tier>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchInput {
    /// Words to look for (any case); entries holding more of them rank higher.
    pub query: String,
    /// How many hits (default 5, at most 25).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Search working blocks as well as archival memory.
    #[serde(default)]
    pub include_working: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum WriteOutput {
    Block(Block),
    Entry(Entry),
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ReadOutput {
    Block(Block),
    Entries {
        tier: Tier,
        label: String,
        /// Newest first.
        entries: Vec<Entry>,
    },
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListOutput {
    /// Core and working blocks (content left out: memory.read gives it).
    pub blocks: Vec<BlockSummary>,
    /// Present when archival memory was asked for (or no tier was given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archival: Option<ArchivalSummary>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockSummary {
    pub tier: Tier,
    pub label: String,
    pub permission: Permission,
    pub chars: usize,
    pub limit: usize,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArchivalSummary {
    pub entries: u64,
    /// Topics with their entry counts, by label (at most 100).
    pub labels: Vec<LabelCount>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelCount {
    pub label: String,
    pub entries: i64,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchOutput {
    /// Best first.
    pub hits: Vec<Hit>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Hit {
    pub tier: Tier,
    pub label: String,
    /// The archival entry's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The content, or an excerpt around the first match when it is long.
    pub content: String,
    /// True when `content` is an excerpt; memory.read gives the whole text.
    pub truncated: bool,
    /// The query words it contains.
    pub matched: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
}

/// A label, as the input schemas declare it, so that a grammar can hold a model to it
/// ([`check_label`] says the same in words).
const LABEL_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$";

/// Checks a label: 1 to 64 characters, ASCII letters, digits, `-`, `_`, `.` or `:`, starting
/// with a letter or digit.
pub fn check_label(label: &str) -> Result<(), String> {
    let valid = (1..=64).contains(&label.len())
        && label.starts_with(|c: char| c.is_ascii_alphanumeric())
        && label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "label \"{}\" must be 1 to 64 letters, digits, '-', '_', '.' or ':', starting with a \
             letter or digit",
            search::excerpt(label, &[], 80).0
        ))
    }
}

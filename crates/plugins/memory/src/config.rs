//! The `memory` config section: blocks every user starts with, size limits, and whether
//! compressed history is filed into archival memory.

use std::collections::HashSet;

use anyhow::{bail, ensure};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Permission, Tier};

/// The `memory` config section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct MemoryConfig {
    /// Core blocks every user has, in the order they appear in the prompt. Their permission
    /// (and a read-only block's content) always follows this config.
    pub core: Vec<BlockConfig>,
    /// Working blocks every user has.
    pub working: Vec<BlockConfig>,
    /// Characters a core block may hold unless it sets its own `limit`.
    pub core_limit: usize,
    /// Characters a working block may hold unless it sets its own `limit`.
    pub working_limit: usize,
    /// Characters one archival entry written by the model may hold.
    pub archival_entry_limit: usize,
    /// Core blocks a user may have, configured ones included (they all go into every prompt).
    pub max_core_blocks: usize,
    /// Working blocks a user may have, configured ones included.
    pub max_working_blocks: usize,
    /// File the prompts that context compression archives into archival memory.
    pub archive_compressed: bool,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            core: Vec::new(),
            working: Vec::new(),
            core_limit: 2_000,
            working_limit: 8_000,
            archival_entry_limit: 8_000,
            max_core_blocks: 12,
            max_working_blocks: 50,
            archive_compressed: true,
        }
    }
}

/// A block every user starts with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlockConfig {
    /// e.g. `persona` or `human`.
    pub label: String,
    /// What the block holds until it is first written.
    #[serde(default)]
    pub content: String,
    /// `read-only`, `append`, `read-write` (default) or `familiar`.
    #[serde(default)]
    pub permission: Permission,
    /// Characters this block may hold; the tier's limit when absent.
    #[serde(default)]
    pub limit: Option<usize>,
}

impl MemoryConfig {
    /// Checks what serde cannot: labels, limits, duplicates and content that fits.
    pub fn validate(&self) -> anyhow::Result<()> {
        ensure!(
            self.core_limit > 0 && self.working_limit > 0 && self.archival_entry_limit > 0,
            "memory limits must be at least 1 character"
        );
        for (tier, blocks, max) in [
            (Tier::Core, &self.core, self.max_core_blocks),
            (Tier::Working, &self.working, self.max_working_blocks),
        ] {
            ensure!(
                blocks.len() <= max,
                "memory.{tier} configures {} blocks, more than max{}Blocks ({max})",
                blocks.len(),
                if tier == Tier::Core {
                    "Core"
                } else {
                    "Working"
                },
            );
            let mut seen = HashSet::new();
            for block in blocks {
                if let Err(problem) = crate::check_label(&block.label) {
                    bail!("memory.{tier}: {problem}");
                }
                ensure!(
                    seen.insert(block.label.as_str()),
                    "memory.{tier} configures block \"{}\" twice",
                    block.label
                );
                let limit = self.limit(tier, Some(block));
                ensure!(
                    limit > 0,
                    "memory.{tier}.{}: limit must be at least 1",
                    block.label
                );
                let chars = block.content.chars().count();
                ensure!(
                    chars <= limit,
                    "memory.{tier}.{}: content has {chars} characters, over its limit of {limit}",
                    block.label
                );
            }
        }
        Ok(())
    }

    /// The configured block with this label, if any.
    pub fn configured(&self, tier: Tier, label: &str) -> Option<&BlockConfig> {
        self.blocks(tier).iter().find(|block| block.label == label)
    }

    /// The configured blocks of a tier (none for archival).
    pub fn blocks(&self, tier: Tier) -> &[BlockConfig] {
        match tier {
            Tier::Core => &self.core,
            Tier::Working => &self.working,
            Tier::Archival => &[],
        }
    }

    /// Characters a block (or, for archival, an entry) may hold.
    pub fn limit(&self, tier: Tier, configured: Option<&BlockConfig>) -> usize {
        configured
            .and_then(|block| block.limit)
            .unwrap_or(match tier {
                Tier::Core => self.core_limit,
                Tier::Working => self.working_limit,
                Tier::Archival => self.archival_entry_limit,
            })
    }

    /// Blocks a user may have in a tier.
    pub fn max_blocks(&self, tier: Tier) -> usize {
        match tier {
            Tier::Core => self.max_core_blocks,
            Tier::Working => self.max_working_blocks,
            Tier::Archival => usize::MAX,
        }
    }
}

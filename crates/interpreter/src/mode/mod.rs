//! Code mode: the model writes a program, the sandbox runs it, its tool calls come back to
//! the host (where approval, validation and recording happen), and what it did goes back to
//! the model until the program calls `done()` or `complete()`.
//!
//! - `drive.rs`: the loop of a turn, and what each reply becomes;
//! - `execution.rs`: one program's lifecycle, from launch to its recorded outcome;
//! - `batch.rs`: the tool calls of one request, their decisions and their run;
//! - `resume.rs`: picking a script up again from its journal;
//! - `request.rs`: what the model is asked;
//! - `candidates.rs`: after a failure, the next program dry-run first, and sampled again
//!   when it would fail too;
//! - `votes.rs`: samples that vote on the answer of a program that computed it;
//! - `timeline.rs`: the read-only view of the turn that the loop and the rules query.

use std::sync::Arc;

use agentic_core::{
    Driven, ExecutionModeFactory, ExecutorBase, ExecutorCreateOptions, ExecutorError, ModeDriver,
    Prepared, Prompt, PromptExecutor, Verdict,
};
use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::journal::{Entry, Replay};
use crate::plugin::Shared;
use crate::protocol::{CodePath, ExecutionOutcome, ToolBinding};
use crate::rules::Notice;
use crate::sandbox::Execution;

mod batch;
mod candidates;
mod drive;
mod execution;
mod plan;
mod request;
mod resume;
mod review;
mod timeline;
mod votes;

use batch::Batch;
use timeline::Timeline;
pub(crate) use votes::Voted;

pub(crate) const CODE_MODE: &str = "code";

/// Registers [`CodeExecutor`] as mode `code`.
pub(crate) struct CodeModeFactory {
    pub(crate) shared: Arc<Shared>,
}

impl ExecutionModeFactory for CodeModeFactory {
    fn id(&self) -> &str {
        CODE_MODE
    }
    fn name(&self) -> &str {
        "Code (JavaScript sandbox)"
    }
    fn create_executor(&self, options: ExecutorCreateOptions) -> Box<dyn PromptExecutor> {
        Box::new(Driven(CodeExecutor::new(options, self.shared.clone())))
    }
    /// A script paused at an approval, or running when its process stopped, is replayed
    /// from its journal in a fresh worker (see `journal.rs`).
    fn resumes_after_restart(&self) -> bool {
        true
    }
    fn plan_tool(&self) -> Option<&str> {
        Some(crate::plan::CODE_PLAN)
    }
}

/// The code-mode executor.
pub(crate) struct CodeExecutor {
    base: ExecutorBase,
    shared: Arc<Shared>,
    /// The names the prepared tools are bound to in the sandbox, from the first prepare.
    bindings: Option<Vec<ToolBinding>>,
    /// The system prompt, built from `prepared` on the first request and the same for every
    /// request of the prompt after it.
    system: std::sync::OnceLock<String>,
    /// The grammar of this prompt's programs (see [`crate::grammar`]), built on first use.
    grammar: std::sync::OnceLock<String>,
    iterations: u32,
    max_iterations: u32,
    /// `store()`/`recall()` values, carried from one iteration to the next.
    store: Map<String, Value>,
    active: Option<ActiveExecution>,
    /// The current program's plan, when it was planned first.
    plan: Option<plan::PlanState>,
    /// The `llm()` answers its dry run got, for the real run to read the same.
    dry_llm: std::collections::VecDeque<(String, bool, crate::protocol::HostReply)>,
    /// Programs checked before they ran in this process (`candidates.rs`): a replay takes
    /// the n-th check's verdicts from its recording.
    checks: usize,
    /// A program's answer was reviewed in this turn (`review.rs`): at most once a turn.
    reviewed: bool,
}

impl std::fmt::Debug for CodeExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeExecutor")
            .field("prompt", &self.base.recorder.prompt().id)
            .finish_non_exhaustive()
    }
}

/// A script that is running, or paused at a host request.
struct ActiveExecution {
    execution: Execution,
    code_output_id: String,
    path: CodePath,
    logs: Vec<String>,
    /// The tool calls of the request the script is blocked on.
    batch: Option<Batch>,
    /// The `execute_code` span: the script's tool calls and `llm()` calls are its children.
    span: tracing::Span,
    /// A resumed script: what answers its requests until it catches up with its journal.
    replay: Option<Replay>,
    /// The `store()` values it started with.
    start_store: Map<String, Value>,
}

enum Progress {
    Paused,
    Finished(Box<ExecutionOutcome>),
}

impl CodeExecutor {
    pub(crate) fn new(options: ExecutorCreateOptions, shared: Arc<Shared>) -> Self {
        let max_iterations = options
            .prompt
            .max_rounds
            .unwrap_or(shared.config.max_iterations);
        Self {
            base: ExecutorBase::new(options),
            shared,
            bindings: None,
            system: std::sync::OnceLock::new(),
            grammar: std::sync::OnceLock::new(),
            iterations: 0,
            checks: 0,
            reviewed: false,
            max_iterations,
            store: Map::new(),
            active: None,
            plan: None,
            dry_llm: std::collections::VecDeque::new(),
        }
    }

    /// This turn as recorded so far.
    fn timeline(&self) -> Timeline<'_> {
        Timeline::of(self.base.recorder.prompt())
    }

    /// What `rules::unwritten` tells the model when the turn would end now while a file the
    /// user asked for was not written by a call of this turn, nor by one of `planned` (the
    /// calls a dry run answered with a placeholder); `None` when it has told it already.
    fn unwritten_notice(&self, prepared: &Prepared, planned: &[(String, Value)]) -> Option<String> {
        if self.timeline().count(Notice::Unwritten) > 0 {
            return None;
        }
        let asked = crate::rules::unwritten::asked_files(self.timeline().asked());
        if asked.is_empty() {
            return None;
        }
        let read_only = |tool: &str| {
            prepared
                .tools
                .get(tool)
                .is_some_and(|tool| tool.read_only())
        };
        let mut changes = self.timeline().change_inputs(read_only);
        changes.extend(
            planned
                .iter()
                .filter(|(tool, _)| !read_only(tool))
                .map(|(_, input)| input),
        );
        let file = crate::rules::unwritten::unwritten(&asked, changes.into_iter())?;
        let write = self
            .bindings
            .as_deref()
            .unwrap_or_default()
            .iter()
            .find(|binding| binding.id == "fs.write")
            .map(ToolBinding::call_name);
        Some(crate::rules::unwritten::notice(file, write.as_deref()))
    }

    /// Appends to the prompt's journal, durably, before the script goes on.
    async fn journal(&self, entry: Entry) -> Result<(), ExecutorError> {
        let Some(checkpoint) = &self.base.options.prompt.checkpoint else {
            return Ok(());
        };
        let entry = serde_json::to_value(&entry)
            .map_err(|error| ExecutorError::Internal(error.to_string()))?;
        checkpoint
            .append_journal(&self.base.recorder.prompt().id, entry)
            .await
            .map_err(|error| {
                ExecutorError::Internal(format!("could not journal the script: {error:#}"))
            })
    }

    /// The prompt's tools, with code mode's advice for refused inputs, and their names in
    /// the sandbox.
    async fn prepared(&mut self) -> anyhow::Result<(Prepared, Vec<ToolBinding>)> {
        let prepared = self
            .base
            .prepared(|mut prepared| {
                prepared.tools = prepared
                    .tools
                    .with_input_advice(crate::rules::input_advice::advice);
                prepared
            })
            .await?;
        let bindings = self
            .bindings
            .get_or_insert_with(|| {
                crate::names::bindings(
                    prepared
                        .tools
                        .iter()
                        .map(|tool| crate::names::ToolNames::of(tool.as_ref())),
                )
            })
            .clone();
        Ok((prepared, bindings))
    }
}

fn new_call_id() -> String {
    format!("call_{}", uuid::Uuid::new_v4().simple())
}

#[async_trait]
impl ModeDriver for CodeExecutor {
    fn base(&self) -> &ExecutorBase {
        &self.base
    }

    async fn advance(&mut self) -> Result<Prompt, ExecutorError> {
        self.drive().await
    }

    async fn apply_verdict(
        &mut self,
        tool_call_id: &str,
        verdict: &Verdict,
    ) -> Result<Prompt, ExecutorError> {
        if let Some(prompt) = self.restore_waiting(tool_call_id).await? {
            return Ok(prompt);
        }
        if self.waiting_plan(tool_call_id) {
            return self.decide_plan(verdict).await;
        }
        // One decision covers every call of the request that waits; it may name any of them.
        let asked = self.waiting_calls();
        if !asked.iter().any(|id| id == tool_call_id) {
            return Err(ExecutorError::NotWaiting(tool_call_id.to_owned()));
        }
        let approved = self.base.record_verdicts(&asked, verdict).await?;
        self.decide_waiting(&asked, &approved, verdict);
        if let Some(active) = self.active.as_mut() {
            active.execution.resume_clock().await;
        }
        self.drive().await
    }
}

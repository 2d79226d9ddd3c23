//! The one takeover policy: what becomes of a tool call that a prompt's process left
//! unfinished (pending, or closed as interrupted) when the prompt goes on elsewhere, taken
//! over by another server or continued after a restart. Both modes ask it.

use crate::mode::ExecutorError;
use crate::prompt::{ErrorKind, ToolOutput, ToolResult};
use crate::recorder::PromptRecorder;
use crate::runtime::TAKEN_OVER_TOOL_ERROR;
use crate::tool::ToolSet;

/// What an unfinished call became.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adopted {
    /// It runs (again): it never started, or its tool is idempotent.
    Runs,
    /// It may have taken effect and is not safe to repeat: it keeps a
    /// [`taken_over`] error, its final word, so a later takeover does not count it again.
    TakenOver,
}

/// Decides and records what the unfinished call `call` becomes. `may_have_run` says whether
/// the stopped process may have been running it (a call queued behind another never
/// started). A call that runs again and was closed as interrupted is reopened, waiting with
/// `reason`.
pub async fn adopt(
    recorder: &mut PromptRecorder,
    tools: &ToolSet,
    call: &ToolOutput,
    may_have_run: bool,
    reason: &str,
) -> Result<Adopted, ExecutorError> {
    if !may_have_run || tools.idempotent(&call.function) {
        if call.result.error_kind() == Some(ErrorKind::Interrupted) {
            recorder.reopen_tool(&call.id, reason).await?;
        }
        return Ok(Adopted::Runs);
    }
    recorder.finish_tool(&call.id, taken_over()).await?;
    Ok(Adopted::TakenOver)
}

/// The result of a call whose process stopped before recording it, not run again.
pub fn taken_over() -> ToolResult {
    ToolResult::error(ErrorKind::TakenOver, TAKEN_OVER_TOOL_ERROR)
}

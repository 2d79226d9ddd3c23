//! The one place that changes a running prompt: every mode records its timeline through a
//! [`PromptRecorder`], so outputs, events and checkpoints look the same whichever mode ran.

use std::sync::Arc;

use chrono::Utc;
use serde_json::Value;

use crate::event::{BatchedCall, EventPayload, EventService};
use crate::mode::{ExecutorError, PromptChange, PromptCheckpoint};
use crate::prompt::{
    DecisionRecord, FileOutput, Prompt, PromptOutput, PromptState, PromptUsage, Reasoning,
    ReasoningOutput, TextOutput, ToolOutput, ToolResult,
};

/// Owns a prompt while it runs. Each change is checkpointed and then published before the
/// method returns: no event leaves the process for a change that is not committed, so a
/// client never sees an output that a crash can take back, and the next step never runs
/// ahead of what was saved.
pub struct PromptRecorder {
    prompt: Prompt,
    events: EventService,
    checkpoint: Option<Arc<dyn PromptCheckpoint>>,
}

impl std::fmt::Debug for PromptRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptRecorder")
            .field("prompt", &self.prompt.id)
            .finish_non_exhaustive()
    }
}

impl PromptRecorder {
    /// Records `prompt`, publishing through `events` and saving each change through
    /// `checkpoint` (without one, nothing is saved).
    pub fn new(
        prompt: Prompt,
        events: EventService,
        checkpoint: Option<Arc<dyn PromptCheckpoint>>,
    ) -> Self {
        Self {
            prompt,
            events,
            checkpoint,
        }
    }

    /// The prompt as recorded so far.
    pub fn prompt(&self) -> &Prompt {
        &self.prompt
    }

    /// Publishes a streamed text delta (not checkpointed: the text output that follows is).
    pub fn stream(&self, delta: &str) {
        self.publish(EventPayload::PromptStream {
            prompt_id: self.prompt.id.clone(),
            delta: delta.to_owned(),
            tool_call_id: None,
            progress: None,
        });
    }

    /// A function that publishes deltas of this prompt, for streaming callbacks.
    pub fn stream_sink(&self) -> impl FnMut(&str) + Send + use<> {
        let events = self.events.clone();
        let prompt_id = self.prompt.id.clone();
        let user_id = self.prompt.user_id.clone();
        move |delta: &str| {
            events.publish(
                &user_id,
                EventPayload::PromptStream {
                    prompt_id: prompt_id.clone(),
                    delta: delta.to_owned(),
                    tool_call_id: None,
                    progress: None,
                },
            );
        }
    }

    /// Records a text that was not streamed as it was produced (a message of the mode, code
    /// mode's `output()`): it is published whole as one `prompt.stream` first, so clients that
    /// show the stream show every text.
    pub async fn push_unstreamed_text(&mut self, content: &str) -> Result<(), ExecutorError> {
        let now = Utc::now();
        let output = PromptOutput::Text(TextOutput {
            id: uuid::Uuid::new_v4().to_string(),
            content: content.to_owned(),
            start: now,
            end: Some(now),
        });
        self.prompt.output.push(output.clone());
        self.save(PromptChange::Output(self.prompt.output.len() - 1))
            .await?;
        self.stream(content);
        self.publish_output(output);
        Ok(())
    }

    /// Adds a finished text output whose deltas were already streamed: only `prompt.output`
    /// is published (see [`Self::push_unstreamed_text`]).
    pub async fn push_text(&mut self, content: &str) -> Result<(), ExecutorError> {
        let now = Utc::now();
        self.push(PromptOutput::Text(TextOutput {
            id: uuid::Uuid::new_v4().to_string(),
            content: content.to_owned(),
            start: now,
            end: Some(now),
        }))
        .await
    }

    /// Adds the model's reasoning, each block an output, before what it said or did next.
    pub async fn push_reasoning(&mut self, reasoning: &[Reasoning]) -> Result<(), ExecutorError> {
        for block in reasoning {
            let now = Utc::now();
            self.push(PromptOutput::Reasoning(ReasoningOutput {
                id: uuid::Uuid::new_v4().to_string(),
                reasoning: block.clone(),
                start: now,
                end: Some(now),
            }))
            .await?;
        }
        Ok(())
    }

    /// Adds a tool output whose result is still `pending`.
    pub async fn start_tool(
        &mut self,
        id: &str,
        function: &str,
        input: Value,
        reason: &str,
    ) -> Result<(), ExecutorError> {
        self.push(PromptOutput::Tool(ToolOutput {
            id: id.to_owned(),
            function: function.to_owned(),
            input,
            result: ToolResult::pending(reason),
            start: Utc::now(),
            end: None,
            decision: None,
        }))
        .await
    }

    /// Adds a tool output that already has its result, e.g. a call whose arguments did not parse.
    pub async fn push_finished_tool(
        &mut self,
        id: &str,
        function: &str,
        input: Value,
        result: ToolResult,
    ) -> Result<(), ExecutorError> {
        let now = Utc::now();
        self.push(PromptOutput::Tool(ToolOutput {
            id: id.to_owned(),
            function: function.to_owned(),
            input,
            result,
            start: now,
            end: Some(now),
            decision: None,
        }))
        .await
    }

    /// Keeps the record of the decision on a call that waited, saved and published with the
    /// call before the call runs or fails.
    pub async fn record_decision(
        &mut self,
        id: &str,
        record: DecisionRecord,
    ) -> Result<(), ExecutorError> {
        let index = self
            .tool_index(id)
            .ok_or_else(|| ExecutorError::Internal(format!("no tool output \"{id}\"")))?;
        let PromptOutput::Tool(tool) = &mut self.prompt.output[index] else {
            return Err(ExecutorError::Internal(format!("no tool output \"{id}\"")));
        };
        tool.decision = Some(record);
        let output = PromptOutput::Tool(tool.clone());
        self.save(PromptChange::Output(index)).await?;
        self.publish_output(output);
        Ok(())
    }

    /// Marks a queued tool call as starting now, without publishing (its result will be).
    pub fn mark_tool_started(&mut self, id: &str) {
        if let Some(tool) = self.tool_mut(id) {
            tool.start = Utc::now();
        }
    }

    /// Sets a tool output's result and end time.
    pub async fn finish_tool(&mut self, id: &str, result: ToolResult) -> Result<(), ExecutorError> {
        let index = self
            .tool_index(id)
            .ok_or_else(|| ExecutorError::Internal(format!("no tool output \"{id}\"")))?;
        let PromptOutput::Tool(tool) = &mut self.prompt.output[index] else {
            return Err(ExecutorError::Internal(format!("no tool output \"{id}\"")));
        };
        tool.result = result;
        tool.end = Some(Utc::now());
        let output = PromptOutput::Tool(tool.clone());
        self.save(PromptChange::Output(index)).await?;
        self.publish_output(output);
        Ok(())
    }

    /// Sets a finished tool output back to pending, e.g. a code-mode execution that an
    /// interruption ended and that a resumed prompt runs on.
    pub async fn reopen_tool(&mut self, id: &str, reason: &str) -> Result<(), ExecutorError> {
        let index = self
            .tool_index(id)
            .ok_or_else(|| ExecutorError::Internal(format!("no tool output \"{id}\"")))?;
        let PromptOutput::Tool(tool) = &mut self.prompt.output[index] else {
            return Err(ExecutorError::Internal(format!("no tool output \"{id}\"")));
        };
        tool.result = ToolResult::pending(reason);
        tool.end = None;
        let output = PromptOutput::Tool(tool.clone());
        self.save(PromptChange::Output(index)).await?;
        self.publish_output(output);
        Ok(())
    }

    /// Adds a file output.
    pub async fn push_file(&mut self, file: FileOutput) -> Result<(), ExecutorError> {
        self.push(PromptOutput::File(file)).await
    }

    /// Marks the call `tool_call_id` as waiting for a person, with `reason` shown to them, and
    /// the prompt as waiting for approval.
    pub async fn request_approval(
        &mut self,
        tool_call_id: &str,
        reason: &str,
    ) -> Result<(), ExecutorError> {
        self.request_approvals(&[(tool_call_id.to_owned(), reason.to_owned())])
            .await
    }

    /// Marks `calls` (ids with the reason each is shown with) as waiting for one decision
    /// that covers them all, and the prompt as waiting for approval. The request is published
    /// for the first; with more than one, it lists them all as its `batch`.
    pub async fn request_approvals(
        &mut self,
        calls: &[(String, String)],
    ) -> Result<(), ExecutorError> {
        let mut batch = Vec::with_capacity(calls.len());
        for (tool_call_id, reason) in calls {
            let index = self.tool_index(tool_call_id).ok_or_else(|| {
                ExecutorError::Internal(format!("no tool output \"{tool_call_id}\""))
            })?;
            let PromptOutput::Tool(tool) = &mut self.prompt.output[index] else {
                return Err(ExecutorError::Internal(format!(
                    "no tool output \"{tool_call_id}\""
                )));
            };
            tool.result = ToolResult::Pending {
                reason: reason.clone(),
                awaiting_approval: true,
            };
            batch.push(BatchedCall {
                tool_call_id: tool_call_id.clone(),
                tool_name: tool.function.clone(),
                input: tool.input.clone(),
                reason: reason.clone(),
            });
            let output = PromptOutput::Tool(tool.clone());
            self.prompt.state = PromptState::WaitingForApproval;
            self.save(PromptChange::Output(index)).await?;
            self.publish_output(output);
        }
        let Some(first) = batch.first().cloned() else {
            return Ok(());
        };
        if batch.len() == 1 {
            batch.clear();
        }
        self.publish(EventPayload::ApprovalRequested {
            prompt_id: self.prompt.id.clone(),
            tool_call_id: first.tool_call_id,
            tool_name: first.tool_name,
            input: first.input,
            reason: first.reason,
            batch,
        });
        Ok(())
    }

    /// Back to `running`, e.g. after an approval decision: no call waits for a person any
    /// more (a decision for one is refused from now on).
    pub async fn resume(&mut self) -> Result<(), ExecutorError> {
        self.prompt.state = PromptState::Running;
        let mut decided = Vec::new();
        for (index, output) in self.prompt.output.iter_mut().enumerate() {
            if let PromptOutput::Tool(tool) = output
                && let ToolResult::Pending {
                    awaiting_approval, ..
                } = &mut tool.result
                && *awaiting_approval
            {
                *awaiting_approval = false;
                decided.push(index);
            }
        }
        if decided.is_empty() {
            return self.save(PromptChange::Prompt).await;
        }
        for index in decided {
            self.save(PromptChange::Output(index)).await?;
        }
        Ok(())
    }

    /// Adds a model call's usage to the prompt's; it is saved with the next change.
    pub fn add_usage(&mut self, usage: &PromptUsage) {
        self.prompt.usage.add(usage);
    }

    /// Ends the prompt as `completed` and publishes `prompt.completed`.
    pub async fn complete(&mut self) -> Result<(), ExecutorError> {
        self.prompt.state = PromptState::Completed;
        self.save(PromptChange::Prompt).await?;
        self.publish(EventPayload::PromptCompleted {
            prompt_id: self.prompt.id.clone(),
            output: self.prompt.output.clone(),
            usage: self.prompt.usage.clone(),
        });
        Ok(())
    }

    /// Ends the prompt as `failed`, keeping its outputs.
    pub async fn fail(&mut self, error: &str) -> Result<(), ExecutorError> {
        self.prompt.state = PromptState::Failed;
        self.prompt.error = Some(error.to_owned());
        self.save(PromptChange::Prompt).await?;
        self.publish(EventPayload::PromptError {
            prompt_id: self.prompt.id.clone(),
            error: error.to_owned(),
        });
        Ok(())
    }

    /// The first tool output still `pending`, in timeline order.
    pub fn first_pending_tool(&self) -> Option<&ToolOutput> {
        self.prompt.output.iter().find_map(|output| match output {
            PromptOutput::Tool(tool) if tool.result.is_pending() => Some(tool),
            _ => None,
        })
    }

    async fn push(&mut self, output: PromptOutput) -> Result<(), ExecutorError> {
        self.prompt.output.push(output.clone());
        self.save(PromptChange::Output(self.prompt.output.len() - 1))
            .await?;
        self.publish_output(output);
        Ok(())
    }

    fn tool_mut(&mut self, id: &str) -> Option<&mut ToolOutput> {
        let index = self.tool_index(id)?;
        match &mut self.prompt.output[index] {
            PromptOutput::Tool(tool) => Some(tool),
            _ => None,
        }
    }

    fn tool_index(&self, id: &str) -> Option<usize> {
        // From the end: the output being updated is almost always among the latest.
        self.prompt
            .output
            .iter()
            .rposition(|output| matches!(output, PromptOutput::Tool(tool) if tool.id == id))
    }

    fn publish_output(&self, output: PromptOutput) {
        self.publish(EventPayload::PromptOutput {
            prompt_id: self.prompt.id.clone(),
            output,
        });
    }

    fn publish(&self, payload: EventPayload) {
        self.events.publish(&self.prompt.user_id, payload);
    }

    async fn save(&self, change: PromptChange) -> Result<(), ExecutorError> {
        if let Some(checkpoint) = &self.checkpoint {
            checkpoint
                .save(&self.prompt, change)
                .await
                .map_err(|error| {
                    ExecutorError::Internal(format!(
                        "could not save prompt {}: {error:#}",
                        self.prompt.id
                    ))
                })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ModelKind;

    /// A store that is down: every save fails.
    struct Unreachable;

    #[async_trait::async_trait]
    impl PromptCheckpoint for Unreachable {
        async fn save(&self, _prompt: &Prompt, _change: PromptChange) -> anyhow::Result<()> {
            anyhow::bail!("the database is unreachable")
        }
    }

    enum Change {
        Text,
        UnstreamedText,
        StartTool,
        FinishedTool,
        FinishTool,
        ReopenTool,
        File,
        RequestApproval,
        Complete,
        Fail,
    }

    async fn apply(recorder: &mut PromptRecorder, change: &Change) -> Result<(), ExecutorError> {
        let success = ToolResult::Success {
            output: Value::Null,
        };
        match change {
            Change::Text => recorder.push_text("hello").await,
            Change::UnstreamedText => recorder.push_unstreamed_text("hello").await,
            Change::StartTool => {
                recorder
                    .start_tool("new", "fs.read", Value::Null, "running")
                    .await
            }
            Change::FinishedTool => {
                recorder
                    .push_finished_tool("new", "fs.read", Value::Null, success)
                    .await
            }
            Change::FinishTool => recorder.finish_tool("call", success).await,
            Change::ReopenTool => recorder.reopen_tool("call", "running").await,
            Change::File => {
                let now = Utc::now();
                recorder
                    .push_file(FileOutput {
                        id: "file".to_owned(),
                        path: "a.txt".to_owned(),
                        mime_type: "text/plain".to_owned(),
                        description: None,
                        start: now,
                        end: Some(now),
                    })
                    .await
            }
            Change::RequestApproval => recorder.request_approval("call", "writes").await,
            Change::Complete => recorder.complete().await,
            Change::Fail => recorder.fail("broken").await,
        }
    }

    /// No event leaves for a change that was not saved: with the store down, every change
    /// fails and nobody hears of it (a client shown an output a crash then takes back would
    /// believe in work that never happened).
    #[tokio::test]
    async fn nothing_is_published_for_a_change_that_was_not_saved() {
        for change in [
            Change::Text,
            Change::UnstreamedText,
            Change::StartTool,
            Change::FinishedTool,
            Change::FinishTool,
            Change::ReopenTool,
            Change::File,
            Change::RequestApproval,
            Change::Complete,
            Change::Fail,
        ] {
            let events = EventService::new(64);
            let mut alice = events.subscribe(Some("alice"));
            let mut prompt = Prompt::new("alice", "classic", ModelKind::default(), None);
            prompt.output.push(PromptOutput::Tool(ToolOutput {
                id: "call".to_owned(),
                function: "fs.write".to_owned(),
                input: Value::Null,
                result: ToolResult::pending("running"),
                start: Utc::now(),
                end: None,
                decision: None,
            }));
            let mut recorder = PromptRecorder::new(prompt, events, Some(Arc::new(Unreachable)));
            let result = apply(&mut recorder, &change).await;
            assert!(
                matches!(&result, Err(ExecutorError::Internal(message)) if message.contains("unreachable")),
                "{result:?}"
            );
            let published = alice.try_next();
            assert_eq!(published, None, "published before it was saved");
        }
    }
}

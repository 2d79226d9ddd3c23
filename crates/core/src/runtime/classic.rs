//! Classic mode: the model answers with text and structured tool calls; calls are validated,
//! run in order (pausing for approval where a tool asks for it) and fed back, round after
//! round.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::history::{history_messages, output_messages};
use crate::mode::{
    ExecutionModeFactory, ExecutorCreateOptions, ExecutorError, PromptExecutor, Verdict,
};
use crate::plugin::Prepared;
use crate::prompt::{ErrorKind, Prompt, PromptOutput, PromptState, ToolOutput, ToolResult};
use crate::provider::{ChatMessage, ModelRequest, ModelResponse, ToolSpec};
use crate::runtime::executor::{Driven, ExecutorBase, ModeDriver};
use crate::runtime::takeover;
use crate::tool::{Approval, ToolContext};

/// The id of classic mode.
pub const CLASSIC_MODE: &str = "classic";
/// The text output a prompt ends with when it used up its rounds.
pub const MAX_ROUNDS_MESSAGE: &str = "Exceeded maximum number of rounds";
const DEFAULT_SYSTEM_PROMPT: &str = "You are a helpful assistant. Use the tools you are given when \
they help you answer, and answer in plain text when you are done.";
const QUEUED_REASON: &str = "waiting to run";
/// The notice of a call not run because the same call already succeeded in the turn. Stored:
/// never rename it.
pub const SAME_CALL_NOTICE: &str = "repeated_call";

/// Registers [`ClassicExecutor`] as mode `classic`.
#[derive(Debug, Default)]
pub struct ClassicModeFactory;

impl ExecutionModeFactory for ClassicModeFactory {
    fn id(&self) -> &str {
        CLASSIC_MODE
    }
    fn name(&self) -> &str {
        "Classic (text + tools)"
    }
    fn create_executor(&self, options: ExecutorCreateOptions) -> Box<dyn PromptExecutor> {
        Box::new(Driven(ClassicExecutor::new(options)))
    }
}

/// The classic executor.
pub struct ClassicExecutor {
    base: ExecutorBase,
    rounds: u32,
    max_rounds: u32,
    approved: HashSet<String>,
}

impl std::fmt::Debug for ClassicExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClassicExecutor")
            .field("prompt", &self.base.prompt().id)
            .finish_non_exhaustive()
    }
}

enum Progress {
    Continue,
    Paused,
}

impl ClassicExecutor {
    /// An executor for the prompt `options` asks for, or for the one it resumes.
    pub fn new(options: ExecutorCreateOptions) -> Self {
        let max_rounds = options
            .prompt
            .max_rounds
            .unwrap_or_else(|| options.services.limits().max_rounds);
        Self {
            base: ExecutorBase::new(options),
            rounds: 0,
            max_rounds,
            approved: HashSet::new(),
        }
    }

    /// A prompt that goes on after its process died (taken over, or continued after an
    /// interruption). Calls run one at a time, in order, so of its unfinished calls only the
    /// first may have been running there: it runs again if its tool is idempotent, and
    /// otherwise keeps an error saying it was interrupted. The calls after it never started
    /// and run now.
    async fn adopt_unfinished_calls(&mut self, prepared: &Prepared) -> Result<(), ExecutorError> {
        let unfinished: Vec<ToolOutput> = self
            .base
            .recorder
            .prompt()
            .output
            .iter()
            .filter_map(|output| match output {
                PromptOutput::Tool(tool)
                    if tool.result.is_pending()
                        || tool.result.error_kind() == Some(ErrorKind::Interrupted) =>
                {
                    Some(tool.clone())
                }
                _ => None,
            })
            .collect();
        for (index, call) in unfinished.iter().enumerate() {
            takeover::adopt(
                &mut self.base.recorder,
                &prepared.tools,
                call,
                index == 0,
                QUEUED_REASON,
            )
            .await?;
        }
        Ok(())
    }

    async fn drive(&mut self) -> Result<Prompt, ExecutorError> {
        let prepared = match self.prepared().await {
            Ok(prepared) => prepared,
            Err(error) => return self.base.fail_preparing(&error).await,
        };
        // Calls a decision approved before this process held the prompt (decided together
        // with one that ran first, say) stay approved.
        for output in &self.base.recorder.prompt().output {
            if let PromptOutput::Tool(tool) = output
                && tool.result.is_pending()
                && tool
                    .decision
                    .as_ref()
                    .is_some_and(|record| record.verdict.rejection().is_none())
            {
                self.approved.insert(tool.id.clone());
            }
        }
        if self.base.take_resumed() == Some(PromptState::Running) {
            self.adopt_unfinished_calls(&prepared).await?;
        }
        loop {
            if let Progress::Paused = self.run_pending_tools(&prepared).await? {
                return Ok(self.base.recorder.prompt().clone());
            }
            if self.rounds >= self.max_rounds {
                self.base
                    .recorder
                    .push_unstreamed_text(MAX_ROUNDS_MESSAGE)
                    .await?;
                self.base.recorder.complete().await?;
                return Ok(self.base.recorder.prompt().clone());
            }
            self.rounds += 1;
            let request = self.request(&prepared);
            let mut on_delta = self.base.recorder.stream_sink();
            let response = self
                .base
                .options
                .services
                .completion
                .complete_messages(request, &mut on_delta)
                .await;
            self.base.journal_reply(&response, None).await;
            let response = match response {
                Ok(response) => response,
                Err(error) => {
                    self.base.recorder.fail(&error.to_string()).await?;
                    return Ok(self.base.recorder.prompt().clone());
                }
            };
            self.base.recorder.add_usage(&response.usage);
            let response = self.calls_from_text(response, &prepared);
            self.base
                .recorder
                .push_reasoning(&response.reasoning)
                .await?;
            if !response.text.is_empty() {
                self.base.recorder.push_text(&response.text).await?;
            }
            if response.tool_calls.is_empty() {
                self.base.recorder.complete().await?;
                return Ok(self.base.recorder.prompt().clone());
            }
            for mut call in response.tool_calls {
                // An id the prompt already has (a model or server that repeats one) gets a
                // suffix: a decision or a result must reach one call only.
                let mut again = 1;
                let first = call.id.clone();
                while self.base.recorder.prompt().tool_output(&call.id).is_some() {
                    again += 1;
                    call.id = format!("{first}-{again}");
                }
                match serde_json::from_str::<Value>(non_empty_arguments(&call.arguments)) {
                    Ok(input) if self.succeeded_before(&call.name, &input) => {
                        // The same call again after it succeeded: a small model in a loop
                        // (seen: fs.write twelve times over, to the round limit). Not run; told
                        // once, and a second time ends the turn.
                        let told = self.base.recorder.prompt().output.iter().any(|output| {
                            matches!(output, PromptOutput::Tool(tool)
                                if tool.result.notice() == Some(SAME_CALL_NOTICE))
                        });
                        let error = format!(
                            "not run: {}({}) already succeeded in this turn, and its result \
                             above is still the answer to it. Answer the user from it, or make a \
                             different call.",
                            call.name,
                            crate::tool::cap_text(&input.to_string(), 200)
                        );
                        let result = ToolResult::error(ErrorKind::NotRun, error)
                            .with_notice(SAME_CALL_NOTICE);
                        self.base
                            .recorder
                            .push_finished_tool(&call.id, &call.name, input, result)
                            .await?;
                        if told {
                            self.base
                                .recorder
                                .push_unstreamed_text(&format!(
                                    "Stopped: the model kept repeating {}, a call that had \
                                     already succeeded, instead of answering.",
                                    call.name
                                ))
                                .await?;
                            self.base.recorder.complete().await?;
                            return Ok(self.base.recorder.prompt().clone());
                        }
                    }
                    Ok(input) => {
                        self.base
                            .recorder
                            .start_tool(&call.id, &call.name, input, QUEUED_REASON)
                            .await?;
                    }
                    Err(error) => {
                        let result =
                            ToolResult::failed(format!("invalid JSON in tool arguments: {error}"));
                        self.base
                            .recorder
                            .push_finished_tool(
                                &call.id,
                                &call.name,
                                Value::String(call.arguments.clone()),
                                result,
                            )
                            .await?;
                    }
                }
            }
        }
    }

    /// `response`, with calls the server passed through as text taken as calls.
    fn calls_from_text(&self, mut response: ModelResponse, prepared: &Prepared) -> ModelResponse {
        if response.tool_calls.is_empty() {
            let (calls, rest) = crate::text_calls::text_tool_calls(&response.text, &prepared.tools);
            if !calls.is_empty() {
                response.tool_calls = calls;
                response.text = rest;
            }
        }
        response
    }

    /// Whether this turn already ran `name` with `input`, and it succeeded.
    fn succeeded_before(&self, name: &str, input: &Value) -> bool {
        self.base.recorder.prompt().output.iter().any(|output| {
            matches!(output, PromptOutput::Tool(tool)
                if tool.function == name
                    && &tool.input == input
                    && matches!(tool.result, ToolResult::Success { .. }))
        })
    }

    /// Runs every queued call in order; stops at the first that needs an approval not yet given.
    async fn run_pending_tools(&mut self, prepared: &Prepared) -> Result<Progress, ExecutorError> {
        while let Some(pending) = self.base.recorder.first_pending_tool() {
            let (id, function, input) = (
                pending.id.clone(),
                pending.function.clone(),
                pending.input.clone(),
            );
            if !self.approved.contains(&id)
                && let Approval::Required { reason } = prepared.tools.approval(&function, &input)
            {
                match self.base.scope_for(&function, &reason).await {
                    // A scope a person granted earlier approves it.
                    Some(record) => self.base.recorder.record_decision(&id, record).await?,
                    None => {
                        // The round's other calls that need a person are decided with it.
                        let mut batch = vec![(id, reason)];
                        batch.extend(self.also_asked(prepared).await);
                        self.base.recorder.request_approvals(&batch).await?;
                        return Ok(Progress::Paused);
                    }
                }
            }
            self.base.recorder.mark_tool_started(&id);
            let context = ToolContext::new(
                &self.base.recorder.prompt().user_id,
                &self.base.recorder.prompt().id,
                self.base.options.prompt.state.clone(),
                self.base.options.services.clone(),
            )
            .for_call(&id);
            let result = match prepared
                .tools
                .invoke(context.clone(), &function, input)
                .await
            {
                Ok(output) => ToolResult::Success { output },
                Err(error) => ToolResult::failed(error.to_string()),
            };
            self.base.recorder.finish_tool(&id, result).await?;
            for file in context.take_files() {
                self.base.recorder.push_file(file).await?;
            }
        }
        Ok(Progress::Continue)
    }

    /// The queued calls after the first that need a person too, with why: one decision
    /// covers the round's calls. A call a scope approves is not among them; it is approved
    /// when its turn comes (or asked about then, if the scope was revoked meanwhile).
    async fn also_asked(&self, prepared: &Prepared) -> Vec<(String, String)> {
        let queued: Vec<(String, String, Value)> = self
            .base
            .recorder
            .prompt()
            .output
            .iter()
            .filter_map(|output| match output {
                PromptOutput::Tool(tool) if tool.result.is_pending() => {
                    Some((tool.id.clone(), tool.function.clone(), tool.input.clone()))
                }
                _ => None,
            })
            .skip(1)
            .collect();
        let mut asked = Vec::new();
        for (id, function, input) in queued {
            if self.approved.contains(&id) {
                continue;
            }
            if let Approval::Required { reason } = prepared.tools.approval(&function, &input)
                && self.base.scope_for(&function, &reason).await.is_none()
            {
                asked.push((id, reason));
            }
        }
        asked
    }

    fn request(&self, prepared: &Prepared) -> ModelRequest {
        let limit = self.base.options.services.limits().tool_result_limit;
        let mut messages = vec![ChatMessage::system(self.system_prompt(prepared))];
        for earlier in &self.base.options.prompt.history {
            messages.extend(history_messages(earlier, CLASSIC_MODE, limit));
        }
        let prompt = self.base.recorder.prompt();
        if let Some(input) = &prompt.input {
            messages.push(ChatMessage::user(input.clone()));
        }
        messages.extend(output_messages(&prompt.output, limit));
        let mut request = ModelRequest::new(prompt.model, messages);
        request.tools = prepared
            .tools_in_order()
            .into_iter()
            .map(|tool| ToolSpec {
                name: tool.id().to_owned(),
                description: tool.description().to_owned(),
                parameters: tool.shared_input_schema(),
            })
            .collect();
        request
    }

    fn system_prompt(&self, prepared: &Prepared) -> String {
        let services = &self.base.options.services;
        let mut text = services
            .config
            .get("systemPrompt")
            .and_then(Value::as_str)
            .unwrap_or(DEFAULT_SYSTEM_PROMPT)
            .to_owned();
        for item in &prepared.context {
            text.push_str(&format!("\n\n## {}\n{}", item.title, item.content));
        }
        text
    }

    async fn prepared(&mut self) -> anyhow::Result<Prepared> {
        self.base.prepared(|prepared| prepared).await
    }

    fn waiting_tool_id(&self) -> Option<String> {
        (self.base.recorder.prompt().state == PromptState::WaitingForApproval)
            .then(|| {
                self.base
                    .recorder
                    .first_pending_tool()
                    .map(|tool| tool.id.clone())
            })
            .flatten()
    }
}

fn non_empty_arguments(arguments: &str) -> &str {
    // Models calling a tool without parameters often send nothing at all.
    if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    }
}

#[async_trait]
impl ModeDriver for ClassicExecutor {
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
        // One decision covers every call the request held; it may name any of them.
        let mut asked: Vec<String> = self
            .base
            .recorder
            .prompt()
            .calls_awaiting_approval()
            .into_iter()
            .filter(|tool| tool.result.is_awaiting_approval())
            .map(|tool| tool.id.clone())
            .collect();
        if asked.is_empty() {
            // Stored by a release that did not mark the call: it waits at the first.
            asked.extend(self.waiting_tool_id());
        }
        if !asked.iter().any(|id| id == tool_call_id) {
            return Err(ExecutorError::NotWaiting(tool_call_id.to_owned()));
        }
        let approved = self.base.record_verdicts(&asked, verdict).await?;
        for (id, approved) in asked.into_iter().zip(approved) {
            if approved {
                self.approved.insert(id);
            }
        }
        self.drive().await
    }
}

/// Exposed for modes that want classic's registration as a value.
pub fn classic_mode() -> Arc<dyn ExecutionModeFactory> {
    Arc::new(ClassicModeFactory)
}

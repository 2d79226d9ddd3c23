//! agentic as an MCP server: every tool of every plugin (MCP-client tools included), plus
//! `agentic.prompt`, `agentic.execute` and `agentic.search_tools`. `agentic mcp serve` runs
//! it on stdio; `serve_handler` gives the handler for other transports.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use agentic_conversation::{ConversationService, PromptRequest};
use agentic_core::tool::{portable_schema, search_score};
use agentic_core::{Approval, Approver, FileOutput, PromptState, State, ToolContext, ToolError};
use agentic_core::{EventPayload, Received};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest,
    ElicitRequestParams, Implementation, InputRequest, InputRequiredResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ResourceContents, ServerCapabilities,
    ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Map, Value, json};
use tokio_util::task::AbortOnDropHandle;

mod approvals;
mod transport;

use approvals::*;
pub use transport::{http_router, serve_http, serve_stdio};

/// The tools agentic adds of its own, besides the plugins' tools.
const PROMPT_TOOL: &str = "agentic.prompt";
const EXECUTE_TOOL: &str = "agentic.execute";
const SEARCH_TOOL: &str = "agentic.search_tools";
/// The interpreter's tool that runs JavaScript with every tool as a function.
const RUN_CODE_TOOL: &str = "interpreter.run-code";
/// Bytes of a file a call made that are sent back as content at most.
const MAX_FILE_CONTENT: u64 = 10 * 1024 * 1024;
/// Tools `agentic.search_tools` returns at most.
const SEARCH_LIMIT: usize = 20;

/// The key of the approval question among a 2026-07-28 call's `inputRequests`.
const APPROVAL_KEY: &str = "approval";
/// How long a script paused for a 2026-07-28 client's approval waits for the client to send
/// its call again with the answer.
const PAUSED_FOR: std::time::Duration = std::time::Duration::from_secs(600);

/// The MCP server side: one per connection (cheap: the services are shared).
#[derive(Clone)]
pub struct AgenticServer {
    service: ConversationService,
    user_id: String,
    /// Behind the API's authentication, `X-User-Id` names the user of each request.
    user_header: bool,
    /// `agentic.execute` scripts waiting for a stateless client's approval, by the
    /// `requestState` handle the client sends back with its answer.
    paused: Arc<Mutex<HashMap<String, PausedRun>>>,
}

impl std::fmt::Debug for AgenticServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgenticServer")
            .field("user_id", &self.user_id)
            .finish_non_exhaustive()
    }
}

impl AgenticServer {
    /// A server whose calls and prompts run as `user_id`.
    pub fn new(service: ConversationService, user_id: &str) -> Self {
        Self {
            service,
            user_id: user_id.to_owned(),
            user_header: false,
            paused: Arc::default(),
        }
    }

    /// A server behind the API's authentication, whose requests run as the user their
    /// `X-User-Id` header names.
    pub fn behind_api(service: ConversationService) -> Self {
        Self {
            service,
            user_id: "-".to_owned(),
            user_header: true,
            paused: Arc::default(),
        }
    }

    /// The user a request runs as: behind the API the one its `X-User-Id` header names
    /// (checked by the API's authentication), else the server's own.
    fn user(&self, context: &RequestContext<RoleServer>) -> String {
        if !self.user_header {
            return self.user_id.clone();
        }
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.headers.get("x-user-id"))
            .and_then(|value| value.to_str().ok())
            .map(|user| user.trim().to_owned())
            .unwrap_or_else(|| self.user_id.clone())
    }

    async fn prepared(&self, user: &str) -> Result<agentic_core::Prepared, ErrorData> {
        self.service
            .runtime()
            .services()
            .prepare(user, "mcp", "classic", &State::default())
            .await
            .map_err(|error| ErrorData::internal_error(format!("{error:#}"), None))
    }

    fn own_tools() -> Vec<Tool> {
        let object = |value: Value| match value {
            Value::Object(map) => Arc::new(map),
            _ => Arc::new(Map::new()),
        };
        vec![
            Tool::new_with_raw(
                PROMPT_TOOL,
                Some(
                    "Run a prompt with agentic's agent: it works with its tools until it has an \
                     answer. Returns the answer, the prompt id and the conversation id (pass it \
                     back to continue the conversation)."
                        .into(),
                ),
                object(json!({
                    "type": "object",
                    "properties": {
                        "message": { "type": "string", "description": "The user's message." },
                        "mode": { "type": "string", "description": "Execution mode: classic (the default), code, or one a plugin adds." },
                        "conversationId": { "type": "string", "description": "Continue this conversation; a new one when absent." }
                    },
                    "required": ["message"],
                    "additionalProperties": false
                })),
            )
            .with_annotations(ToolAnnotations::new().read_only(false).destructive(false)),
            Tool::new_with_raw(
                EXECUTE_TOOL,
                Some(
                    "Run JavaScript in agentic's sandbox, where every agentic tool is a function \
                     (`time.now({ timezone })`, `fs.read({ path })`, …; agentic.search_tools \
                     gives their declarations, named as scripts call them). `input` is \
                     available as `input`. Returns the script's last value and its log() \
                     lines. A tool that needs approval asks this client (elicitation) when it \
                     can be asked, and is refused otherwise."
                        .into(),
                ),
                object(json!({
                    "type": "object",
                    "properties": {
                        "code": { "type": "string", "description": "The JavaScript program." },
                        "input": { "description": "Any JSON value, available to the script as `input`." }
                    },
                    "required": ["code"],
                    "additionalProperties": false
                })),
            )
            .with_annotations(ToolAnnotations::new().read_only(false).destructive(false)),
            Tool::new_with_raw(
                SEARCH_TOOL,
                Some(
                    "Find agentic's tools by words: their ids, descriptions and TypeScript \
                     declarations (the functions agentic.execute scripts call)."
                        .into(),
                ),
                object(json!({
                    "type": "object",
                    "properties": {
                        "query": { "type": "string", "description": "Words to look for, e.g. `read file`." }
                    },
                    "required": ["query"],
                    "additionalProperties": false
                })),
            )
            .with_annotations(ToolAnnotations::new().read_only(true)),
        ]
    }

    /// A plugin tool as an MCP tool; `asks`: whether its calls need approval. Its schemas
    /// are made portable ([`portable_schema`]).
    fn mcp_tool(tool: &dyn agentic_core::Tool, asks: bool) -> Tool {
        let schema = match portable_schema(tool.input_schema().clone()) {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        let mut schema = schema;
        schema
            .entry("type")
            .or_insert_with(|| Value::String("object".to_owned()));
        let mut listed = Tool::new_with_raw(
            tool.id().to_owned(),
            Some(tool.description().to_owned().into()),
            Arc::new(schema),
        );
        // Only object output schemas are allowed by MCP.
        if let Some(Value::Object(output)) = tool.output_schema().cloned().map(portable_schema)
            && output.get("type").and_then(Value::as_str) == Some("object")
        {
            listed = listed.with_raw_output_schema(Arc::new(output));
        }
        listed.with_annotations(ToolAnnotations::new().destructive(asks))
    }

    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let user = self.user(&context);
        match request.name.as_ref() {
            PROMPT_TOOL => self.prompt(&user, arguments, context).await.map(Into::into),
            SEARCH_TOOL => self.search(&user, &arguments).await.map(Into::into),
            EXECUTE_TOOL => self.execute(&user, arguments, &request, context).await,
            name => {
                let prepared = self.prepared(&user).await?;
                if prepared.tools.get(name).is_none() {
                    return Err(ErrorData::invalid_params(
                        format!("unknown tool \"{name}\"; tools/list names the tools"),
                        None,
                    ));
                }
                if let Approval::Required { reason } = prepared.tools.approval(name, &arguments) {
                    match self
                        .ask(name, &reason, &arguments, &request, &context)
                        .await
                    {
                        Asked::Approved => {}
                        Asked::Refused(refusal) => {
                            return Ok(
                                CallToolResult::error(vec![ContentBlock::text(refusal)]).into()
                            );
                        }
                        Asked::InputRequired(asked) => return Ok(asked.into()),
                    }
                }
                let cancel = context.ct.clone();
                self.invoke(&user, name, arguments, Some(&context), None, cancel)
                    .await
                    .map(Into::into)
            }
        }
    }

    /// `agentic.execute`: the script runs in `interpreter.run-code`, whose calls that need
    /// approval ask this client when it can be asked. A client of 2025 gets an elicitation
    /// request while the script waits; a stateless client (2026-07-28), which takes no
    /// requests, gets "input required" and sends the call again with its answer, while the
    /// paused script waits here.
    async fn execute(
        &self,
        user: &str,
        arguments: Value,
        request: &CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(handle) = request.request_state.as_deref() {
            // Only the user whose script it is can answer for it.
            let paused = {
                let mut paused = self.paused.lock().unwrap_or_else(PoisonError::into_inner);
                match paused.get(handle) {
                    Some(run) if run.user == user => paused.remove(handle),
                    _ => None,
                }
            };
            let Some(paused) = paused else {
                return Ok(CallToolResult::error(vec![ContentBlock::text(
                    "this script no longer waits for an answer (it was answered, or waited too \
                     long); run it again",
                )])
                .into());
            };
            let answer = request
                .input_responses
                .as_ref()
                .and_then(|answers| answers.get(APPROVAL_KEY))
                .cloned();
            let _ = paused.reply.send(answer);
            return self.drive(user, paused.run, &context).await;
        }
        match elicitation(&context) {
            Elicitation::InputRequired => {
                let (questions, asked) = tokio::sync::mpsc::channel(1);
                let approver: Arc<dyn Approver> = Arc::new(AskedLater { questions });
                let server = self.clone();
                let owner = user.to_owned();
                // Its own cancellation: the run outlives this request while it waits.
                let cancel = tokio_util::sync::CancellationToken::new();
                let stop = cancel.clone();
                let task = tokio::spawn(async move {
                    server
                        .invoke(
                            &owner,
                            RUN_CODE_TOOL,
                            arguments,
                            None,
                            Some(approver),
                            cancel,
                        )
                        .await
                });
                let run = Run {
                    task: AbortOnDropHandle::new(task),
                    asked,
                    _stop: stop.drop_guard(),
                };
                self.drive(user, run, &context).await
            }
            Elicitation::Request => {
                let approver: Arc<dyn Approver> = Arc::new(AskedNow {
                    peer: context.peer.clone(),
                });
                let cancel = context.ct.clone();
                self.invoke(
                    user,
                    RUN_CODE_TOOL,
                    arguments,
                    Some(&context),
                    Some(approver),
                    cancel,
                )
                .await
                .map(Into::into)
            }
            Elicitation::None => {
                let cancel = context.ct.clone();
                self.invoke(user, RUN_CODE_TOOL, arguments, Some(&context), None, cancel)
                    .await
                    .map(Into::into)
            }
        }
    }

    /// Waits for a script run to end or to ask for approval; a question pauses it under a new
    /// handle and becomes the client's "input required".
    async fn drive(
        &self,
        user: &str,
        mut run: Run,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        tokio::select! {
            finished = &mut run.task => match finished {
                Ok(result) => result.map(Into::into),
                Err(error) => Err(ErrorData::internal_error(format!("the script's task failed: {error}"), None)),
            },
            Some(question) = run.asked.recv() => {
                let params = question.form;
                let handle = uuid::Uuid::new_v4().to_string();
                let requests = std::collections::BTreeMap::from([(
                    APPROVAL_KEY.to_owned(),
                    InputRequest::Elicitation(ElicitRequest::new(params)),
                )]);
                self.paused.lock().unwrap_or_else(PoisonError::into_inner).insert(
                    handle.clone(),
                    PausedRun { run, reply: question.reply, user: user.to_owned() },
                );
                // A client that never answers does not keep the script forever.
                let paused = Arc::downgrade(&self.paused);
                let expired = handle.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(PAUSED_FOR).await;
                    if let Some(paused) = paused.upgrade() {
                        paused.lock().unwrap_or_else(PoisonError::into_inner).remove(&expired);
                    }
                });
                Ok(InputRequiredResult::new(Some(requests), Some(handle)).into())
            }
            () = context.ct.cancelled() => Ok(CallToolResult::error(vec![ContentBlock::text(
                "the call was cancelled",
            )]).into()),
        }
    }

    /// Asks whether a direct call that needs approval may run: from the answer the client
    /// sent with its call (2026-07-28), through an elicitation request (2025), or not at all.
    async fn ask(
        &self,
        id: &str,
        reason: &str,
        input: &Value,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Asked {
        if let Some(answer) = request
            .input_responses
            .as_ref()
            .and_then(|answers| answers.get(APPROVAL_KEY))
        {
            return if approves(answer) {
                Asked::Approved
            } else {
                Asked::Refused(format!("{id} was not approved, so it did not run"))
            };
        }
        match elicitation(context) {
            Elicitation::InputRequired => match approval_form(id, reason, input) {
                Ok(params) => Asked::InputRequired(InputRequiredResult::new(
                    Some(std::collections::BTreeMap::from([(
                        APPROVAL_KEY.to_owned(),
                        InputRequest::Elicitation(ElicitRequest::new(params)),
                    )])),
                    None,
                )),
                Err(error) => Asked::Refused(error),
            },
            Elicitation::Request => {
                let approver = AskedNow {
                    peer: context.peer.clone(),
                };
                match approver.approve(id, reason, input).await {
                    Ok(()) => Asked::Approved,
                    Err(refusal) => Asked::Refused(refusal),
                }
            }
            Elicitation::None => Asked::Refused(cannot_ask(id, reason)),
        }
    }

    /// Runs one tool as `user`. `context` is the request whose client hears the call's
    /// progress (none for a run that outlives its request); `approver` approves the calls a
    /// script makes.
    async fn invoke(
        &self,
        user: &str,
        id: &str,
        input: Value,
        context: Option<&RequestContext<RoleServer>>,
        approver: Option<Arc<dyn Approver>>,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<CallToolResult, ErrorData> {
        let prepared = self.prepared(user).await?;
        let services = self.service.runtime().services().clone();
        // Its own id, so that the output it streams (a shell command's, say) reaches this
        // client as progress.
        let call_id = format!("mcp-{}", uuid::Uuid::new_v4());
        let mut tool_context = ToolContext::new(user, &call_id, State::default(), services);
        if let Some(approver) = approver {
            tool_context = tool_context.with_approver(approver);
        }
        let progress = context.and_then(|context| self.forward_stream(user, &call_id, context));
        let call = prepared.tools.invoke(tool_context.clone(), id, input);
        let result = tokio::select! {
            result = call => result,
            () = cancel.cancelled() => Err(ToolError::failed("the call was cancelled")),
        };
        if let Some(progress) = progress {
            progress.finish().await;
        }
        let files = tool_context.take_files();
        let mut result = match result {
            Ok(value) => result_of(value),
            Err(error) => CallToolResult::error(vec![ContentBlock::text(error.to_string())]),
        };
        result.content.extend(self.file_content(user, &files).await);
        Ok(result)
    }

    /// The files a call added to the timeline, as content: images and audio as themselves,
    /// other files as embedded resources (`file:` URIs of their path among the user's files);
    /// a file that cannot be read is named instead.
    async fn file_content(&self, user: &str, files: &[FileOutput]) -> Vec<ContentBlock> {
        use base64::Engine as _;
        let Some(store) = self
            .service
            .runtime()
            .services()
            .extensions
            .get::<agentic_core::UserFiles>()
        else {
            return Vec::new();
        };
        let mut content = Vec::new();
        for file in files {
            let bytes = match store.0.read(user, &file.path, MAX_FILE_CONTENT).await {
                Ok(bytes) => bytes,
                Err(error) => {
                    content.push(ContentBlock::text(format!(
                        "[file {} ({}) not attached: {error}]",
                        file.path, file.mime_type
                    )));
                    continue;
                }
            };
            let data = base64::engine::general_purpose::STANDARD.encode(bytes);
            content.push(if file.mime_type.starts_with("image/") {
                ContentBlock::image(data, &file.mime_type)
            } else if file.mime_type.starts_with("audio/") {
                ContentBlock::audio(data, &file.mime_type)
            } else {
                ContentBlock::resource(
                    ResourceContents::blob(data, format!("file:{}", file.path))
                        .with_mime_type(&file.mime_type),
                )
            });
        }
        content
    }

    /// Forwards the `prompt.stream` text of `prompt_id` (a prompt, or one tool call) as
    /// progress notifications, when the client gave a progress token; a tool's own count
    /// (an MCP server's progress and total) goes on as it is, other text is counted.
    fn forward_stream(
        &self,
        user: &str,
        prompt_id: &str,
        context: &RequestContext<RoleServer>,
    ) -> Option<Forwarder> {
        let token = context.meta.get_progress_token()?;
        let mut events = self
            .service
            .runtime()
            .services()
            .events
            .subscribe(Some(user));
        let peer = context.peer.clone();
        let prompt_id = prompt_id.to_owned();
        let finished = tokio_util::sync::CancellationToken::new();
        let finishing = finished.clone();
        let task = tokio::spawn(async move {
            let mut count = 0.0;
            loop {
                // Once the call has ended, what it published is all queued: send that, stop.
                let received = tokio::select! {
                    biased;
                    received = events.next() => received,
                    () = finishing.cancelled() => events.try_next(),
                };
                let Some(received) = received else { break };
                let Received::Event(event) = received else {
                    continue;
                };
                if event.payload.prompt_id() != Some(prompt_id.as_str()) {
                    continue;
                }
                if let EventPayload::PromptStream {
                    delta, progress, ..
                } = &event.payload
                {
                    count += 1.0;
                    let mut note = match progress {
                        Some(progress) => {
                            let note =
                                ProgressNotificationParam::new(token.clone(), progress.progress);
                            match progress.total {
                                Some(total) => note.with_total(total),
                                None => note,
                            }
                        }
                        None => ProgressNotificationParam::new(token.clone(), count),
                    };
                    note = note.with_message(delta.clone());
                    if peer.notify_progress(note).await.is_err() {
                        break;
                    }
                }
            }
        });
        Some(Forwarder {
            finished,
            task: AbortOnDropHandle::new(task),
        })
    }

    /// Tools ranked as code mode's `searchTools` ranks them, with their declarations; an
    /// empty query lists the first ones.
    async fn search(&self, user: &str, arguments: &Value) -> Result<CallToolResult, ErrorData> {
        let query = arguments.get("query").and_then(Value::as_str).unwrap_or("");
        let prepared = self.prepared(user).await?;
        let mut found: Vec<(usize, &Arc<dyn agentic_core::Tool>)> = prepared
            .tools
            .iter()
            .filter_map(|tool| {
                let score = search_score(query, tool.id(), tool.description());
                (score > 0 || query.trim().is_empty()).then_some((score, tool))
            })
            .collect();
        found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.id().cmp(b.1.id())));
        // Declared by the names agentic.execute scripts call (`everything.getSum`, not the
        // id `everything.get-sum`), as the code-mode plugin binds them.
        let names = self
            .service
            .runtime()
            .services()
            .extensions
            .get::<agentic_core::ScriptNames>()
            .map(|names| (names.0)(&prepared.tools))
            .unwrap_or_default();
        let tools: Vec<Value> = found
            .into_iter()
            .take(SEARCH_LIMIT)
            .map(|(_, tool)| {
                let call = names.get(tool.id()).map_or(tool.id(), String::as_str);
                json!({
                    "id": tool.id(),
                    "call": call,
                    "description": tool.description(),
                    "declaration": agentic_core::typescript::declaration(
                        call,
                        tool.description(),
                        tool.input_schema(),
                        tool.output_schema(),
                    ),
                })
            })
            .collect();
        Ok(CallToolResult::structured(json!({ "tools": tools })))
    }

    async fn prompt(
        &self,
        user: &str,
        arguments: Value,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let message = arguments
            .get("message")
            .and_then(Value::as_str)
            .filter(|message| !message.trim().is_empty())
            .ok_or_else(|| ErrorData::invalid_params("`message` is required", None))?
            .to_owned();
        let mode = arguments
            .get("mode")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let conversation_id = arguments.get("conversationId").and_then(Value::as_str);
        let mut conversation = match self.service.get_or_create(user, conversation_id).await {
            Ok(conversation) => conversation,
            Err(error) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(
                    error.to_string(),
                )]));
            }
        };
        let request = PromptRequest {
            input: Some(message),
            mode,
            ..PromptRequest::default()
        };
        let started = match conversation.start(request).await {
            Ok(started) => started,
            Err(error) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(
                    error.to_string(),
                )]));
            }
        };
        let prompt_id = started.prompt_id().to_owned();
        let conversation_id = started.conversation_id().to_owned();
        // Streamed text becomes progress notifications, when the client asked for them.
        let progress = self.forward_stream(user, &prompt_id, &context);
        // The prompt runs on by itself, as the API runs its prompts: dropped halfway, it would
        // keep its conversation taken until the next start.
        let run = tokio::spawn(started.run());
        let finished = tokio::select! {
            finished = run => finished,
            () = context.ct.cancelled() => {
                // The client gave up: stop the prompt too, keeping what it produced.
                let ended = match self.service.cancel(user, &prompt_id).await {
                    Ok(_) => "was cancelled; what it produced is kept".to_owned(),
                    Err(error) => format!("could not be cancelled: {error}"),
                };
                return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "the client cancelled the call; prompt {prompt_id} of conversation \
                     {conversation_id} {ended}"
                ))]));
            }
        };
        if let Some(progress) = progress {
            progress.finish().await;
        }
        let prompt = match finished
            .map_err(|error| error.to_string())
            .and_then(|run| run.map_err(|error| error.to_string()))
        {
            Ok(prompt) => prompt,
            Err(error) => return Ok(CallToolResult::error(vec![ContentBlock::text(error)])),
        };
        let mut value = json!({
            "answer": prompt.text(),
            "promptId": prompt_id,
            "conversationId": conversation_id,
            "state": prompt.state.as_str(),
        });
        if let Some(error) = &prompt.error {
            value["error"] = json!(error);
        }
        Ok(match prompt.state {
            PromptState::Failed | PromptState::Interrupted | PromptState::Cancelled => {
                CallToolResult::structured_error(value)
            }
            _ => CallToolResult::structured(value),
        })
    }
}

/// Characters of structured content that are repeated as text at most. Past them the text
/// only points at the structured content: sent twice, a result of half a MiB already filled
/// the 1 MiB event that clients such as the Python SDK accept over HTTP.
const MAX_TEXT_COPY: usize = 64 * 1024;

/// A tool's value as an MCP result: objects as structured content (with the JSON as text for
/// clients that read only text, when it is short), strings as text, other values as JSON
/// text.
fn result_of(value: Value) -> CallToolResult {
    match value {
        Value::Object(_) => {
            let json = value.to_string();
            if json.len() <= MAX_TEXT_COPY {
                return CallToolResult::structured(value);
            }
            let mut result = CallToolResult::structured(value);
            result.content = vec![ContentBlock::text(format!(
                "The result is {} characters of JSON, sent once, as structuredContent.",
                json.len()
            ))];
            result
        }
        Value::String(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
        other => CallToolResult::success(vec![ContentBlock::text(other.to_string())]),
    }
}

impl ServerHandler for AgenticServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("agentic", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "agentic's tools, its agent (agentic.prompt) and its JavaScript sandbox \
                 (agentic.execute, with every tool as a function; agentic.search_tools finds \
                 their declarations).",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let prepared = self.prepared(&self.user(&context)).await?;
        let mut tools = Self::own_tools();
        tools.extend(prepared.tools.iter().map(|tool| {
            let asks = matches!(
                prepared.tools.approval(tool.id(), &Value::Null),
                Approval::Required { .. }
            );
            Self::mcp_tool(tool.as_ref(), asks)
        }));
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call(request, context).await
    }
}

//! agentic as an MCP server: every tool of every plugin (MCP-client tools included), plus
//! `agentic.prompt`, `agentic.execute` and `agentic.search_tools`. `agentic mcp serve` runs
//! it on stdio; `serve_handler` gives the handler for other transports.

use std::sync::Arc;

use agentic_conversation::{ConversationService, PromptRequest};
use agentic_core::tool::search_score;
use agentic_core::{Approval, FileOutput, PromptState, State, ToolContext, ToolError};
use agentic_core::{EventPayload, Received};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams,
    ElicitationAction, Implementation, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ResourceContents, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Map, Value, json};
use tokio_util::task::AbortOnDropHandle;

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

/// The MCP server side: one per connection (cheap: the services are shared).
#[derive(Clone)]
pub struct AgenticServer {
    service: ConversationService,
    user_id: String,
    /// Behind the API's authentication, `X-User-Id` names the user of each request.
    user_header: bool,
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
        }
    }

    /// A server behind the API's authentication, whose requests run as the user their
    /// `X-User-Id` header names.
    pub fn behind_api(service: ConversationService) -> Self {
        Self {
            service,
            user_id: "-".to_owned(),
            user_header: true,
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
                     gives their declarations). `input` is available as `input`. Returns the \
                     script's last value and its log() lines. Tools that need approval are \
                     refused inside scripts."
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

    /// A plugin tool as an MCP tool; `asks`: whether its calls need approval.
    fn mcp_tool(tool: &dyn agentic_core::Tool, asks: bool) -> Tool {
        let schema = match tool.input_schema() {
            Value::Object(map) => map.clone(),
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
        if let Some(Value::Object(output)) = tool.output_schema()
            && output.get("type").and_then(Value::as_str) == Some("object")
        {
            listed = listed.with_raw_output_schema(Arc::new(output.clone()));
        }
        listed.with_annotations(ToolAnnotations::new().destructive(asks))
    }

    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let user = self.user(&context);
        match request.name.as_ref() {
            PROMPT_TOOL => self.prompt(&user, arguments, context).await,
            SEARCH_TOOL => self.search(&user, &arguments).await,
            EXECUTE_TOOL => self.invoke(&user, RUN_CODE_TOOL, arguments, context).await,
            name => self.invoke(&user, name, arguments, context).await,
        }
    }

    async fn invoke(
        &self,
        user: &str,
        id: &str,
        input: Value,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let prepared = self.prepared(user).await?;
        if prepared.tools.get(id).is_none() {
            return Err(ErrorData::invalid_params(
                format!("unknown tool \"{id}\"; tools/list names the tools"),
                None,
            ));
        }
        if let Approval::Required { reason } = prepared.tools.approval(id, &input)
            && let Err(refusal) = self.ask_approval(id, &reason, &input, &context).await
        {
            return Ok(CallToolResult::error(vec![ContentBlock::text(refusal)]));
        }
        let services = self.service.runtime().services().clone();
        // Its own id, so that the output it streams (a shell command's, say) reaches this
        // client as progress.
        let call_id = format!("mcp-{}", uuid::Uuid::new_v4());
        let tool_context = ToolContext::new(user, &call_id, State::default(), services);
        let _progress = self.forward_stream(user, &call_id, &context);
        let call = prepared.tools.invoke(tool_context.clone(), id, input);
        let result = tokio::select! {
            result = call => result,
            () = context.ct.cancelled() => Err(ToolError::failed("the call was cancelled")),
        };
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
    /// progress notifications, when the client gave a progress token; until dropped.
    fn forward_stream(
        &self,
        user: &str,
        prompt_id: &str,
        context: &RequestContext<RoleServer>,
    ) -> Option<AbortOnDropHandle<()>> {
        let token = context.meta.get_progress_token()?;
        let mut events = self
            .service
            .runtime()
            .services()
            .events
            .subscribe(Some(user));
        let peer = context.peer.clone();
        let prompt_id = prompt_id.to_owned();
        Some(AbortOnDropHandle::new(tokio::spawn(async move {
            let mut count = 0.0;
            while let Some(received) = events.next().await {
                let Received::Event(event) = received else {
                    continue;
                };
                if event.payload.prompt_id() != Some(prompt_id.as_str()) {
                    continue;
                }
                if let EventPayload::PromptStream { delta, .. } = &event.payload {
                    count += 1.0;
                    let note = ProgressNotificationParam::new(token.clone(), count)
                        .with_message(delta.clone());
                    if peer.notify_progress(note).await.is_err() {
                        break;
                    }
                }
            }
        })))
    }

    /// Asks the client's user through elicitation; `Err(why)` when it cannot or they said no.
    async fn ask_approval(
        &self,
        id: &str,
        reason: &str,
        input: &Value,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), String> {
        if context.peer.supported_elicitation_modes().is_empty() {
            return Err(format!(
                "{id} needs a person's approval ({reason}), and this MCP client cannot ask \
                 one (it offers no elicitation). Run it from agentic's CLI or API, or let it \
                 run without approval in agentic's config."
            ));
        }
        let schema = serde_json::from_value(json!({
            "type": "object",
            "properties": {
                "approve": { "type": "boolean", "title": "Run this call?" }
            },
            "required": ["approve"]
        }))
        .map_err(|error| format!("building the approval form failed: {error}"))?;
        let message = format!("agentic wants to run {id} ({reason}) with input {input}");
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        };
        match context.peer.create_elicitation(params).await {
            Ok(answer)
                if answer.action == ElicitationAction::Accept
                    && answer
                        .content
                        .as_ref()
                        .and_then(|content| content.get("approve"))
                        .and_then(Value::as_bool)
                        == Some(true) =>
            {
                Ok(())
            }
            Ok(_) => Err(format!("{id} was not approved, so it did not run")),
            Err(error) => Err(format!(
                "{id} needs approval and asking for it failed: {error}"
            )),
        }
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
        let tools: Vec<Value> = found
            .into_iter()
            .take(SEARCH_LIMIT)
            .map(|(_, tool)| {
                json!({
                    "id": tool.id(),
                    "description": tool.description(),
                    "declaration": agentic_core::typescript::declaration(
                        tool.id(),
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
        drop(progress);
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

/// A tool's value as an MCP result: objects as structured content (with the JSON as text for
/// clients that read only text), strings as text, other values as JSON text.
fn result_of(value: Value) -> CallToolResult {
    match value {
        Value::Object(_) => CallToolResult::structured(value),
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
        self.call(request, context).await.map(Into::into)
    }
}

/// Serves MCP on this process's stdin and stdout until the client closes them.
pub async fn serve_stdio(service: ConversationService, user_id: &str) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let running = AgenticServer::new(service, user_id)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|error| anyhow::anyhow!("the MCP client did not start a session: {error}"))?;
    running.waiting().await?;
    Ok(())
}

/// `/mcp` as a streamable HTTP endpoint serving `server`. `loopback_only` keeps rmcp's check
/// that the `Host` header names this machine (against DNS rebinding), for a server that
/// listens on loopback. Open streams end when `stopping` is cancelled.
pub fn http_router<S: Clone + Send + Sync + 'static>(
    server: AgenticServer,
    loopback_only: bool,
    stopping: tokio_util::sync::CancellationToken,
) -> axum::Router<S> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let mut config = StreamableHttpServerConfig::default().with_cancellation_token(stopping);
    if !loopback_only {
        config = config.disable_allowed_hosts();
    }
    let endpoint = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    axum::Router::new().nest_service("/mcp", endpoint)
}

/// `agentic mcp serve --http`: MCP over streamable HTTP at `/mcp` on a loopback address, for
/// one user, without the API (like stdio, anyone who can reach the port acts as that user;
/// `agentic serve` puts `/mcp` behind the API's authentication). Runs until `stopping`.
pub async fn serve_http(
    service: ConversationService,
    user_id: &str,
    listener: tokio::net::TcpListener,
    stopping: tokio_util::sync::CancellationToken,
) -> anyhow::Result<()> {
    let address = listener.local_addr()?;
    anyhow::ensure!(
        address.ip().is_loopback(),
        "agentic mcp serve --http listens on loopback only ({address} is not); `agentic serve` \
         serves /mcp behind the API's authentication on any address"
    );
    let router: axum::Router =
        http_router(AgenticServer::new(service, user_id), true, stopping.clone());
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { stopping.cancelled().await })
        .await?;
    Ok(())
}

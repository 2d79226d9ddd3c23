//! One configured MCP server: started once per process, watched, restarted with backoff after
//! it exits, and asked again for its tools when it says they changed.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use std::path::Path;

use agentic_core::ToolContext;
use rmcp::ClientHandler;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientCapabilities, ClientConfig, ClientRequest, Implementation, InputRequest, InputResponses,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, RequestId, ServerResult,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::service::{NotificationContext, Peer, PeerRequestOptions, RoleClient, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde::Serialize;
use tokio::io::AsyncBufReadExt;
use tokio::sync::{Notify, watch};

use crate::config::{ServerConfig, Transport};

mod http_session;
mod stdio;

/// Lines of a server's stderr kept to explain why it stopped.
const STDERR_LINES: usize = 20;
/// The first restart waits this long; each failure in a row doubles it, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A server that stayed up this long starts its backoff again from the beginning.
const HEALTHY_AFTER: Duration = Duration::from_secs(60);

/// Where a server stands, as `agentic mcp list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum Status {
    /// Not started yet, or starting.
    Starting,
    /// Connected; its tools are listed.
    Ready,
    /// It failed or exited; it is started again at `retryInMs`.
    Restarting { error: String, retry_in_ms: u64 },
    /// `enabled = false`, or its config is broken.
    Disabled { reason: String },
}

#[derive(Clone, Default)]
struct Live {
    peer: Option<Peer<RoleClient>>,
    tools: Vec<rmcp::model::Tool>,
    /// True once the first start has succeeded or failed: prompts wait for that, no longer.
    settled: bool,
    error: Option<String>,
    retry_at: Option<Instant>,
    disabled: Option<String>,
    protocol: Option<String>,
    server_info: Option<String>,
    /// The process id of a command server (the leader of its process group).
    pid: Option<u32>,
}

/// A configured server and its connection.
pub struct Server {
    pub name: String,
    pub config: ServerConfig,
    /// The file `agentic mcp login` keeps this server's OAuth tokens in.
    pub credentials: Option<std::path::PathBuf>,
    live: watch::Sender<Live>,
    /// Progress tokens of calls in flight → the call's context, for `prompt.stream` events.
    progress: Mutex<HashMap<ProgressToken, ToolContext>>,
    stderr: Mutex<VecDeque<String>>,
    tools_changed: Notify,
    /// How many times its tools were listed (once per start, once per change notice).
    tool_lists: AtomicUsize,
    /// Set when its connection ended on a message over `maxMessageBytes`.
    oversized: stdio::Oversized,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.name)
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

impl Server {
    pub fn new(
        name: String,
        config: ServerConfig,
        credentials: Option<std::path::PathBuf>,
    ) -> Arc<Self> {
        let disabled = if config.enabled {
            config
                .transport(&name)
                .err()
                .map(|error| format!("{error:#}"))
        } else {
            Some("enabled = false in its config".to_owned())
        };
        let live = Live {
            settled: disabled.is_some(),
            disabled,
            ..Live::default()
        };
        Arc::new(Self {
            name,
            config,
            credentials,
            live: watch::Sender::new(live),
            progress: Mutex::default(),
            stderr: Mutex::default(),
            tools_changed: Notify::new(),
            tool_lists: AtomicUsize::new(0),
            oversized: stdio::Oversized::default(),
        })
    }

    pub fn status(&self) -> Status {
        let live = self.live.borrow();
        if let Some(reason) = &live.disabled {
            return Status::Disabled {
                reason: reason.clone(),
            };
        }
        if live.peer.is_some() {
            return Status::Ready;
        }
        match (&live.error, live.retry_at) {
            (Some(error), retry_at) => Status::Restarting {
                error: error.clone(),
                retry_in_ms: retry_at
                    .map(|at| at.saturating_duration_since(Instant::now()).as_millis() as u64)
                    .unwrap_or(0),
            },
            (None, _) => Status::Starting,
        }
    }

    /// The protocol version and server name it reported, once connected.
    pub fn identity(&self) -> (Option<String>, Option<String>) {
        let live = self.live.borrow();
        (live.protocol.clone(), live.server_info.clone())
    }

    /// Its tools as last listed (kept while it restarts, so calls fail with a clear error
    /// instead of the tools vanishing).
    pub fn tools(&self) -> Vec<rmcp::model::Tool> {
        self.live.borrow().tools.clone()
    }

    /// The agentic id of its tool `name`: `<server>.<name>`.
    pub fn tool_id(&self, name: &str) -> String {
        format!("{}.{name}", self.name)
    }

    /// The process id of a running command server.
    pub fn pid(&self) -> Option<u32> {
        let live = self.live.borrow();
        live.peer.as_ref().and(live.pid)
    }

    /// How many times its tools were listed: once per start and once per change notice.
    pub fn tool_lists(&self) -> usize {
        self.tool_lists.load(Ordering::Relaxed)
    }

    /// Waits until the first start has succeeded or failed, at most `limit`.
    pub async fn settled(&self, limit: Duration) {
        let mut receiver = self.live.subscribe();
        let _ = tokio::time::timeout(limit, receiver.wait_for(|live| live.settled)).await;
    }

    /// Starts the supervising task (once per process).
    pub fn start(self: &Arc<Self>) {
        if self.live.borrow().disabled.is_some() {
            return;
        }
        let server = self.clone();
        tokio::spawn(async move { server.supervise().await });
    }

    async fn supervise(self: Arc<Self>) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            let started = Instant::now();
            let error = match self.run_once().await {
                Ok(()) => "the server exited".to_owned(),
                Err(error) => format!("{error:#}"),
            };
            let error = match self.last_stderr() {
                Some(line) => format!("{error} (its last stderr line: {line})"),
                None => error,
            };
            if started.elapsed() >= HEALTHY_AFTER {
                backoff = FIRST_BACKOFF;
            }
            tracing::warn!(
                target: "agentic::mcp",
                server = %self.name,
                retry_in_ms = backoff.as_millis() as u64,
                "MCP server stopped: {error}"
            );
            self.live.send_modify(|live| {
                live.peer = None;
                live.settled = true;
                live.error = Some(error);
                live.retry_at = Some(Instant::now() + backoff);
            });
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// One connection: start, list the tools, serve until the server goes away.
    async fn run_once(self: &Arc<Self>) -> anyhow::Result<()> {
        let handler = Handler {
            server: Arc::downgrade(self),
        };
        let startup = Duration::from_millis(self.config.startup_timeout_ms);
        let transport = self.config.transport(&self.name)?;
        let mut pid = None;
        let running = match transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut command_line = tokio::process::Command::new(&command);
                command_line.args(&args).envs(&env).kill_on_drop(true);
                if let Some(cwd) = cwd {
                    command_line.current_dir(cwd);
                }
                command_line
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped());
                let mut wrapped = process_wrap::tokio::CommandWrap::from(command_line);
                // Its own process group, so a launcher's children (npx → node) stop with it.
                wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
                let mut child = wrapped
                    .spawn()
                    .map_err(|error| anyhow::anyhow!("could not start `{command}`: {error}"))?;
                pid = child.id();
                let stderr = child.inner_mut().stderr().take();
                *self
                    .oversized
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = None;
                let server = Arc::downgrade(self);
                let process = stdio::ChildTransport::new(
                    child,
                    self.config.max_message_bytes,
                    self.oversized.clone(),
                    Box::new(move |params| {
                        if let Some(server) = server.upgrade() {
                            server.on_progress(params);
                        }
                    }),
                )
                .map_err(|error| anyhow::anyhow!("could not talk to `{command}`: {error}"))?;
                if let Some(stderr) = stderr {
                    let server = Arc::downgrade(self);
                    tokio::spawn(async move {
                        let mut lines = tokio::io::BufReader::new(stderr).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            let Some(server) = server.upgrade() else {
                                break;
                            };
                            server.stderr_line(line);
                        }
                    });
                }
                tokio::time::timeout(startup, handler.serve_with_lifecycle(process, lifecycle()))
                    .await
                    .map_err(|_| anyhow::anyhow!("it did not finish starting within {startup:?}"))?
                    .map_err(|error| anyhow::anyhow!("starting it failed: {error}"))?
            }
            Transport::Http { url, headers } => {
                let custom = http_headers(headers)?;
                let config = StreamableHttpClientTransportConfig::with_uri(url.clone())
                    .custom_headers(custom);
                let authorized = match &self.credentials {
                    Some(file) => {
                        crate::oauth::authorized_client(&url, file, self.config.oauth.as_ref())
                            .await?
                    }
                    None => None,
                };
                let connected = match authorized {
                    Some(client) => {
                        let keeps = self.credentials.as_deref().unwrap_or(Path::new("."));
                        let client =
                            http_session::SessionRecovery(crate::oauth::StepUp::new(client, keeps));
                        let transport = StreamableHttpClientTransport::with_client(client, config);
                        tokio::time::timeout(
                            startup,
                            handler.serve_with_lifecycle(transport, lifecycle()),
                        )
                        .await
                    }
                    None => {
                        let client = http_session::SessionRecovery(rmcp_reqwest::Client::new());
                        let transport = StreamableHttpClientTransport::with_client(client, config);
                        tokio::time::timeout(
                            startup,
                            handler.serve_with_lifecycle(transport, lifecycle()),
                        )
                        .await
                    }
                };
                match connected {
                    Err(_) => anyhow::bail!("it did not answer within {startup:?}"),
                    Ok(Err(error)) if error.is_authorization_required() => anyhow::bail!(
                        "it needs authorization: run `agentic mcp login {}`",
                        self.name
                    ),
                    Ok(Err(error)) => anyhow::bail!("connecting failed: {error}"),
                    Ok(Ok(running)) => running,
                }
            }
        };
        let peer = running.peer().clone();
        let (protocol, server_info) = match running.peer_info() {
            Some(info) => (
                Some(info.protocol_version.to_string()),
                info.server_info.as_ref().map(|implementation| {
                    format!("{} {}", implementation.name, implementation.version)
                }),
            ),
            None => (None, None),
        };
        let tools = tokio::time::timeout(startup, peer.list_all_tools())
            .await
            .map_err(|_| anyhow::anyhow!("tools/list did not answer within {startup:?}"))?
            .map_err(|error| {
                if error.is_authorization_required() {
                    anyhow::anyhow!(
                        "it needs authorization again: run `agentic mcp login {}`",
                        self.name
                    )
                } else {
                    anyhow::anyhow!("tools/list failed: {error}")
                }
            })?;
        self.tool_lists.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            target: "agentic::mcp",
            server = %self.name,
            tools = tools.len(),
            protocol = protocol.as_deref().unwrap_or("?"),
            "MCP server ready"
        );
        self.live.send_modify(|live| {
            live.peer = Some(peer.clone());
            live.tools = tools;
            live.settled = true;
            live.error = None;
            live.retry_at = None;
            live.protocol = protocol;
            live.server_info = server_info;
            live.pid = pid;
        });
        let quit = running.waiting();
        tokio::pin!(quit);
        loop {
            tokio::select! {
                _ = &mut quit => return Ok(()),
                () = self.tools_changed.notified() => {
                    match peer.list_all_tools().await {
                        Ok(tools) => {
                            self.tool_lists.fetch_add(1, Ordering::Relaxed);
                            tracing::info!(target: "agentic::mcp", server = %self.name, tools = tools.len(), "MCP tools changed");
                            self.live.send_modify(|live| live.tools = tools);
                        }
                        Err(error) => tracing::warn!(target: "agentic::mcp", server = %self.name, "listing changed tools failed: {error}"),
                    }
                }
            }
        }
    }

    fn stderr_line(&self, line: String) {
        tracing::info!(target: "agentic::mcp", server = %self.name, "{line}");
        let mut lines = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.len() == STDERR_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    fn last_stderr(&self) -> Option<String> {
        let lines = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        lines
            .iter()
            .rev()
            .find(|line| !line.trim().is_empty())
            .cloned()
    }

    /// Why calls cannot reach the server now.
    fn unavailable(&self) -> String {
        match self.status() {
            Status::Starting => format!("the MCP server \"{}\" is still starting", self.name),
            Status::Restarting { error, retry_in_ms } => format!(
                "the MCP server \"{}\" is not running ({error}); it is restarted in {:.1} s",
                self.name,
                retry_in_ms as f64 / 1000.0
            ),
            Status::Disabled { reason } => {
                format!("the MCP server \"{}\" is disabled: {reason}", self.name)
            }
            Status::Ready => format!("the MCP server \"{}\" is not connected", self.name),
        }
    }

    /// `agentic mcp login`: the OAuth authorization-code flow for this `url` server; `show`
    /// gets the URL a person opens. Answers with the file the tokens are kept in.
    pub async fn login(&self, show: impl FnOnce(&str)) -> anyhow::Result<std::path::PathBuf> {
        let Transport::Http { url, headers } = self.config.transport(&self.name)? else {
            anyhow::bail!(
                "MCP server \"{}\" is a command; OAuth is for `url` servers",
                self.name
            );
        };
        let Some(credentials) = self.credentials.clone() else {
            anyhow::bail!("there is no place to keep OAuth tokens: set `[mcp] credentialsDir`");
        };
        // The server's 401 names its authorization server (and the scopes it wants).
        let custom = http_headers(headers)?;
        let config =
            StreamableHttpClientTransportConfig::with_uri(url.clone()).custom_headers(custom);
        let transport = StreamableHttpClientTransport::from_config(config);
        let handler = Handler {
            server: std::sync::Weak::new(),
        };
        let startup = Duration::from_millis(self.config.startup_timeout_ms);
        let challenge = match tokio::time::timeout(
            startup,
            handler.serve_with_lifecycle(transport, lifecycle()),
        )
        .await
        {
            Ok(Ok(running)) => {
                let _ = running.cancel().await;
                None
            }
            Ok(Err(error)) => error.auth_challenge().map(str::to_owned),
            Err(_) => None,
        };
        crate::oauth::login(
            crate::oauth::Login {
                url: &url,
                oauth: self.config.oauth.as_ref(),
                challenge,
                credentials,
            },
            show,
        )
        .await
    }

    /// Calls `tool` with `arguments`. Progress becomes `prompt.stream` events of the call; a
    /// call dropped before its answer (a cancelled prompt) is cancelled on the server.
    pub async fn call(
        &self,
        context: &ToolContext,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<CallToolResult, String> {
        let peer = self.live.borrow().peer.clone();
        let Some(peer) = peer else {
            return Err(self.unavailable());
        };
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        // A server of 2026-07-28 may answer "input required" (SEP-2322): the call is sent
        // again with the answers and the server's state, a new request each round.
        for _round in 0..MAX_INPUT_ROUNDS {
            match self.call_once(context, &peer, tool, params.clone()).await? {
                ServerResult::CallToolResult(result) => return Ok(result),
                ServerResult::InputRequiredResult(asked) => {
                    let requests = asked.input_requests.unwrap_or_default();
                    if requests.is_empty() && asked.request_state.is_none() {
                        return Err(format!(
                            "the MCP server \"{}\" asked for input for {tool} without saying what",
                            self.name
                        ));
                    }
                    let answers = requests
                        .into_iter()
                        .map(|(key, request)| {
                            input_answer(&request)
                                .map(|answer| (key, answer))
                                .ok_or_else(|| format!(
                                    "the MCP server \"{}\" asked during {tool} for sampling, which agentic does not offer to servers",
                                    self.name
                                ))
                        })
                        .collect::<Result<InputResponses, String>>()?;
                    params.input_responses = (!answers.is_empty()).then_some(answers);
                    params.request_state = asked.request_state;
                }
                other => {
                    return Err(format!(
                        "the MCP server \"{}\" answered tools/call \"{tool}\" with something else than a tool result: {}",
                        self.name,
                        serde_json::to_string(&other)
                            .unwrap_or_default()
                            .chars()
                            .take(300)
                            .collect::<String>()
                    ));
                }
            }
        }
        Err(format!(
            "the MCP server \"{}\" still asked for input after {MAX_INPUT_ROUNDS} rounds of {tool}",
            self.name
        ))
    }

    /// One `tools/call` request, with its progress and its cancellation.
    async fn call_once(
        &self,
        context: &ToolContext,
        peer: &Peer<RoleClient>,
        tool: &str,
        params: CallToolRequestParams,
    ) -> Result<ServerResult, String> {
        let timeout = Duration::from_millis(self.config.timeout_ms);
        // A hard bound: progress does not extend it, or a server reporting progress forever
        // would hold the call forever.
        let options = PeerRequestOptions::with_timeout(timeout);
        let handle = peer
            .send_cancellable_request(
                ClientRequest::CallToolRequest(CallToolRequest::new(params)),
                options,
            )
            .await
            .map_err(|error| self.failure(tool, &error))?;
        let token = handle.progress_token.clone();
        self.progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(token.clone(), context.clone());
        let mut guard = InFlight {
            server: self,
            peer: peer.clone(),
            id: Some(handle.id.clone()),
            token,
        };
        let response = handle.await_response().await;
        guard.id = None;
        response.map_err(|error| self.failure(tool, &error))
    }

    fn failure(&self, tool: &str, error: &ServiceError) -> String {
        if error.is_authorization_required() {
            return format!(
                "the MCP server \"{}\" needs authorization for {tool}: run `agentic mcp login {}`",
                self.name, self.name
            );
        }
        match error {
            ServiceError::Timeout { timeout } => format!(
                "the MCP server \"{}\" did not finish {tool} within {:.0} s; the call was cancelled",
                self.name,
                timeout.as_secs_f64()
            ),
            ServiceError::TransportClosed | ServiceError::TransportSend(_)
                if self
                    .credentials
                    .as_deref()
                    .is_some_and(|file| crate::oauth::challenge_file(file).exists()) =>
            {
                format!(
                    "the MCP server \"{}\" needs more access for {tool} than agentic was given \
                     (insufficient scope): run `agentic mcp login {}` to grant it",
                    self.name, self.name
                )
            }
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                let oversized = self
                    .oversized
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                match oversized {
                    Some(why) => format!(
                        "the MCP server \"{}\" could not answer {tool}: {why}; it is being \
                         restarted",
                        self.name
                    ),
                    None => format!(
                        "the MCP server \"{}\" stopped during the call to {tool}; it is being \
                         restarted",
                        self.name
                    ),
                }
            }
            ServiceError::McpError(data) => format!(
                "the MCP server \"{}\" refused {tool}: {} (code {})",
                self.name, data.message, data.code.0
            ),
            other => format!(
                "calling {tool} on the MCP server \"{}\" failed: {other}",
                self.name
            ),
        }
    }

    fn on_progress(&self, params: ProgressNotificationParam) {
        let context = self
            .progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&params.progress_token)
            .cloned();
        let Some(context) = context else { return };
        let amount = match params.total {
            Some(total) => format!("{}/{}", params.progress, total),
            None => format!("{}", params.progress),
        };
        let line = match params.message {
            Some(message) if !message.is_empty() => format!("{message} ({amount})\n"),
            _ => format!("progress {amount}\n"),
        };
        context.progress(
            &line,
            agentic_core::StreamProgress {
                progress: params.progress,
                total: params.total,
            },
        );
    }
}

/// A call in flight: forgets its progress token when it ends, and tells the server the call
/// is cancelled when it is dropped before the answer came.
struct InFlight<'a> {
    server: &'a Server,
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
    token: ProgressToken,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.server
            .progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.token);
        if let Some(id) = self.id.take() {
            let peer = self.peer.clone();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let _ = peer
                        .notify_cancelled(CancelledNotificationParam::new(
                            Some(id),
                            Some("the prompt was cancelled".to_owned()),
                        ))
                        .await;
                });
            }
        }
    }
}

/// Rounds of "input required" one call may take.
const MAX_INPUT_ROUNDS: usize = 8;

/// What agentic answers a server's request for input in the middle of a call. It declares
/// neither elicitation nor sampling, and offers no roots: a question is declined (the tool
/// goes on without, or fails saying why), roots are none, and sampling or any other request
/// (`None`) fails the call.
fn input_answer(request: &InputRequest) -> Option<serde_json::Value> {
    match request {
        InputRequest::Elicitation(_) => Some(serde_json::json!({ "action": "decline" })),
        InputRequest::ListRoots(_) => Some(serde_json::json!({ "roots": [] })),
        _ => None,
    }
}

/// The configured headers as HTTP headers, or which one is not valid.
fn http_headers(
    headers: std::collections::BTreeMap<String, String>,
) -> anyhow::Result<HashMap<http::HeaderName, http::HeaderValue>> {
    let mut custom = HashMap::new();
    for (key, value) in headers {
        let name = http_header_name(&key)?;
        let value = http::HeaderValue::from_str(&value)
            .map_err(|_| anyhow::anyhow!("the value of header {key} is not valid"))?;
        custom.insert(name, value);
    }
    Ok(custom)
}

fn http_header_name(key: &str) -> anyhow::Result<http::HeaderName> {
    http::HeaderName::from_bytes(key.as_bytes())
        .map_err(|_| anyhow::anyhow!("\"{key}\" is not a valid HTTP header name"))
}

/// What the server can send us: progress and changed tool lists.
#[derive(Clone)]
struct Handler {
    server: std::sync::Weak<Server>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("agentic", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        // A command server's progress was taken in order as it arrived (see `stdio`).
        if let Some(server) = self.server.upgrade()
            && server.config.command.is_none()
        {
            server.on_progress(params);
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(server) = self.server.upgrade() {
            server.tools_changed.notify_one();
        }
    }
}

/// How a connection starts: `server/discover` for servers of 2026-07-28 and later (stateless,
/// each request carrying its own version and capabilities), and the `initialize` handshake at
/// 2025-11-25 (which older servers negotiate down) for a server that answers discover with an
/// error, or not at all within the SDK's 10 s.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

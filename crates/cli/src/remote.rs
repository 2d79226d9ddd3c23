//! `--server URL`: the CLI as a client of `agentic serve`, over the same HTTP API anyone uses.

use std::pin::Pin;

use agentic_api::types::{
    ApproveBody, DecisionAccepted, InvokeResult, PromptAccepted, PromptBody, RejectBody,
    ToolDetail, ToolSummary,
};
use agentic_conversation::Conversation;
use agentic_core::{Capabilities, Event, Prompt, Verdict};
use anyhow::{Context as _, bail};
use async_trait::async_trait;
use futures::{Stream, StreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::backend::{Backend, StartError};
use crate::ui::{PromptDriver, PromptSettings};

/// A client of one server, as one user.
#[derive(Clone)]
pub(crate) struct Remote {
    base: String,
    user: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl Remote {
    /// The user is `AGENTIC_USER_ID` (default `cli`); `AGENTIC_API_TOKEN` is sent as a bearer
    /// token when set.
    pub(crate) fn new(base: &str) -> anyhow::Result<Self> {
        let base = base.trim_end_matches('/').to_owned();
        anyhow::ensure!(
            base.starts_with("http://") || base.starts_with("https://"),
            "--server must be an http:// or https:// URL, got \"{base}\""
        );
        Ok(Self {
            base,
            user: std::env::var("AGENTIC_USER_ID")
                .ok()
                .filter(|user| !user.is_empty())
                .unwrap_or_else(|| crate::local::USER.to_owned()),
            token: std::env::var("AGENTIC_API_TOKEN")
                .ok()
                .filter(|token| !token.is_empty()),
            http: reqwest::Client::new(),
        })
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("x-user-id", &self.user);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        request
    }

    /// Sends a request and returns its JSON body, or the server's error as an error.
    pub(crate) async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        let mut request = self.request(method, path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("could not reach the server at {}", self.base))?;
        let status = response.status();
        let body: Value = if status == reqwest::StatusCode::NO_CONTENT {
            Value::Null
        } else {
            response
                .json()
                .await
                .with_context(|| format!("the server answered {status} with no JSON"))?
        };
        if !status.is_success() {
            let message = body["error"]["message"]
                .as_str()
                .map_or_else(|| body.to_string(), str::to_owned);
            bail!(RemoteError {
                status: status.as_u16(),
                code: body["error"]["code"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                message,
            });
        }
        Ok(body)
    }

    pub(crate) async fn get<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        let body = self.call(reqwest::Method::GET, path, None).await?;
        serde_json::from_value(body).with_context(|| format!("unreadable answer to GET {path}"))
    }

    pub(crate) async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: impl Serialize,
    ) -> anyhow::Result<T> {
        let body = serde_json::to_value(body)?;
        let answer = self.call(reqwest::Method::POST, path, Some(body)).await?;
        serde_json::from_value(answer).with_context(|| format!("unreadable answer to POST {path}"))
    }

    /// Starts a prompt and follows its events.
    async fn start_prompt(
        &self,
        conversation: Option<&str>,
        message: String,
        settings: &PromptSettings,
    ) -> anyhow::Result<RemotePrompt> {
        let body = PromptBody {
            input: message,
            model: settings.model,
            mode: Some(settings.mode.clone()),
            conversation_id: conversation.map(str::to_owned),
            leave_out: settings.leave_out.clone(),
        };
        let PromptAccepted {
            prompt_id,
            conversation_id,
        } = self.post("/api/prompt", body).await?;
        let mut prompt = RemotePrompt {
            remote: self.clone(),
            prompt_id,
            conversation_id,
            events: futures::stream::empty().boxed(),
            last_seq: 0,
            complete: settings.json,
            reconnects: 0,
        };
        // From the start of the replay window, so the events published before this request
        // connected (the prompt may already be running) come too.
        prompt.connect().await?;
        Ok(prompt)
    }
}

/// An error answer from the server.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct RemoteError {
    pub status: u16,
    pub code: String,
    pub message: String,
}

type EventStream =
    Pin<Box<dyn Stream<Item = Result<agentic_wire::SseEvent, reqwest::Error>> + Send>>;

pub(crate) struct RemotePrompt {
    remote: Remote,
    prompt_id: String,
    conversation_id: String,
    events: EventStream,
    /// The `seq` of the last event received: where a reconnection resumes.
    last_seq: u64,
    /// Whether every event must arrive (`--json`), or the prompt read at the end is enough.
    complete: bool,
    /// Reconnections in a row that brought no event.
    reconnects: u32,
}

/// Reconnections in a row, without an event between them, before the CLI gives up.
const MAX_RECONNECTS: u32 = 5;

impl RemotePrompt {
    /// Opens the prompt's event stream after `last_seq`, as `Last-Event-ID`.
    async fn connect(&mut self) -> anyhow::Result<()> {
        let response = self
            .remote
            .request(
                reqwest::Method::GET,
                &format!("/api/events/stream?promptId={}", self.prompt_id),
            )
            .header("last-event-id", self.last_seq.to_string())
            .send()
            .await
            .context("could not open the event stream")?;
        if !response.status().is_success() {
            bail!("the event stream answered {}", response.status());
        }
        // One pass over each read: a reconnection replays many events at once.
        self.events = agentic_wire::sse_events(response.bytes_stream());
        Ok(())
    }

    /// Resumes after the last event received, once a lag or a broken connection cut the
    /// stream; the server replays what was missed.
    async fn reconnect(&mut self, why: &str) -> anyhow::Result<()> {
        self.reconnects += 1;
        if self.reconnects > MAX_RECONNECTS {
            bail!("the event stream {why}, {MAX_RECONNECTS} times in a row");
        }
        if self.reconnects > 1 {
            tokio::time::sleep(std::time::Duration::from_millis(200 << self.reconnects)).await;
        }
        self.connect().await
    }
}

#[async_trait]
impl PromptDriver for RemotePrompt {
    fn conversation_id(&self) -> &str {
        &self.conversation_id
    }

    fn prompt_id(&self) -> &str {
        &self.prompt_id
    }

    async fn next_event(&mut self) -> anyhow::Result<Option<Event>> {
        loop {
            let item = match self.events.next().await {
                None => return Ok(None),
                Some(Err(error)) => {
                    self.reconnect(&format!("broke ({error})")).await?;
                    continue;
                }
                Some(Ok(item)) => item,
            };
            match item.event.as_str() {
                // This client fell behind and the server skipped events: catch up from the
                // replay window.
                "stream.lagged" => self.reconnect("fell behind").await?,
                "stream.gap" if self.complete => bail!(
                    "the server no longer holds some events of prompt {} (they left its replay \
                     window), so this output is incomplete; GET /api/prompts/{} has the whole \
                     prompt",
                    self.prompt_id,
                    self.prompt_id
                ),
                "stream.gap" => {
                    eprintln!("agentic: some of the prompt's live events were missed");
                }
                _ => {
                    let event: Event = serde_json::from_str(&item.data).with_context(|| {
                        format!("unreadable event from the server: {}", item.data)
                    })?;
                    // Replayed after a reconnection and already printed: skipped.
                    if event.seq <= self.last_seq {
                        continue;
                    }
                    self.last_seq = event.seq;
                    self.reconnects = 0;
                    return Ok(Some(event));
                }
            }
        }
    }

    async fn decide(
        &mut self,
        tool_call_id: &str,
        verdict: Verdict,
        scope: Option<agentic_core::scope::Scope>,
    ) -> anyhow::Result<()> {
        let tool_call_id = tool_call_id.to_owned();
        let prompt = &self.prompt_id;
        let _: DecisionAccepted = match verdict {
            Verdict::Approve => {
                let path = format!("/api/prompts/{prompt}/approve");
                let body = ApproveBody {
                    tool_call_id,
                    calls: None,
                    reason: None,
                    scope,
                };
                self.remote.post(&path, body).await?
            }
            Verdict::ApproveOnly { calls, reason } => {
                let path = format!("/api/prompts/{prompt}/approve");
                let body = ApproveBody {
                    tool_call_id,
                    calls: Some(calls),
                    reason,
                    scope,
                };
                self.remote.post(&path, body).await?
            }
            Verdict::Reject { reason } => {
                let path = format!("/api/prompts/{prompt}/reject");
                let body = RejectBody {
                    tool_call_id,
                    reason,
                };
                self.remote.post(&path, body).await?
            }
        };
        Ok(())
    }

    async fn finish(&mut self) -> anyhow::Result<Prompt> {
        self.remote
            .get(&format!("/api/prompts/{}", self.prompt_id))
            .await
    }
}

#[async_trait]
impl Backend for Remote {
    async fn conversations(&self) -> anyhow::Result<Vec<Conversation>> {
        self.get("/api/conversations").await
    }

    async fn scopes(
        &self,
        conversation: Option<&str>,
    ) -> anyhow::Result<Vec<agentic_core::scope::ScopeGrant>> {
        match conversation {
            Some(id) => self.get(&format!("/api/scopes?conversation={id}")).await,
            None => self.get("/api/scopes").await,
        }
    }

    async fn revoke_scope(&self, id: &str) -> anyhow::Result<agentic_core::scope::ScopeGrant> {
        let body = self
            .call(reqwest::Method::DELETE, &format!("/api/scopes/{id}"), None)
            .await?;
        serde_json::from_value(body).context("unreadable answer to DELETE /api/scopes")
    }

    async fn export(&self, prompt_id: &str) -> anyhow::Result<String> {
        let path = format!("/api/prompts/{prompt_id}/export?as=test");
        let response = self
            .request(reqwest::Method::GET, &path)
            .send()
            .await
            .with_context(|| format!("could not reach the server at {}", self.base))?;
        let status = response.status();
        let text = response.text().await?;
        if !status.is_success() {
            let message = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|body| body["error"]["message"].as_str().map(str::to_owned))
                .unwrap_or(text);
            bail!("the server could not export prompt {prompt_id} ({status}): {message}");
        }
        Ok(text)
    }

    async fn tools(&self) -> anyhow::Result<Vec<ToolSummary>> {
        self.get("/api/tools").await
    }

    async fn tool(&self, id: &str) -> anyhow::Result<ToolDetail> {
        self.get(&format!("/api/tools/{id}")).await
    }

    async fn invoke(
        &self,
        id: &str,
        input: Value,
        _yes: bool,
    ) -> anyhow::Result<Result<Value, String>> {
        match self
            .post::<InvokeResult>(&format!("/api/tools/{id}/invoke"), input)
            .await
        {
            Ok(result) => Ok(Ok(result.output)),
            // The server's refusals and the tool's failures are the tool's answer.
            Err(error) => match error.downcast::<RemoteError>() {
                Ok(remote) => Ok(Err(remote.message)),
                Err(other) => Err(other),
            },
        }
    }

    async fn capabilities(&self) -> anyhow::Result<Capabilities> {
        self.get("/api/capabilities").await
    }

    async fn start(
        &self,
        conversation: Option<&str>,
        message: String,
        settings: &PromptSettings,
    ) -> Result<Box<dyn PromptDriver>, StartError> {
        match self.start_prompt(conversation, message, settings).await {
            Ok(prompt) => Ok(Box::new(prompt)),
            Err(error) => match error.downcast_ref::<RemoteError>() {
                Some(remote) if matches!(remote.status, 400 | 404 | 422) => {
                    Err(StartError::Usage(format!("{error:#}")))
                }
                _ => Err(StartError::Failed(error)),
            },
        }
    }
}

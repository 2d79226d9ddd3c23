//! `--server URL`: the CLI as a client of `agentic serve`, over the same HTTP API anyone uses.

use std::pin::Pin;

use agentic_core::{Event, Prompt};
use anyhow::{Context as _, bail};
use async_trait::async_trait;
use futures::{Stream, StreamExt};
use serde_json::{Value, json};

use crate::ui::{PromptDriver, PromptSettings};

/// A client of one server, as one user.
#[derive(Clone)]
pub struct Remote {
    base: String,
    user: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl Remote {
    /// The user is `AGENTIC_USER_ID` (default `cli`); `AGENTIC_API_TOKEN` is sent as a bearer
    /// token when set.
    pub fn new(base: &str) -> anyhow::Result<Self> {
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
    pub async fn call(
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

    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.call(reqwest::Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    /// Starts a prompt and follows its events.
    pub async fn start(
        &self,
        conversation: Option<&str>,
        message: String,
        settings: &PromptSettings,
    ) -> anyhow::Result<RemotePrompt> {
        let mut body = json!({
            "input": message,
            "mode": settings.mode,
            "model": settings.model.as_str(),
        });
        if let Some(conversation) = conversation {
            body["conversationId"] = json!(conversation);
        }
        let accepted = self.post("/api/prompt", body).await?;
        let prompt_id = accepted["promptId"]
            .as_str()
            .context("the server answered without a promptId")?
            .to_owned();
        let conversation_id = accepted["conversationId"]
            .as_str()
            .context("the server answered without a conversationId")?
            .to_owned();
        // From the start of the replay window, so the events published before this request
        // connected (the prompt may already be running) come too.
        let response = self
            .request(
                reqwest::Method::GET,
                &format!("/api/events/stream?promptId={prompt_id}&lastEventId=0"),
            )
            .send()
            .await
            .context("could not open the event stream")?;
        if !response.status().is_success() {
            bail!("the event stream answered {}", response.status());
        }
        let events = eventsource_stream::EventStream::new(response.bytes_stream()).boxed();
        Ok(RemotePrompt {
            remote: self.clone(),
            prompt_id,
            conversation_id,
            events,
        })
    }
}

/// An error answer from the server.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct RemoteError {
    pub status: u16,
    pub code: String,
    pub message: String,
}

type EventStream = Pin<
    Box<
        dyn Stream<
                Item = Result<
                    eventsource_stream::Event,
                    eventsource_stream::EventStreamError<reqwest::Error>,
                >,
            > + Send,
    >,
>;

pub struct RemotePrompt {
    remote: Remote,
    prompt_id: String,
    conversation_id: String,
    events: EventStream,
}

#[async_trait]
impl PromptDriver for RemotePrompt {
    fn conversation_id(&self) -> &str {
        &self.conversation_id
    }

    async fn next_event(&mut self) -> anyhow::Result<Option<Event>> {
        while let Some(item) = self.events.next().await {
            let item = item.context("the event stream broke")?;
            if item.event.starts_with("stream.") {
                // Gaps and lags: the prompt read at the end is the truth either way.
                continue;
            }
            let event: Event = serde_json::from_str(&item.data)
                .with_context(|| format!("unreadable event from the server: {}", item.data))?;
            return Ok(Some(event));
        }
        Ok(None)
    }

    async fn approve(&mut self, tool_call_id: &str) -> anyhow::Result<()> {
        self.remote
            .post(
                &format!("/api/prompts/{}/approve", self.prompt_id),
                json!({ "toolCallId": tool_call_id }),
            )
            .await?;
        Ok(())
    }

    async fn reject(&mut self, tool_call_id: &str, reason: &str) -> anyhow::Result<()> {
        self.remote
            .post(
                &format!("/api/prompts/{}/reject", self.prompt_id),
                json!({ "toolCallId": tool_call_id, "reason": reason }),
            )
            .await?;
        Ok(())
    }

    async fn finish(&mut self) -> anyhow::Result<Prompt> {
        let prompt = self
            .remote
            .get(&format!("/api/prompts/{}", self.prompt_id))
            .await?;
        serde_json::from_value(prompt).context("unreadable prompt from the server")
    }
}

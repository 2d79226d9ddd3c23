//! The provider: one POST per request, retried like the official SDKs, then the SSE stream
//! read chunk by chunk with an idle timeout.

use std::time::Duration;

use agentic_core::{
    ModelEvent, ModelKind, ModelProvider, ModelRequest, ModelStream, ProviderError,
};
use agentic_wire::{Retry, SseReader, ToolNameMap, error_chain, shorten};
use anyhow::Context as _;
use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::config::{Api, OpenAiConfig};
use crate::stream::ChunkReader;
use crate::wire::request_body;

/// An OpenAI-compatible Chat Completions client.
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    config: OpenAiConfig,
    client: reqwest::Client,
}

impl OpenAiProvider {
    pub fn new(config: OpenAiConfig) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(config.connect_timeout_ms))
            .build()
            .context("could not build the HTTP client")?;
        Ok(Self { config, client })
    }

    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// Posts the serialised body (shared between attempts: neither re-serialised nor copied).
    async fn send_with_retries(
        &self,
        url: String,
        body: bytes::Bytes,
    ) -> Result<reqwest::Response, ProviderError> {
        let retry = Retry {
            max_retries: self.config.max_retries,
            base_delay: Duration::from_millis(self.config.retry_base_delay_ms),
            max_delay: Duration::from_millis(self.config.retry_max_delay_ms),
            idle: Duration::from_millis(self.config.idle_timeout_ms),
        };
        let build = || {
            let request = self
                .client
                .post(&url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone());
            match &self.config.api_key {
                Some(key) => request.bearer_auth(key),
                None => request,
            }
        };
        agentic_wire::send(&url, build, &retry, error_message).await
    }
}

#[async_trait]
impl ModelProvider for OpenAiProvider {
    fn id(&self) -> &str {
        "openai"
    }

    fn model_name(&self, kind: ModelKind) -> String {
        match kind {
            ModelKind::Normal => self.config.models.normal.clone(),
            ModelKind::High => self.config.models.high.clone(),
        }
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        let model = self.model_name(request.model);
        let names = ToolNameMap::for_request(&request);
        let idle = Duration::from_millis(self.config.idle_timeout_ms);
        let (sender, receiver) = mpsc::channel(64);
        if self.config.api == Api::Responses {
            let body = crate::responses::request_body(&request, &model, &names, &self.config);
            let body = serde_json::to_vec(&body).map_err(|error| {
                ProviderError::Config(format!("unserialisable request: {error}"))
            })?;
            let response = self
                .send_with_retries(self.config.responses_url(), body.into())
                .await?;
            if !agentic_wire::is_event_stream(&response) {
                let body = response.text().await.unwrap_or_default();
                return Err(ProviderError::Stream(format!(
                    "expected an event stream, got: {}",
                    shorten(body.trim())
                )));
            }
            tokio::spawn(read_responses(
                SseReader::new(response, idle),
                names,
                model,
                sender,
            ));
            return Ok(agentic_wire::receiver_stream(receiver));
        }
        // Straight to bytes: a JSON value in between was a third copy of every tool schema.
        let body = serde_json::to_vec(&request_body(&request, &model, &names, &self.config))
            .map_err(|error| ProviderError::Config(format!("unserialisable request: {error}")))?;
        let response = self
            .send_with_retries(self.config.chat_completions_url(), body.into())
            .await?;
        let is_event_stream = agentic_wire::is_event_stream(&response);
        let answer = Answer {
            names,
            model,
            idle,
            request,
        };
        if is_event_stream {
            tokio::spawn(read_event_stream(response, answer, sender));
        } else {
            // A server that ignored `stream: true` answers with one JSON body.
            tokio::spawn(read_json_answer(response, answer, sender));
        }
        Ok(agentic_wire::receiver_stream(receiver))
    }
}

type Sender = mpsc::Sender<Result<ModelEvent, ProviderError>>;

/// What reading an answer needs besides the response.
struct Answer {
    names: ToolNameMap,
    model: String,
    idle: Duration,
    /// Kept for a usage estimate when the server reports none.
    request: ModelRequest,
}

async fn read_event_stream(response: reqwest::Response, answer: Answer, sender: Sender) {
    let mut events = SseReader::new(response, answer.idle);
    let mut reader = ChunkReader::default();
    let mut done = false;
    loop {
        let event = match events.next().await {
            Ok(Some(event)) => event,
            Ok(None) => break,
            Err(error) => {
                let _ = sender.send(Err(error)).await;
                return;
            }
        };
        let data = event.data.trim();
        if data.is_empty() {
            continue;
        }
        if data == "[DONE]" {
            done = true;
            break;
        }
        let chunk: Value = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(error) => {
                let message = format!("unreadable chunk ({error}): {}", shorten(data));
                let _ = sender.send(Err(ProviderError::Stream(message))).await;
                return;
            }
        };
        match reader.read(&chunk) {
            Ok(deltas) => {
                for delta in deltas {
                    if sender.send(Ok(delta)).await.is_err() {
                        return;
                    }
                }
            }
            Err(error) => {
                let _ = sender.send(Err(error)).await;
                return;
            }
        }
    }
    if !done && !reader.finished() {
        let error = ProviderError::Stream(
            "the stream ended before the model finished (no finish_reason and no [DONE])"
                .to_owned(),
        );
        let _ = sender.send(Err(error)).await;
        return;
    }
    for event in reader.finish(&answer.names, &answer.model, &answer.request) {
        if sender.send(Ok(event)).await.is_err() {
            return;
        }
    }
}

/// Forwards the Responses API's events as they are read; stops when the caller drops the
/// stream.
async fn read_responses(mut events: SseReader, names: ToolNameMap, model: String, sender: Sender) {
    let mut reader = crate::responses::EventReader::default();
    loop {
        let event = match events.next().await {
            Ok(Some(event)) => event,
            Ok(None) => break,
            Err(error) => {
                let _ = sender.send(Err(error)).await;
                return;
            }
        };
        let data = event.data.trim();
        if data.is_empty() || data == "[DONE]" {
            continue;
        }
        let parsed: Value = match serde_json::from_str(data) {
            Ok(parsed) => parsed,
            Err(error) => {
                let message = format!("unreadable event ({error}): {}", shorten(data));
                let _ = sender.send(Err(ProviderError::Stream(message))).await;
                return;
            }
        };
        match reader.read(&parsed, &names) {
            Ok(read) => {
                for item in read {
                    if sender.send(Ok(item)).await.is_err() {
                        return;
                    }
                }
            }
            Err(error) => {
                let _ = sender.send(Err(error)).await;
                return;
            }
        }
        if reader.finished() {
            break;
        }
    }
    if !reader.finished() {
        let error = ProviderError::Stream(
            "the stream ended before the model finished (no response.completed)".to_owned(),
        );
        let _ = sender.send(Err(error)).await;
        return;
    }
    for item in reader.finish(&model) {
        if sender.send(Ok(item)).await.is_err() {
            return;
        }
    }
}

async fn read_json_answer(response: reqwest::Response, answer: Answer, sender: Sender) {
    let idle = answer.idle;
    let body = match tokio::time::timeout(idle, response.text()).await {
        Ok(Ok(body)) => body,
        Ok(Err(error)) => {
            let message = format!("the connection broke: {}", error_chain(&error));
            let _ = sender.send(Err(ProviderError::Stream(message))).await;
            return;
        }
        Err(_) => {
            let message = format!("no answer within {} ms", idle.as_millis());
            let _ = sender.send(Err(ProviderError::Stream(message))).await;
            return;
        }
    };
    let mut reader = ChunkReader::default();
    let events = serde_json::from_str::<Value>(&body)
        .map_err(|error| {
            ProviderError::Stream(format!("unreadable answer ({error}): {}", shorten(&body)))
        })
        .and_then(|answer| reader.read(&answer));
    match events {
        Ok(events) => {
            let finished = reader.finish(&answer.names, &answer.model, &answer.request);
            for event in events.into_iter().chain(finished) {
                if sender.send(Ok(event)).await.is_err() {
                    return;
                }
            }
        }
        Err(error) => {
            let _ = sender.send(Err(error)).await;
        }
    }
}

/// The `error.message` of an OpenAI error body, or the body itself.
fn error_message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|value| {
            value
                .get("error")
                .and_then(|error| error.get("message").or(Some(error)))
                .and_then(|message| message.as_str().map(str::to_owned))
        })
        .unwrap_or_else(|| shorten(body.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_are_summarised() {
        assert_eq!(
            error_message(r#"{"error": {"message": "Incorrect API key provided"}}"#),
            "Incorrect API key provided"
        );
        assert_eq!(error_message("Bad Gateway"), "Bad Gateway");
    }
}

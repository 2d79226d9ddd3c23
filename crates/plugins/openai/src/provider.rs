//! The provider: one POST per request, retried like the official SDKs, then the SSE stream
//! read chunk by chunk with an idle timeout.

use std::time::Duration;

use agentic_core::{
    ModelEvent, ModelKind, ModelProvider, ModelRequest, ModelStream, ProviderError,
};
use agentic_wire::{EventRead, Retry, SseReader, ToolNameMap, error_chain, shorten};
use anyhow::Context as _;
use async_trait::async_trait;
use futures::StreamExt as _;
use serde_json::Value;

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
        let client = agentic_wire::client(config.connect_timeout_ms)
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
        let retry = Retry::from_millis(
            self.config.max_retries,
            self.config.retry_base_delay_ms,
            self.config.retry_max_delay_ms,
            self.config.idle_timeout_ms,
        );
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

    /// Asked again warmer (the server's own temperature, when none is set, samples too) and
    /// with another `seed`, an answer may differ.
    fn samples(&self) -> bool {
        true
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        let model = self.model_name(request.model);
        let names = ToolNameMap::for_request(&request);
        let idle = Duration::from_millis(self.config.idle_timeout_ms);
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
            let answer = ResponsesAnswer {
                reader: crate::responses::EventReader::default(),
                names,
                model,
            };
            return Ok(agentic_wire::event_stream(
                SseReader::new(response, idle),
                answer,
            ));
        }
        // Straight to bytes: a JSON value in between was a third copy of every tool schema.
        let body = serde_json::to_vec(&request_body(&request, &model, &names, &self.config))
            .map_err(|error| ProviderError::Config(format!("unserialisable request: {error}")))?;
        let response = self
            .send_with_retries(self.config.chat_completions_url(), body.into())
            .await?;
        let answer = ChatAnswer {
            reader: ChunkReader::default(),
            done: false,
            names,
            model,
            request,
        };
        if agentic_wire::is_event_stream(&response) {
            Ok(agentic_wire::event_stream(
                SseReader::new(response, idle),
                answer,
            ))
        } else {
            // A server that ignored `stream: true` answers with one JSON body.
            Ok(Box::pin(
                futures::stream::once(read_json_answer(response, answer, idle))
                    .flat_map(futures::stream::iter),
            ))
        }
    }
}

/// One Chat Completions answer being read.
struct ChatAnswer {
    reader: ChunkReader,
    /// Whether `[DONE]` came.
    done: bool,
    names: ToolNameMap,
    model: String,
    /// Kept for a usage estimate when the server reports none.
    request: ModelRequest,
}

impl EventRead for ChatAnswer {
    fn read(&mut self, data: &str) -> Result<Vec<ModelEvent>, ProviderError> {
        if data == "[DONE]" {
            self.done = true;
            return Ok(Vec::new());
        }
        let chunk: Value = serde_json::from_str(data).map_err(|error| {
            ProviderError::Stream(format!("unreadable chunk ({error}): {}", shorten(data)))
        })?;
        self.reader.read(&chunk)
    }

    fn finished(&self) -> bool {
        self.done
    }

    fn finish(self) -> Result<Vec<ModelEvent>, ProviderError> {
        if !self.done && !self.reader.finished() {
            return Err(ProviderError::Stream(
                "the stream ended before the model finished (no finish_reason and no [DONE])"
                    .to_owned(),
            ));
        }
        Ok(self.reader.finish(&self.names, &self.model, &self.request))
    }
}

/// One Responses API answer being read.
struct ResponsesAnswer {
    reader: crate::responses::EventReader,
    names: ToolNameMap,
    model: String,
}

impl EventRead for ResponsesAnswer {
    fn read(&mut self, data: &str) -> Result<Vec<ModelEvent>, ProviderError> {
        if data == "[DONE]" {
            return Ok(Vec::new());
        }
        let parsed: Value = serde_json::from_str(data).map_err(|error| {
            ProviderError::Stream(format!("unreadable event ({error}): {}", shorten(data)))
        })?;
        self.reader.read(&parsed, &self.names)
    }

    fn finished(&self) -> bool {
        self.reader.finished()
    }

    fn finish(self) -> Result<Vec<ModelEvent>, ProviderError> {
        if !self.reader.finished() {
            return Err(ProviderError::Stream(
                "the stream ended before the model finished (no response.completed)".to_owned(),
            ));
        }
        Ok(self.reader.finish(&self.model))
    }
}

/// The events of a whole JSON answer, in one piece.
async fn read_json_answer(
    response: reqwest::Response,
    mut answer: ChatAnswer,
    idle: Duration,
) -> Vec<Result<ModelEvent, ProviderError>> {
    let body = match tokio::time::timeout(idle, response.text()).await {
        Ok(Ok(body)) => body,
        Ok(Err(error)) => {
            let message = format!("the connection broke: {}", error_chain(&error));
            return vec![Err(ProviderError::Stream(message))];
        }
        Err(_) => {
            let message = format!("no answer within {} ms", idle.as_millis());
            return vec![Err(ProviderError::Stream(message))];
        }
    };
    let events = serde_json::from_str::<Value>(&body)
        .map_err(|error| {
            ProviderError::Stream(format!("unreadable answer ({error}): {}", shorten(&body)))
        })
        .and_then(|parsed| answer.reader.read(&parsed));
    match events {
        Ok(events) => {
            let finished = answer
                .reader
                .finish(&answer.names, &answer.model, &answer.request);
            events.into_iter().chain(finished).map(Ok).collect()
        }
        Err(error) => vec![Err(error)],
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

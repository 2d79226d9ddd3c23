//! The provider: one POST per request, retried as Anthropic's SDKs retry (429 and 529 with
//! `retry-after` among them), then the event stream read with an idle timeout.

use agentic_core::{
    ModelEvent, ModelKind, ModelProvider, ModelRequest, ModelStream, ProviderError,
};
use agentic_wire::{EventRead, Retry, SseReader, ToolNameMap, shorten};
use anyhow::Context as _;
use async_trait::async_trait;
use serde_json::Value;

use crate::config::{API_VERSION, AnthropicConfig};
use crate::stream::EventReader;
use crate::wire::request_body;

/// A client of Anthropic's Messages API.
#[derive(Debug, Clone)]
pub struct AnthropicProvider {
    config: AnthropicConfig,
    client: reqwest::Client,
}

impl AnthropicProvider {
    /// A provider with these settings.
    pub fn new(config: AnthropicConfig) -> anyhow::Result<Self> {
        let client = agentic_wire::client(config.connect_timeout_ms)
            .context("could not build the HTTP client")?;
        Ok(Self { config, client })
    }

    /// Its settings.
    pub fn config(&self) -> &AnthropicConfig {
        &self.config
    }
}

#[async_trait]
impl ModelProvider for AnthropicProvider {
    fn id(&self) -> &str {
        crate::PROVIDER_ID
    }

    fn model_name(&self, kind: ModelKind) -> String {
        match kind {
            ModelKind::Normal => self.config.models.normal.clone(),
            ModelKind::High => self.config.models.high.clone(),
        }
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        let Some(key) = self.config.api_key.clone() else {
            return Err(ProviderError::Config(
                "no Anthropic API key: set ANTHROPIC_API_KEY or `apiKey` in [anthropic]".to_owned(),
            ));
        };
        let model = self.model_name(request.model);
        let names = ToolNameMap::for_request(&request);
        let body = serde_json::to_vec(&request_body(&request, &model, &names, &self.config))
            .map_err(|error| ProviderError::Config(format!("unserialisable request: {error}")))?;
        let body = bytes::Bytes::from(body);
        let url = self.config.messages_url();
        let retry = Retry::from_millis(
            self.config.max_retries,
            self.config.retry_base_delay_ms,
            self.config.retry_max_delay_ms,
            self.config.idle_timeout_ms,
        );
        let build = || {
            self.client
                .post(&url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .header("x-api-key", &key)
                .header("anthropic-version", API_VERSION)
                .body(body.clone())
        };
        let response = agentic_wire::send(&url, build, &retry, error_message).await?;
        if !agentic_wire::is_event_stream(&response) {
            let body = response.text().await.unwrap_or_default();
            return Err(ProviderError::Stream(format!(
                "expected an event stream, got: {}",
                shorten(body.trim())
            )));
        }
        let answer = Answer {
            reader: EventReader::default(),
            names,
            model,
        };
        Ok(agentic_wire::event_stream(
            SseReader::new(response, retry.idle),
            answer,
        ))
    }
}

/// One answer being read.
struct Answer {
    reader: EventReader,
    names: ToolNameMap,
    model: String,
}

impl EventRead for Answer {
    fn read(&mut self, data: &str) -> Result<Vec<ModelEvent>, ProviderError> {
        let parsed: Value = serde_json::from_str(data).map_err(|error| {
            ProviderError::Stream(format!("unreadable event ({error}): {}", shorten(data)))
        })?;
        self.reader.read(&parsed, &self.names)
    }

    fn finished(&self) -> bool {
        self.reader.stopped()
    }

    fn finish(self) -> Result<Vec<ModelEvent>, ProviderError> {
        if !self.reader.stopped() {
            return Err(ProviderError::Stream(
                "the stream ended before the model finished (no message_stop)".to_owned(),
            ));
        }
        Ok(self.reader.finish(&self.model))
    }
}

/// `type: message` of an Anthropic error body (`{"type": "error", "error": {…}}`), or the body.
fn error_message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|value| {
            let error = value.get("error")?;
            let message = error.get("message")?.as_str()?;
            Some(match error.get("type").and_then(Value::as_str) {
                Some(kind) => format!("{kind}: {message}"),
                None => message.to_owned(),
            })
        })
        .unwrap_or_else(|| shorten(body.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_say_their_type_and_message() {
        assert_eq!(
            error_message(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            "overloaded_error: Overloaded"
        );
        assert_eq!(error_message("Bad Gateway"), "Bad Gateway");
    }
}

//! The provider: one POST per request, retried as Google's SDKs retry (429 and 5xx), then the
//! event stream read with an idle timeout. The stream has no closing event: it ends when the
//! last chunk, which carries the finish reason, has come.

use agentic_core::{
    ModelEvent, ModelKind, ModelProvider, ModelRequest, ModelStream, ProviderError,
};
use agentic_wire::{EventRead, Retry, SseReader, ToolNameMap, shorten};
use anyhow::Context as _;
use async_trait::async_trait;
use serde_json::Value;

use crate::config::GeminiConfig;
use crate::stream::ChunkReader;
use crate::wire::request_body;

/// A client of the Gemini API.
#[derive(Debug, Clone)]
pub struct GeminiProvider {
    config: GeminiConfig,
    client: reqwest::Client,
}

impl GeminiProvider {
    /// A provider with these settings.
    pub fn new(config: GeminiConfig) -> anyhow::Result<Self> {
        let client = agentic_wire::client(config.connect_timeout_ms)
            .context("could not build the HTTP client")?;
        Ok(Self { config, client })
    }

    /// Its settings.
    pub fn config(&self) -> &GeminiConfig {
        &self.config
    }
}

#[async_trait]
impl ModelProvider for GeminiProvider {
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
                "no Gemini API key: set GEMINI_API_KEY (or GOOGLE_API_KEY) or `apiKey` in [gemini]"
                    .to_owned(),
            ));
        };
        let model = self.model_name(request.model);
        let names = ToolNameMap::for_request(&request);
        let body = serde_json::to_vec(&request_body(&request, &names, &self.config))
            .map_err(|error| ProviderError::Config(format!("unserialisable request: {error}")))?;
        let body = bytes::Bytes::from(body);
        let url = self.config.stream_url(&model);
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
                .header("x-goog-api-key", &key)
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
            reader: ChunkReader::default(),
            names,
            model,
        };
        Ok(agentic_wire::event_stream(
            SseReader::new(response, retry.idle),
            answer,
        ))
    }
}

/// One answer being read. The stream has no closing event: it ends when the server closes
/// it, after the chunk with the finish reason.
struct Answer {
    reader: ChunkReader,
    names: ToolNameMap,
    model: String,
}

impl EventRead for Answer {
    fn read(&mut self, data: &str) -> Result<Vec<ModelEvent>, ProviderError> {
        let parsed: Value = serde_json::from_str(data).map_err(|error| {
            ProviderError::Stream(format!("unreadable chunk ({error}): {}", shorten(data)))
        })?;
        self.reader.read(&parsed, &self.names)
    }

    fn finished(&self) -> bool {
        false
    }

    fn finish(self) -> Result<Vec<ModelEvent>, ProviderError> {
        self.reader.finish(&self.model)
    }
}

/// `STATUS: message` of a Google error body (`{"error": {…}}`, or a list of them), or the
/// body.
fn error_message(body: &str) -> String {
    let parsed = serde_json::from_str::<Value>(body).ok();
    let error = match &parsed {
        Some(Value::Array(items)) => items.first().and_then(|item| item.get("error")),
        Some(value) => value.get("error"),
        None => None,
    };
    error
        .and_then(|error| {
            let message = error.get("message")?.as_str()?;
            Some(match error.get("status").and_then(Value::as_str) {
                Some(status) => format!("{status}: {message}"),
                None => message.to_owned(),
            })
        })
        .unwrap_or_else(|| shorten(body.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_say_their_status_and_message() {
        assert_eq!(
            error_message(
                r#"{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED"}}"#
            ),
            "RESOURCE_EXHAUSTED: Resource has been exhausted"
        );
        assert_eq!(
            error_message(
                r#"[{"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT"}}]"#
            ),
            "INVALID_ARGUMENT: bad"
        );
        assert_eq!(error_message("Bad Gateway"), "Bad Gateway");
    }
}

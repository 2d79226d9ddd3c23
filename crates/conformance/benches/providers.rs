//! `cargo xtask bench providers`: what each HTTP provider adds per streamed event. Each round
//! serves the same stream of 2,000 text deltas, in the provider's own wire format, from a
//! loopback server in one write, and times two clients side by side: a bare `reqwest` read
//! of the bytes (the floor: HTTP and loopback), and the provider through
//! `CompletionService::complete_messages` (its request, SSE parsing, event reading, the
//! channel to the caller, gathering the answer). The overhead per event is the difference of
//! the medians divided by the events.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentic_conformance::{FakeServer, Reply};
use agentic_core::{ChatMessage, CompletionService, ModelKind, ModelProvider, ModelRequest};
use serde_json::json;

const EVENTS: usize = 2_000;
const ROUNDS: usize = 21;

struct Wire {
    name: &'static str,
    path: &'static str,
    provider: fn(&str) -> Arc<dyn ModelProvider>,
    stream: fn() -> String,
}

fn sse(event: Option<&str>, data: &serde_json::Value) -> String {
    match event {
        Some(event) => format!("event: {event}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

fn piece(index: usize) -> String {
    format!("word{index} ")
}

fn wires() -> Vec<Wire> {
    vec![
        Wire {
            name: "openai-chat",
            path: "/v1/chat/completions",
            provider: |base| {
                let mut config =
                    agentic_plugin_openai::OpenAiConfig::for_base_url(&format!("{base}/v1"));
                config.api_key = Some("key".to_owned());
                Arc::new(agentic_plugin_openai::OpenAiProvider::new(config).unwrap())
            },
            stream: || {
                let mut out = String::new();
                for index in 0..EVENTS {
                    out += &sse(
                        None,
                        &json!({"id": "chatcmpl-1", "object": "chat.completion.chunk",
                        "created": 1_764_230_400, "model": "gpt-4.1-mini",
                        "choices": [{"index": 0, "delta": {"content": piece(index)}, "finish_reason": null}]}),
                    );
                }
                out += &sse(
                    None,
                    &json!({"id": "chatcmpl-1", "object": "chat.completion.chunk",
                    "model": "gpt-4.1-mini", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 20, "completion_tokens": EVENTS, "total_tokens": 20 + EVENTS}}),
                );
                out + "data: [DONE]\n\n"
            },
        },
        Wire {
            name: "openai-responses",
            path: "/v1/responses",
            provider: |base| {
                let mut config =
                    agentic_plugin_openai::OpenAiConfig::for_base_url(&format!("{base}/v1"));
                config.api_key = Some("key".to_owned());
                config.api = agentic_plugin_openai::Api::Responses;
                Arc::new(agentic_plugin_openai::OpenAiProvider::new(config).unwrap())
            },
            stream: || {
                let mut out = sse(
                    Some("response.created"),
                    &json!({"type": "response.created", "response": {"id": "resp_1", "model": "gpt-5-mini", "status": "in_progress"}}),
                );
                for index in 0..EVENTS {
                    out += &sse(
                        Some("response.output_text.delta"),
                        &json!({"type": "response.output_text.delta", "item_id": "msg_1",
                            "output_index": 0, "content_index": 0, "delta": piece(index),
                            "sequence_number": index + 1}),
                    );
                }
                out + &sse(
                    Some("response.completed"),
                    &json!({"type": "response.completed", "response": {"id": "resp_1", "model": "gpt-5-mini",
                        "status": "completed", "usage": {"input_tokens": 20, "output_tokens": EVENTS, "total_tokens": 20 + EVENTS}}}),
                )
            },
        },
        Wire {
            name: "anthropic",
            path: "/v1/messages",
            provider: |base| {
                let config = agentic_plugin_anthropic::AnthropicConfig::for_base_url(base, "key");
                Arc::new(agentic_plugin_anthropic::AnthropicProvider::new(config).unwrap())
            },
            stream: || {
                let mut out = sse(
                    Some("message_start"),
                    &json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                        "role": "assistant", "content": [], "model": "claude-sonnet-4-5",
                        "usage": {"input_tokens": 20, "output_tokens": 1}}}),
                );
                out += &sse(
                    Some("content_block_start"),
                    &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                );
                for index in 0..EVENTS {
                    out += &sse(
                        Some("content_block_delta"),
                        &json!({"type": "content_block_delta", "index": 0,
                            "delta": {"type": "text_delta", "text": piece(index)}}),
                    );
                }
                out += &sse(
                    Some("content_block_stop"),
                    &json!({"type": "content_block_stop", "index": 0}),
                );
                out += &sse(
                    Some("message_delta"),
                    &json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": EVENTS}}),
                );
                out + &sse(Some("message_stop"), &json!({"type": "message_stop"}))
            },
        },
        Wire {
            name: "gemini",
            path: "/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
            provider: |base| {
                let config = agentic_plugin_gemini::GeminiConfig::for_base_url(base, "key");
                Arc::new(agentic_plugin_gemini::GeminiProvider::new(config).unwrap())
            },
            stream: || {
                let mut out = String::new();
                for index in 0..EVENTS {
                    let mut chunk = json!({"candidates": [{"content": {"parts": [{"text": piece(index)}],
                        "role": "model"}, "index": 0}], "modelVersion": "gemini-2.5-flash", "responseId": "r1"});
                    if index + 1 == EVENTS {
                        chunk["candidates"][0]["finishReason"] = json!("STOP");
                        chunk["usageMetadata"] = json!({"promptTokenCount": 20,
                            "candidatesTokenCount": EVENTS, "totalTokenCount": 20 + EVENTS});
                    }
                    out += &sse(None, &chunk);
                }
                out
            },
        },
    ]
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}

async fn run() {
    let client = reqwest::Client::new();
    let expected: String = (0..EVENTS).map(piece).collect();
    println!(
        "| provider | events | bytes | bare read (median) | provider (median) | overhead per event |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for wire in wires() {
        let stream = (wire.stream)();
        let mut bare = Vec::new();
        let mut through = Vec::new();
        for round in 0..ROUNDS {
            // Alternate which client goes first, so neither always meets a warmer machine.
            for first in [round % 2 == 0, round % 2 != 0] {
                let server = FakeServer::start(vec![Reply::Whole(stream.clone())])
                    .await
                    .unwrap();
                if first {
                    let url = format!("{}{}", server.base_url(), wire.path);
                    let started = Instant::now();
                    let body = client.post(&url).body("{}").send().await.unwrap();
                    let bytes = body.bytes().await.unwrap();
                    bare.push(started.elapsed());
                    assert_eq!(bytes.len(), stream.len());
                } else {
                    let service = CompletionService::new((wire.provider)(server.base_url()));
                    let request = ModelRequest::new(
                        ModelKind::Normal,
                        vec![ChatMessage::user("Say many words.")],
                    );
                    let started = Instant::now();
                    let mut deltas = 0usize;
                    let response = service
                        .complete_messages(request, &mut |_| deltas += 1)
                        .await
                        .unwrap();
                    through.push(started.elapsed());
                    assert_eq!(response.text, expected, "{}", wire.name);
                    assert_eq!(deltas, EVENTS, "{}", wire.name);
                }
            }
        }
        let bare = median(&mut bare);
        let through = median(&mut through);
        let per_event = through.saturating_sub(bare).as_secs_f64() * 1e6 / EVENTS as f64;
        println!(
            "| {} | {EVENTS} | {} | {:.2} ms | {:.2} ms | {per_event:.2} µs |",
            wire.name,
            stream.len(),
            bare.as_secs_f64() * 1e3,
            through.as_secs_f64() * 1e3,
        );
    }
}

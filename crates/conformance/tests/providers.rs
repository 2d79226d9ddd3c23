//! One conformance suite for every HTTP provider agentic ships: each case runs against each
//! provider, whose fake server answers from recorded streams in that provider's own wire
//! format (`fixtures/<provider>/`). A provider that cannot express something (OpenAI Chat
//! has no reasoning to send back, no error flag on tool results, no cache writes) says so in
//! its row, and the case checks what it does instead.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentic_conformance::{FakeServer, Recorded, Reply, events, fixture};
use agentic_core::{
    ChatMessage, CompletionService, Config, ModelKind, ModelProvider, ModelRequest, ModelResponse,
    ProviderError, Reasoning, ToolCallRequest, ToolChoice, ToolSpec,
};
use futures::StreamExt as _;
use serde_json::{Value, json};

/// A tool result as a request sent it: the call's id, its text, and whether it was flagged
/// as an error.
type SentResult = (Option<String>, String, bool);

/// Where a request says a tool call is required (a JSON pointer), and what it says there.
type RequiredChoice = (&'static str, fn() -> Value);

/// A provider's row of the table.
struct Wire {
    name: &'static str,
    /// The provider, talking to `base_url` with short retry delays and idle timeout.
    provider: fn(&str) -> Arc<dyn ModelProvider>,
    /// Whether its wire format sends reasoning back (and so the thinking case applies).
    thinking: bool,
    /// Whether its wire format flags a tool result as an error.
    flags_errors: bool,
    /// Whether it reports cache writes.
    cache_write: bool,
    /// The tool results a request sent: (call id, text, flagged as an error).
    tool_results: fn(&Value) -> Vec<SentResult>,
    /// The reasoning signatures a request sent back.
    signatures: fn(&Value) -> Vec<String>,
    /// The path (and query) requests go to.
    path: &'static str,
    /// Where a request that must call a tool says so (a JSON pointer), and what it says;
    /// `None` for a wire configured so that its API takes no such choice.
    required_choice: Option<RequiredChoice>,
}

const IDLE_MS: u64 = 400;

fn wires() -> Vec<Wire> {
    vec![
        Wire {
            name: "openai-chat",
            provider: |base_url| {
                let mut config =
                    agentic_plugin_openai::OpenAiConfig::for_base_url(&format!("{base_url}/v1"));
                config.api_key = Some("test-key".to_owned());
                config.retry_base_delay_ms = 5;
                config.idle_timeout_ms = IDLE_MS;
                Arc::new(agentic_plugin_openai::OpenAiProvider::new(config).unwrap())
            },
            thinking: false,
            flags_errors: false,
            cache_write: false,
            tool_results: |body| {
                messages(body, "messages")
                    .filter(|message| message["role"] == "tool")
                    .map(|message| {
                        (
                            message["tool_call_id"].as_str().map(str::to_owned),
                            message["content"].as_str().unwrap_or_default().to_owned(),
                            false,
                        )
                    })
                    .collect()
            },
            signatures: |_| Vec::new(),
            path: "/v1/chat/completions",
            required_choice: Some(("/tool_choice", || json!("required"))),
        },
        Wire {
            name: "openai-responses",
            provider: |base_url| {
                let mut config =
                    agentic_plugin_openai::OpenAiConfig::for_base_url(&format!("{base_url}/v1"));
                config.api_key = Some("test-key".to_owned());
                config.api = agentic_plugin_openai::Api::Responses;
                config.retry_base_delay_ms = 5;
                config.idle_timeout_ms = IDLE_MS;
                Arc::new(agentic_plugin_openai::OpenAiProvider::new(config).unwrap())
            },
            thinking: true,
            flags_errors: false,
            cache_write: false,
            tool_results: |body| {
                messages(body, "input")
                    .filter(|item| item["type"] == "function_call_output")
                    .map(|item| {
                        (
                            item["call_id"].as_str().map(str::to_owned),
                            item["output"].as_str().unwrap_or_default().to_owned(),
                            false,
                        )
                    })
                    .collect()
            },
            signatures: |body| {
                messages(body, "input")
                    .filter(|item| item["type"] == "reasoning")
                    .filter_map(|item| item["encrypted_content"].as_str().map(str::to_owned))
                    .collect()
            },
            path: "/v1/responses",
            required_choice: Some(("/tool_choice", || json!("required"))),
        },
        Wire {
            name: "anthropic",
            provider: |base_url| {
                let mut config =
                    agentic_plugin_anthropic::AnthropicConfig::for_base_url(base_url, "test-key");
                config.retry_base_delay_ms = 5;
                config.idle_timeout_ms = IDLE_MS;
                config.thinking = Some(2_048);
                Arc::new(agentic_plugin_anthropic::AnthropicProvider::new(config).unwrap())
            },
            thinking: true,
            flags_errors: true,
            cache_write: true,
            tool_results: |body| {
                blocks(body, "messages", "content")
                    .filter(|block| block["type"] == "tool_result")
                    .map(|block| {
                        (
                            block["tool_use_id"].as_str().map(str::to_owned),
                            block["content"].as_str().unwrap_or_default().to_owned(),
                            block["is_error"] == true,
                        )
                    })
                    .collect()
            },
            signatures: |body| {
                blocks(body, "messages", "content")
                    .filter(|block| block["type"] == "thinking")
                    .filter_map(|block| block["signature"].as_str().map(str::to_owned))
                    .collect()
            },
            path: "/v1/messages",
            // Thinking is on, and then the API takes no choice but `auto` (tested on its own
            // in the provider's tests).
            required_choice: None,
        },
        Wire {
            name: "gemini",
            provider: |base_url| {
                let mut config =
                    agentic_plugin_gemini::GeminiConfig::for_base_url(base_url, "test-key");
                config.retry_base_delay_ms = 5;
                config.idle_timeout_ms = IDLE_MS;
                Arc::new(agentic_plugin_gemini::GeminiProvider::new(config).unwrap())
            },
            thinking: true,
            flags_errors: true,
            cache_write: false,
            tool_results: |body| {
                blocks(body, "contents", "parts")
                    .filter_map(|part| part.get("functionResponse"))
                    .map(|response| {
                        let error = response["response"].get("error");
                        let text = error.unwrap_or(&response["response"]["output"]);
                        (
                            response["id"].as_str().map(str::to_owned),
                            text.as_str().unwrap_or_default().to_owned(),
                            error.is_some(),
                        )
                    })
                    .collect()
            },
            signatures: |body| {
                blocks(body, "contents", "parts")
                    .filter_map(|part| part["thoughtSignature"].as_str().map(str::to_owned))
                    .collect()
            },
            path: "/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
            required_choice: Some(("/toolConfig/functionCallingConfig/mode", || json!("ANY"))),
        },
    ]
}

fn messages<'a>(body: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    body[key].as_array().into_iter().flatten()
}

fn blocks<'a>(body: &'a Value, key: &str, inner: &'static str) -> impl Iterator<Item = &'a Value> {
    messages(body, key).flat_map(move |message| message[inner].as_array().into_iter().flatten())
}

impl Wire {
    fn fixture(&self, name: &str) -> String {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(self.name);
        fixture(&dir, name)
    }

    async fn serve(&self, replies: Vec<Reply>) -> (FakeServer, CompletionService) {
        let server = FakeServer::start(replies).await.unwrap();
        let service = CompletionService::new((self.provider)(server.base_url()));
        (server, service)
    }

    fn stream(&self, name: &str) -> Reply {
        Reply::Stream(self.fixture(name))
    }
}

fn tools() -> Vec<ToolSpec> {
    let spec = |name: &str, property: &str| ToolSpec {
        name: name.to_owned(),
        description: format!("The {name} tool."),
        parameters: Arc::new(json!({
            "type": "object",
            "properties": { property: { "type": "string" } },
            "required": [property],
        })),
    };
    vec![spec("time.now", "timezone"), spec("fs.read", "path")]
}

fn request(messages: Vec<ChatMessage>) -> ModelRequest {
    let mut request = ModelRequest::new(ModelKind::Normal, messages);
    request.tools = tools();
    request
}

fn question() -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("You are a careful assistant."),
        ChatMessage::user("What time is it in Tokyo?"),
    ]
}

async fn complete(service: &CompletionService, request: ModelRequest) -> ModelResponse {
    let mut deltas = Vec::new();
    let response = service
        .complete_messages(request, &mut |delta| deltas.push(delta.to_owned()))
        .await;
    response.unwrap_or_else(|error| panic!("{error}"))
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCallRequest {
    ToolCallRequest {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments: arguments.to_string(),
    }
}

fn only_request(server: &FakeServer) -> Recorded {
    let mut requests = server.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    requests.remove(0)
}

#[tokio::test]
async fn streamed_text_arrives_in_pieces_with_usage() {
    for wire in wires() {
        let (server, service) = wire.serve(vec![wire.stream("text.sse")]).await;
        let mut deltas = Vec::new();
        let response = service
            .complete_messages(request(question()), &mut |delta| {
                deltas.push(delta.to_owned())
            })
            .await
            .unwrap_or_else(|error| panic!("{}: {error}", wire.name));
        assert_eq!(response.text, "Hello, world.", "{}", wire.name);
        assert!(
            deltas.len() >= 2,
            "{}: one delta per piece: {deltas:?}",
            wire.name
        );
        assert_eq!(response.usage.input_tokens, 20, "{}", wire.name);
        assert_eq!(response.usage.output_tokens, 5, "{}", wire.name);
        assert_eq!(
            response.finish_reason.as_deref(),
            Some("stop"),
            "{}",
            wire.name
        );
        assert!(response.tool_calls.is_empty(), "{}", wire.name);
        let sent = only_request(&server);
        assert_eq!(sent.uri, wire.path, "{}", wire.name);
        // The declarations name tools as the wire allows (`time_now`), and come back dotted.
        assert!(sent.body.to_string().contains("time_now"), "{}", wire.name);
    }
}

#[tokio::test]
async fn a_request_that_must_call_a_tool_says_so_in_its_apis_words() {
    for wire in wires() {
        let (server, service) = wire
            .serve(vec![
                wire.stream("tool_call.sse"),
                wire.stream("tool_call.sse"),
            ])
            .await;
        complete(&service, request(question())).await;
        let mut required = request(question());
        required.tool_choice = ToolChoice::Required;
        complete(&service, required).await;
        let sent = server.requests();
        let Some((pointer, value)) = wire.required_choice else {
            assert_eq!(sent[0].body, sent[1].body, "{}", wire.name);
            continue;
        };
        assert_eq!(sent[0].body.pointer(pointer), None, "{}", wire.name);
        assert_eq!(
            sent[1].body.pointer(pointer),
            Some(&value()),
            "{}",
            wire.name
        );
    }
}

#[tokio::test]
async fn one_tool_call_comes_whole_with_its_dotted_name() {
    for wire in wires() {
        let (_server, service) = wire.serve(vec![wire.stream("tool_call.sse")]).await;
        let response = complete(&service, request(question())).await;
        assert_eq!(response.tool_calls.len(), 1, "{}", wire.name);
        let call = &response.tool_calls[0];
        assert_eq!(call.name, "time.now", "{}", wire.name);
        assert!(!call.id.is_empty(), "{}", wire.name);
        let arguments: Value = serde_json::from_str(&call.arguments).unwrap();
        assert_eq!(
            arguments,
            json!({ "timezone": "Asia/Tokyo" }),
            "{}",
            wire.name
        );
        assert_eq!(
            response.finish_reason.as_deref(),
            Some("tool_calls"),
            "{}",
            wire.name
        );
    }
}

#[tokio::test]
async fn parallel_calls_keep_their_order_and_distinct_ids() {
    for wire in wires() {
        let (_server, service) = wire.serve(vec![wire.stream("parallel.sse")]).await;
        let response = complete(&service, request(question())).await;
        let names: Vec<&str> = response
            .tool_calls
            .iter()
            .map(|call| call.name.as_str())
            .collect();
        assert_eq!(names, ["time.now", "fs.read"], "{}", wire.name);
        assert_ne!(
            response.tool_calls[0].id, response.tool_calls[1].id,
            "{}",
            wire.name
        );
        let arguments: Value = serde_json::from_str(&response.tool_calls[1].arguments).unwrap();
        assert_eq!(arguments, json!({ "path": "notes.txt" }), "{}", wire.name);
    }
}

#[tokio::test]
async fn a_tool_error_is_fed_back_as_an_error() {
    for wire in wires() {
        let (server, service) = wire.serve(vec![wire.stream("text.sse")]).await;
        let mut messages = question();
        let mut asked = ChatMessage::assistant("");
        asked.tool_calls = vec![call(
            "call_01",
            "time.now",
            json!({ "timezone": "Mars/Base" }),
        )];
        messages.push(asked);
        messages.push(ChatMessage::tool_error(
            "call_01",
            "Error: unknown time zone Mars/Base",
        ));
        complete(&service, request(messages)).await;
        let sent = only_request(&server);
        let results = (wire.tool_results)(&sent.body);
        assert_eq!(results.len(), 1, "{}: {}", wire.name, sent.body);
        let (id, text, flagged) = &results[0];
        assert_eq!(id.as_deref(), Some("call_01"), "{}", wire.name);
        assert!(
            text.contains("unknown time zone Mars/Base"),
            "{}: {text}",
            wire.name
        );
        assert_eq!(*flagged, wire.flags_errors, "{}", wire.name);
    }
}

#[tokio::test]
async fn reasoning_is_read_and_sent_back_with_its_signature() {
    for wire in wires().into_iter().filter(|wire| wire.thinking) {
        let (server, service) = wire
            .serve(vec![wire.stream("thinking.sse"), wire.stream("text.sse")])
            .await;
        let first = complete(&service, request(question())).await;
        assert_eq!(
            first.reasoning.len(),
            1,
            "{}: {:?}",
            wire.name,
            first.reasoning
        );
        let reasoning = &first.reasoning[0];
        assert_eq!(reasoning.provider, wire.name.trim_end_matches("-responses"));
        assert_eq!(reasoning.text, "The user wants the time.", "{}", wire.name);
        // What lets the provider read it back: a signature, or the reasoning encrypted.
        let token = reasoning
            .signature
            .as_deref()
            .or(reasoning.encrypted.as_deref());
        assert_eq!(token, Some("sig-abc"), "{}", wire.name);
        assert!(
            first.text.is_empty(),
            "{}: reasoning is never the answer",
            wire.name
        );
        assert_eq!(first.tool_calls.len(), 1, "{}", wire.name);

        // The next request of the tool loop sends it back, with the call and its result.
        let mut messages = question();
        let mut asked = ChatMessage::assistant("");
        asked.tool_calls = first.tool_calls.clone();
        asked.reasoning = first.reasoning.clone();
        // Reasoning from another provider is never sent to this one.
        asked
            .reasoning
            .push(Reasoning::new("elsewhere", "other").with_signature("sig-other"));
        messages.push(asked);
        messages.push(ChatMessage::tool_result(&first.tool_calls[0].id, "09:00"));
        complete(&service, request(messages)).await;
        let sent = &server.requests()[1];
        assert_eq!(
            (wire.signatures)(&sent.body),
            ["sig-abc"],
            "{}: {}",
            wire.name,
            sent.body
        );
    }
}

#[tokio::test]
async fn cache_reads_and_writes_are_counted_and_priced() {
    let prices = |model: &str| {
        Config::from_value(json!({ "prices": {
            model: { "input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75 }
        }}))
        .prices()
        .unwrap()
    };
    for wire in wires() {
        let server = FakeServer::start(vec![wire.stream("cached.sse")])
            .await
            .unwrap();
        let provider = (wire.provider)(server.base_url());
        let model = provider.model_name(ModelKind::Normal);
        let service = CompletionService::new(provider).with_prices(prices(&model));
        let response = complete(&service, request(question())).await;
        let usage = &response.usage;
        assert_eq!(usage.input_tokens, 2_100, "{}: every token read", wire.name);
        assert_eq!(usage.cache_read_tokens, 2_000, "{}", wire.name);
        assert_eq!(usage.output_tokens, 3, "{}", wire.name);
        // 100 uncached at 3, 2,000 cached at 0.3, 3 out at 15, per million.
        let expected = (100.0 * 3.0 + 2_000.0 * 0.3 + 3.0 * 15.0) / 1_000_000.0;
        let cost = usage
            .cost
            .unwrap_or_else(|| panic!("{}: no cost", wire.name));
        assert!(
            (cost - expected).abs() < 1e-12,
            "{}: {cost} != {expected}",
            wire.name
        );

        if wire.cache_write {
            let server = FakeServer::start(vec![wire.stream("cache_write.sse")])
                .await
                .unwrap();
            let provider = (wire.provider)(server.base_url());
            let service = CompletionService::new(provider).with_prices(prices(&model));
            let usage = complete(&service, request(question())).await.usage;
            assert_eq!(usage.cache_write_tokens, 2_000, "{}", wire.name);
            assert_eq!(usage.input_tokens, 2_030, "{}", wire.name);
            let expected = (30.0 * 3.0 + 2_000.0 * 3.75 + 3.0 * 15.0) / 1_000_000.0;
            assert!(
                (usage.cost.unwrap() - expected).abs() < 1e-12,
                "{}",
                wire.name
            );
        }
    }
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_then_answered() {
    for wire in wires() {
        let limited = Reply::status_retry_after(
            429,
            1,
            r#"{"error":{"type":"rate_limit_error","message":"slow down","status":"RESOURCE_EXHAUSTED"}}"#,
        );
        let (server, service) = wire.serve(vec![limited, wire.stream("text.sse")]).await;
        let started = std::time::Instant::now();
        let response = complete(&service, request(question())).await;
        assert_eq!(response.text, "Hello, world.", "{}", wire.name);
        assert_eq!(server.requests().len(), 2, "{}", wire.name);
        // The server asked for a second; the client's own backoff here is 5 ms.
        assert!(
            started.elapsed() >= Duration::from_millis(900),
            "{}",
            wire.name
        );
    }
}

#[tokio::test]
async fn server_errors_are_retried_then_reported_with_the_servers_words() {
    for wire in wires() {
        let (server, service) = wire
            .serve(vec![Reply::status(503, "{}"), wire.stream("text.sse")])
            .await;
        let response = complete(&service, request(question())).await;
        assert_eq!(response.text, "Hello, world.", "{}", wire.name);
        assert_eq!(server.requests().len(), 2, "{}", wire.name);

        let failing = || {
            Reply::status(
                500,
                r#"{"error":{"type":"api_error","message":"the backend fell over","status":"INTERNAL"}}"#,
            )
        };
        let (server, service) = wire.serve(vec![failing(), failing(), failing()]).await;
        let error = service
            .complete_messages(request(question()), &mut |_| {})
            .await
            .unwrap_err();
        assert!(
            matches!(&error, ProviderError::Status { status: 500, message } if message.contains("the backend fell over")),
            "{}: {error}",
            wire.name
        );
        assert_eq!(
            server.requests().len(),
            3,
            "{}: the first try and two retries",
            wire.name
        );
    }
}

#[tokio::test]
async fn a_stream_that_stalls_ends_in_an_error_after_its_text() {
    for wire in wires() {
        let (_server, service) = wire
            .serve(vec![Reply::StallAfter(wire.fixture("text.sse"), 2)])
            .await;
        let mut deltas = String::new();
        let started = std::time::Instant::now();
        let error = service
            .complete_messages(request(question()), &mut |delta| deltas.push_str(delta))
            .await
            .unwrap_err();
        assert!(
            matches!(error, ProviderError::Stream(_)),
            "{}: {error}",
            wire.name
        );
        assert!(started.elapsed() < Duration::from_secs(10), "{}", wire.name);
        let _ = deltas;
    }
}

#[tokio::test]
async fn a_stream_cut_before_its_end_is_an_error() {
    for wire in wires() {
        let text = wire.fixture("text.sse");
        let cut: String = events(&text).into_iter().take(2).collect();
        let (_server, service) = wire.serve(vec![Reply::Stream(cut)]).await;
        let error = service
            .complete_messages(request(question()), &mut |_| {})
            .await
            .unwrap_err();
        assert!(
            matches!(error, ProviderError::Stream(_)),
            "{}: {error}",
            wire.name
        );
    }
}

#[tokio::test]
async fn cancelling_mid_stream_closes_the_connection() {
    for wire in wires() {
        let slow = Reply::Slow(wire.fixture("text.sse"), Duration::from_millis(50));
        let server = FakeServer::start(vec![slow]).await.unwrap();
        let provider = (wire.provider)(server.base_url());
        let mut stream = provider.stream(request(question())).await.unwrap();
        // Read until the first piece of text, then stop listening.
        while let Some(event) = stream.next().await {
            if matches!(event.unwrap(), agentic_core::ModelEvent::TextDelta(_)) {
                break;
            }
        }
        drop(stream);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while server.dropped_streams() == 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            server.dropped_streams(),
            1,
            "{}: the provider kept reading",
            wire.name
        );
    }
}

#[tokio::test]
async fn a_malformed_event_is_a_clear_error_after_what_came_before() {
    for wire in wires() {
        let (_server, service) = wire.serve(vec![wire.stream("malformed.sse")]).await;
        let mut deltas = String::new();
        let error = service
            .complete_messages(request(question()), &mut |delta| deltas.push_str(delta))
            .await
            .unwrap_err();
        assert_eq!(
            deltas, "Partial",
            "{}: what came first was delivered",
            wire.name
        );
        let message = error.to_string();
        assert!(
            matches!(error, ProviderError::Stream(_)) && message.contains("unreadable"),
            "{}: {message}",
            wire.name
        );
    }
}

#[tokio::test]
async fn every_provider_sends_its_key_where_its_api_reads_it() {
    for wire in wires() {
        let (server, service) = wire.serve(vec![wire.stream("text.sse")]).await;
        complete(&service, request(question())).await;
        let sent = only_request(&server);
        let key = match wire.name {
            "openai-chat" | "openai-responses" => sent.headers.get("authorization").cloned(),
            "anthropic" => sent.headers.get("x-api-key").cloned(),
            "gemini" => sent.headers.get("x-goog-api-key").cloned(),
            other => panic!("no key check for {other}"),
        };
        assert!(
            key.is_some_and(|key| key.contains("test-key")),
            "{}",
            wire.name
        );
    }
}

fn gemini() -> Wire {
    wires()
        .into_iter()
        .find(|wire| wire.name == "gemini")
        .unwrap()
}

#[tokio::test]
async fn gemini_safety_blocks_are_errors_that_say_why() {
    let wire = gemini();
    let (_server, service) = wire
        .serve(vec![
            wire.stream("safety.sse"),
            wire.stream("blocked_prompt.sse"),
        ])
        .await;
    let error = service
        .complete_messages(request(question()), &mut |_| {})
        .await
        .unwrap_err();
    assert!(error.to_string().contains("SAFETY"), "{error}");
    let error = service
        .complete_messages(request(question()), &mut |_| {})
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("refused the prompt (SAFETY)"),
        "{error}"
    );
}

#[tokio::test]
async fn gemini_requests_have_its_shape() {
    let wire = gemini();
    let (server, service) = wire.serve(vec![wire.stream("text.sse")]).await;
    let mut messages = question();
    let mut asked = ChatMessage::assistant("Let me look.");
    asked.tool_calls = vec![
        call(
            "agentic_call_1",
            "time.now",
            json!({ "timezone": "Asia/Tokyo" }),
        ),
        call("agentic_call_2", "fs.read", json!({ "path": "notes.txt" })),
    ];
    messages.push(asked);
    messages.push(ChatMessage::tool_result("agentic_call_1", "09:00"));
    messages.push(ChatMessage::tool_result("agentic_call_2", "buy milk"));
    complete(&service, request(messages)).await;
    let body = only_request(&server).body;
    assert_eq!(
        body["systemInstruction"],
        json!({ "parts": [{ "text": "You are a careful assistant." }] })
    );
    let roles: Vec<&str> = messages_roles(&body);
    // The two responses are one user turn: turns alternate.
    assert_eq!(roles, ["user", "model", "user"]);
    let responses = &body["contents"][2]["parts"];
    assert_eq!(
        responses[1]["functionResponse"],
        // Ids this provider made up are not sent; the name pairs the response with its call.
        json!({ "name": "fs_read", "response": { "output": "buy milk" } })
    );
    let declaration = &body["tools"][0]["functionDeclarations"][0];
    assert_eq!(declaration["name"], "time_now");
    assert_eq!(
        declaration["parametersJsonSchema"]["required"],
        json!(["timezone"])
    );
    assert_eq!(
        body["generationConfig"]["thinkingConfig"],
        json!({ "includeThoughts": true })
    );
}

fn messages_roles(body: &Value) -> Vec<&str> {
    messages(body, "contents")
        .map(|content| content["role"].as_str().unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn responses_requests_are_stateless_and_ask_for_encrypted_reasoning() {
    let wire = wires()
        .into_iter()
        .find(|wire| wire.name == "openai-responses")
        .unwrap();
    let (server, service) = wire.serve(vec![wire.stream("text.sse")]).await;
    let mut conversation = question();
    let mut asked = ChatMessage::assistant("Let me look.");
    asked.tool_calls = vec![call(
        "call_01",
        "time.now",
        json!({ "timezone": "Asia/Tokyo" }),
    )];
    conversation.push(asked);
    conversation.push(ChatMessage::tool_result("call_01", "09:00"));
    complete(&service, request(conversation)).await;
    let body = only_request(&server).body;
    assert_eq!(body["store"], false);
    assert_eq!(body["stream"], true);
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(body["instructions"], "You are a careful assistant.");
    let kinds: Vec<String> = messages(&body, "input")
        .map(|item| {
            item["type"]
                .as_str()
                .or(item["role"].as_str())
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(
        kinds,
        ["user", "assistant", "function_call", "function_call_output"]
    );
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["name"], "time_now");
}

//! The Anthropic provider against a real HTTP server on 127.0.0.1 that answers
//! `POST /v1/messages` with recorded event streams (`tests/fixtures/*.sse`, in the shape the
//! Messages API documents), error statuses and stalls.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentic_conformance::{FakeServer, Reply as Served};
use agentic_core::{
    ChatMessage, CompletionService, Config, ModelKind, ModelRequest, ProviderError,
    ToolCallRequest, ToolChoice, ToolSpec,
};
use agentic_plugin_anthropic::{AnthropicConfig, AnthropicProvider};
use serde_json::{Value, json};

/// One scripted answer, by fixture name.
#[derive(Debug, Clone)]
enum Reply {
    /// A recorded stream, sent in pieces that cut lines mid-way.
    Stream(&'static str),
    /// A recorded stream's first `n` events, then silence.
    StreamThenStall(&'static str, usize),
    Status {
        status: u16,
        headers: Vec<(&'static str, &'static str)>,
        body: &'static str,
    },
}

#[derive(Debug, Clone)]
struct Recorded {
    body: Value,
    api_key: Option<String>,
    version: Option<String>,
}

/// The conformance kit's server, answering with this crate's fixtures.
struct FakeAnthropic {
    base_url: String,
    server: FakeServer,
}

impl FakeAnthropic {
    async fn start(replies: Vec<Reply>) -> Self {
        let replies = replies
            .into_iter()
            .map(|reply| match reply {
                Reply::Stream(name) => Served::Stream(fixture(name)),
                Reply::StreamThenStall(name, events) => Served::StallAfter(fixture(name), events),
                Reply::Status {
                    status,
                    headers,
                    body,
                } => Served::Status {
                    status,
                    headers: headers
                        .into_iter()
                        .map(|(name, value)| (name.to_owned(), value.to_owned()))
                        .collect(),
                    body: body.to_owned(),
                },
            })
            .collect();
        let server = FakeServer::start(replies).await.unwrap();
        Self {
            base_url: server.base_url().to_owned(),
            server,
        }
    }

    fn requests(&self) -> Vec<Recorded> {
        self.server
            .requests()
            .into_iter()
            .map(|request| Recorded {
                api_key: request.headers.get("x-api-key").cloned(),
                version: request.headers.get("anthropic-version").cloned(),
                body: request.body,
            })
            .collect()
    }
}

fn fixture(name: &str) -> String {
    agentic_conformance::fixture(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"),
        name,
    )
}

fn settings(server: &FakeAnthropic) -> AnthropicConfig {
    let mut settings = AnthropicConfig::for_base_url(&server.base_url, "sk-ant-test");
    settings.retry_base_delay_ms = 10;
    settings.retry_max_delay_ms = 20;
    settings
}

fn service(settings: AnthropicConfig) -> CompletionService {
    CompletionService::new(Arc::new(AnthropicProvider::new(settings).unwrap()))
}

/// A first request: one question, no tools.
fn hi() -> ModelRequest {
    ModelRequest::new(ModelKind::Normal, vec![ChatMessage::user("Hi")])
}

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: format!("the {name} tool"),
        parameters: Arc::new(json!({ "type": "object", "properties": {} })),
    }
}

/// A second round of a prompt: the system prompt, the question, the model's two calls and
/// their results (one failed).
fn second_round() -> ModelRequest {
    let mut assistant = ChatMessage::assistant("Let me look.");
    assistant.tool_calls = vec![
        ToolCallRequest {
            id: "toolu_01".into(),
            name: "time.now".into(),
            arguments: r#"{"timezone":"Asia/Tokyo"}"#.into(),
        },
        ToolCallRequest {
            id: "toolu_02".into(),
            name: "fs.read".into(),
            arguments: r#"{"path":"notes.txt"}"#.into(),
        },
    ];
    let mut request = ModelRequest::new(
        ModelKind::Normal,
        vec![
            ChatMessage::system("Be brief."),
            ChatMessage::user("What time is it in Tokyo?"),
            assistant,
            ChatMessage::tool_result("toolu_01", r#"{"iso":"2026-11-27T09:00:00+09:00"}"#),
            ChatMessage::tool_error("toolu_02", "no such file: notes.txt"),
        ],
    );
    request.tools = vec![tool("time.now"), tool("fs.read")];
    request
}

#[tokio::test]
async fn streamed_text_arrives_in_pieces_with_usage_and_stop_reason() {
    let server = FakeAnthropic::start(vec![Reply::Stream("text.sse")]).await;
    let mut pieces = Vec::new();
    let response = service(settings(&server))
        .complete_messages(hi(), &mut |delta| pieces.push(delta.to_owned()))
        .await
        .unwrap();
    assert_eq!(response.text, "Hello there");
    assert!(pieces.len() >= 2, "text came whole: {pieces:?}");
    assert_eq!(response.finish_reason.as_deref(), Some("stop"));
    assert_eq!(response.usage.input_tokens, 25);
    assert_eq!(response.usage.output_tokens, 7);
    assert_eq!(
        response.usage.model.as_deref(),
        Some("claude-sonnet-4-5-20250929")
    );
    let sent = &server.requests()[0];
    assert_eq!(sent.api_key.as_deref(), Some("sk-ant-test"));
    assert_eq!(sent.version.as_deref(), Some("2023-06-01"));
    assert_eq!(sent.body["stream"], true);
    assert_eq!(sent.body["model"], "claude-sonnet-4-5");
    assert_eq!(sent.body["max_tokens"], 8192);
}

#[tokio::test]
async fn parallel_tool_calls_come_whole_with_their_dotted_names_and_cache_writes() {
    let server = FakeAnthropic::start(vec![Reply::Stream("tools.sse")]).await;
    let mut request = ModelRequest::new(
        ModelKind::Normal,
        vec![
            ChatMessage::system("Be brief."),
            ChatMessage::user("What time is it in Tokyo?"),
        ],
    );
    request.tools = vec![tool("time.now"), tool("fs.read")];
    let response = service(settings(&server))
        .complete_messages(request, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(response.text, "Let me look.");
    assert_eq!(
        response.tool_calls,
        vec![
            ToolCallRequest {
                id: "toolu_01".into(),
                name: "time.now".into(),
                arguments: r#"{"timezone": "Asia/Tokyo"}"#.into(),
            },
            ToolCallRequest {
                id: "toolu_02".into(),
                name: "fs.read".into(),
                arguments: r#"{"path": "notes.txt"}"#.into(),
            },
        ]
    );
    assert_eq!(response.finish_reason.as_deref(), Some("tool_calls"));
    // Every token read counts as input; the cache write is also given apart.
    assert_eq!(response.usage.input_tokens, 2_030);
    assert_eq!(response.usage.cache_write_tokens, 2_000);
    assert_eq!(response.usage.cache_read_tokens, 0);
    let sent = &server.requests()[0].body;
    // In the order offered, with names the API allows.
    assert_eq!(sent["tools"][0]["name"], "time_now");
    assert_eq!(sent["tools"][1]["name"], "fs_read");
    assert_eq!(sent["tools"][1]["input_schema"]["type"], "object");
}

#[tokio::test]
async fn a_second_round_alternates_turns_marks_errors_and_places_cache_breakpoints() {
    let server = FakeAnthropic::start(vec![Reply::Stream("cached.sse")]).await;
    service(settings(&server))
        .complete_messages(second_round(), &mut |_| {})
        .await
        .unwrap();
    let sent = &server.requests()[0].body;
    let ephemeral = json!({ "type": "ephemeral" });
    assert_eq!(
        sent["system"],
        json!([{ "type": "text", "text": "Be brief.", "cache_control": ephemeral }])
    );
    assert_eq!(sent["tools"][1]["cache_control"], ephemeral);
    assert!(sent["tools"][0].get("cache_control").is_none());
    assert_eq!(
        sent["messages"],
        json!([
            { "role": "user", "content": [{ "type": "text", "text": "What time is it in Tokyo?" }] },
            { "role": "assistant", "content": [
                { "type": "text", "text": "Let me look." },
                { "type": "tool_use", "id": "toolu_01", "name": "time_now",
                  "input": { "timezone": "Asia/Tokyo" } },
                { "type": "tool_use", "id": "toolu_02", "name": "fs_read",
                  "input": { "path": "notes.txt" } },
            ]},
            // Both results are one user turn; the failed one says so; the newest block is
            // the conversation's cache breakpoint.
            { "role": "user", "content": [
                { "type": "tool_result", "tool_use_id": "toolu_01",
                  "content": r#"{"iso":"2026-11-27T09:00:00+09:00"}"# },
                { "type": "tool_result", "tool_use_id": "toolu_02",
                  "content": "no such file: notes.txt", "is_error": true,
                  "cache_control": ephemeral },
            ]},
        ])
    );
}

#[tokio::test]
async fn cache_reads_are_counted_and_priced_as_cache_reads() {
    let server = FakeAnthropic::start(vec![Reply::Stream("cached.sse")]).await;
    let prices = Config::from_value(json!({ "prices": {
        "claude-sonnet-4-5": { "input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75 }
    }}))
    .prices()
    .unwrap();
    let response = service(settings(&server))
        .with_prices(prices)
        .complete_messages(second_round(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(response.text, "It is 9 in Tokyo.");
    assert_eq!(response.usage.input_tokens, 2_012);
    assert_eq!(response.usage.cache_read_tokens, 2_000);
    // 12 fresh tokens at 3.0, 2,000 cached at 0.3, 9 out at 15.0, per million.
    let cost = response.usage.cost.unwrap();
    let expected = (12.0 * 3.0 + 2_000.0 * 0.3 + 9.0 * 15.0) / 1e6;
    assert!((cost - expected).abs() < 1e-12, "{cost} vs {expected}");
}

#[tokio::test]
async fn caching_can_be_turned_off() {
    let server = FakeAnthropic::start(vec![Reply::Stream("cached.sse")]).await;
    let mut settings = settings(&server);
    settings.cache = false;
    service(settings)
        .complete_messages(second_round(), &mut |_| {})
        .await
        .unwrap();
    let sent = server.requests()[0].body.to_string();
    assert!(!sent.contains("cache_control"), "{sent}");
}

#[tokio::test]
async fn a_429_and_a_529_are_retried_as_the_server_asks() {
    let server = FakeAnthropic::start(vec![
        Reply::Status {
            status: 429,
            headers: vec![("retry-after", "0")],
            body: r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
        },
        Reply::Status {
            status: 529,
            headers: vec![],
            body: r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        },
        Reply::Stream("text.sse"),
    ])
    .await;
    let response = service(settings(&server))
        .complete_messages(hi(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(response.text, "Hello there");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn an_error_status_after_the_retries_says_what_the_server_said() {
    let overloaded = Reply::Status {
        status: 529,
        headers: vec![],
        body: r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    };
    let server =
        FakeAnthropic::start(vec![overloaded.clone(), overloaded.clone(), overloaded]).await;
    let error = service(settings(&server))
        .complete_messages(hi(), &mut |_| {})
        .await
        .unwrap_err();
    assert_eq!(
        error,
        ProviderError::Status {
            status: 529,
            message: "overloaded_error: Overloaded".into()
        }
    );
    assert_eq!(
        server.requests().len(),
        3,
        "the first attempt and two retries"
    );
    // A bad request is not retried.
    let server = FakeAnthropic::start(vec![Reply::Status {
        status: 400,
        headers: vec![],
        body: r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: required"}}"#,
    }])
    .await;
    let error = service(settings(&server))
        .complete_messages(hi(), &mut |_| {})
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("invalid_request_error: max_tokens: required"),
        "{error}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn broken_streams_are_errors_that_say_what_broke() {
    for (reply, says) in [
        (
            Reply::Stream("overloaded_mid_stream.sse"),
            "overloaded_error mid-stream: Overloaded",
        ),
        (Reply::Stream("cut.sse"), "no message_stop"),
        (Reply::Stream("malformed.sse"), "unreadable event"),
        (Reply::StreamThenStall("text.sse", 3), "the stream stalled"),
    ] {
        let server = FakeAnthropic::start(vec![reply.clone()]).await;
        let mut settings = settings(&server);
        settings.idle_timeout_ms = 400;
        let mut text = String::new();
        let error = service(settings)
            .complete_messages(hi(), &mut |delta| text.push_str(delta))
            .await
            .unwrap_err();
        assert!(
            error.to_string().contains(says),
            "{reply:?}: {error} (after {text:?})"
        );
        assert_eq!(
            server.requests().len(),
            1,
            "{reply:?}: a broken stream is not sent again"
        );
    }
}

#[tokio::test]
async fn without_a_key_the_request_is_not_sent_and_the_error_says_what_to_set() {
    let server = FakeAnthropic::start(vec![]).await;
    let mut settings = settings(&server);
    settings.api_key = None;
    let error = service(settings)
        .complete_messages(hi(), &mut |_| {})
        .await
        .unwrap_err();
    assert!(error.to_string().contains("ANTHROPIC_API_KEY"), "{error}");
    assert!(server.requests().is_empty());
}

/// The whole classic loop on the Anthropic provider: two parallel calls (one tool offered,
/// one not), their results sent back in one user turn with the failure marked, the answer,
/// and the prompt's usage with the cache figures summed.
#[tokio::test]
async fn a_classic_prompt_runs_its_tool_calls_and_answers() {
    let server = FakeAnthropic::start(vec![
        Reply::Stream("tools.sse"),
        Reply::Stream("cached.sse"),
    ])
    .await;
    let runtime = agentic_core::Runtime::builder()
        .provider(Arc::new(AnthropicProvider::new(settings(&server)).unwrap()))
        .plugin(agentic_plugin_time::create_plugin())
        .build()
        .await
        .unwrap();
    let prompt = runtime
        .prompts()
        .create_and_run(agentic_core::PromptOptions {
            user_id: "alice".into(),
            input: Some("What time is it in Tokyo?".into()),
            mode: Some("classic".into()),
            ..agentic_core::PromptOptions::default()
        })
        .await
        .unwrap();
    assert_eq!(prompt.state, agentic_core::PromptState::Completed);
    assert_eq!(prompt.text(), "Let me look.\n\nIt is 9 in Tokyo.");
    assert_eq!(prompt.usage.cache_write_tokens, 2_000);
    assert_eq!(prompt.usage.cache_read_tokens, 2_000);
    assert_eq!(prompt.usage.model_calls, 2);
    let second = &server.requests()[1].body;
    let results = second["messages"][2]["content"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{second}");
    assert_eq!(results[0]["tool_use_id"], "toolu_01");
    assert!(results[0].get("is_error").is_none(), "{second}");
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap()
            .contains("Asia/Tokyo"),
        "{second}"
    );
    assert_eq!(results[1]["tool_use_id"], "toolu_02");
    assert_eq!(
        results[1]["is_error"], true,
        "fs.read is not offered here: {second}"
    );
}

#[tokio::test]
async fn a_required_call_is_asked_as_any_tool_unless_thinking_is_on() {
    let server =
        FakeAnthropic::start(vec![Reply::Stream("text.sse"), Reply::Stream("text.sse")]).await;
    let mut required = second_round();
    required.tool_choice = ToolChoice::Required;
    service(settings(&server))
        .complete_messages(required.clone(), &mut |_| {})
        .await
        .unwrap();
    let mut thinking = settings(&server);
    thinking.thinking = Some(2_048);
    service(thinking)
        .complete_messages(required, &mut |_| {})
        .await
        .unwrap();
    let sent = server.requests();
    assert_eq!(sent[0].body["tool_choice"], json!({ "type": "any" }));
    // The API takes no choice but `auto` with thinking on.
    assert!(
        sent[1].body.get("tool_choice").is_none(),
        "{}",
        sent[1].body
    );
}

#[tokio::test]
async fn thinking_is_asked_for_with_room_to_answer_and_no_temperature() {
    let server = FakeAnthropic::start(vec![Reply::Stream("text.sse")]).await;
    let mut settings = settings(&server);
    settings.thinking = Some(2_048);
    settings.temperature = Some(0.2);
    service(settings)
        .complete_messages(hi(), &mut |_| {})
        .await
        .unwrap();
    let body = &server.requests()[0].body;
    assert_eq!(
        body["thinking"],
        json!({ "type": "enabled", "budget_tokens": 2048 })
    );
    // The API allows thinking only at its default temperature.
    assert!(body.get("temperature").is_none(), "{body}");
    assert!(body["max_tokens"].as_u64().unwrap() > 2_048, "{body}");
}

#[test]
fn a_thinking_budget_below_the_apis_minimum_is_refused_when_read() {
    let config = Config::from_value(json!({ "anthropic": { "apiKey": "k", "thinking": 100 } }));
    let error = AnthropicConfig::resolve(&config).unwrap_err();
    assert!(error.to_string().contains("at least 1024"), "{error}");
}

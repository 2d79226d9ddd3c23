//! The provider against a real HTTP server on 127.0.0.1 speaking the OpenAI wire format.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::Instant;

use agentic_core::{
    ChatMessage, CompletionService, Config, ModelKind, ModelRequest, Plugin, PrepareContext,
    PromptOptions, PromptOutput, PromptState, ProviderError, Runtime, ToolError, ToolResult,
    ToolSpec, define_tool,
};
use agentic_plugin_openai::{OpenAiConfig, OpenAiProvider};
use async_trait::async_trait;
use serde_json::json;
use support::{FakeOpenAi, Reply, finish_chunk, text_chunk, tool_chunk, usage_chunk};

fn completion(server: &FakeOpenAi, adjust: impl FnOnce(&mut OpenAiConfig)) -> CompletionService {
    let mut config = OpenAiConfig::for_base_url(&server.base_url);
    config.models.normal = "fake-normal".to_owned();
    adjust(&mut config);
    CompletionService::new(Arc::new(OpenAiProvider::new(config).unwrap()))
}

fn request() -> ModelRequest {
    let mut request = ModelRequest::new(
        ModelKind::Normal,
        vec![
            ChatMessage::system("Be brief."),
            ChatMessage::user("What time is it?"),
        ],
    );
    request.tools = vec![ToolSpec {
        name: "time.now".to_owned(),
        description: "Current time".to_owned(),
        parameters: json!({"type": "object", "properties": {"timezone": {"type": "string"}}})
            .into(),
    }];
    request
}

#[tokio::test]
async fn streamed_text_arrives_delta_by_delta() {
    let server = FakeOpenAi::start(vec![Reply::Sse(vec![
        text_chunk("Hel"),
        text_chunk("lo, "),
        text_chunk("world"),
        finish_chunk("stop"),
    ])])
    .await;
    let mut deltas = Vec::new();
    let response = completion(&server, |config| config.api_key = Some("sk-test".into()))
        .complete_messages(request(), &mut |delta| deltas.push(delta.to_owned()))
        .await
        .unwrap();
    assert_eq!(deltas, vec!["Hel", "lo, ", "world"]);
    assert_eq!(response.text, "Hello, world");
    assert!(response.tool_calls.is_empty());

    let sent = &server.requests()[0];
    assert_eq!(sent.authorization.as_deref(), Some("Bearer sk-test"));
    assert_eq!(sent.body["model"], "fake-normal");
    assert_eq!(sent.body["stream"], true);
    assert_eq!(sent.body["stream_options"]["include_usage"], true);
    assert_eq!(
        sent.body["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What time is it?"}
        ])
    );
    // Dotted ids go out as valid wire names.
    assert_eq!(sent.body["tools"][0]["function"]["name"], "time_now");
    assert_eq!(sent.body["tools"][0]["type"], "function");
}

#[tokio::test]
async fn tool_call_fragments_split_across_chunks_are_stitched() {
    let server = FakeOpenAi::start(vec![Reply::SseInPieces(
        vec![
            tool_chunk(0, Some("call_a"), Some("time_now"), ""),
            tool_chunk(0, None, None, "{\"time"),
            tool_chunk(1, Some("call_b"), Some("time_now"), "{}"),
            tool_chunk(0, None, None, "zone\": \"Europe/Oslo\"}"),
            finish_chunk("tool_calls"),
        ],
        // Seven-byte writes cut SSE lines and JSON in the middle.
        7,
    )])
    .await;
    let response = completion(&server, |_| {})
        .complete_messages(request(), &mut |_| {})
        .await
        .unwrap();
    let calls: Vec<(String, String, String)> = response
        .tool_calls
        .into_iter()
        .map(|call| (call.id, call.name, call.arguments))
        .collect();
    assert_eq!(
        calls,
        vec![
            (
                "call_a".to_owned(),
                "time.now".to_owned(),
                "{\"timezone\": \"Europe/Oslo\"}".to_owned()
            ),
            ("call_b".to_owned(), "time.now".to_owned(), "{}".to_owned()),
        ]
    );
}

#[tokio::test]
async fn the_usage_chunk_is_read() {
    let server = FakeOpenAi::start(vec![Reply::Sse(vec![
        text_chunk("Hi"),
        finish_chunk("stop"),
        usage_chunk(42, 7, 3),
    ])])
    .await;
    let response = completion(&server, |_| {})
        .complete_messages(request(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(response.usage.input_tokens, 42);
    assert_eq!(response.usage.output_tokens, 7);
    assert_eq!(response.usage.total_tokens, 49);
    assert_eq!(response.usage.reasoning_tokens, 3);
    assert_eq!(response.usage.model.as_deref(), Some("fake-model"));
}

#[tokio::test]
async fn cached_prompt_tokens_are_counted_and_priced_as_cache_reads() {
    let mut usage: serde_json::Value = serde_json::from_str(&usage_chunk(2_000, 100, 0)).unwrap();
    usage["usage"]["prompt_tokens_details"] = serde_json::json!({ "cached_tokens": 1_500 });
    let server = FakeOpenAi::start(vec![Reply::Sse(vec![
        text_chunk("Hi"),
        finish_chunk("stop"),
        usage.to_string(),
    ])])
    .await;
    let prices = agentic_core::Config::from_value(serde_json::json!({ "prices": {
        "fake-model": { "input": 1.0, "output": 4.0, "cacheRead": 0.1 }
    }}))
    .prices()
    .unwrap();
    let response = completion(&server, |_| {})
        .with_prices(prices)
        .complete_messages(request(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(response.usage.input_tokens, 2_000);
    assert_eq!(response.usage.cache_read_tokens, 1_500);
    assert_eq!(response.usage.cache_write_tokens, 0);
    // 500 fresh at 1.0, 1,500 cached at 0.1, 100 out at 4.0, per million.
    let cost = response.usage.cost.unwrap();
    assert!(
        (cost - (500.0 + 150.0 + 400.0) / 1e6).abs() < 1e-12,
        "{cost}"
    );
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_then_succeeds() {
    let server = FakeOpenAi::start(vec![
        Reply::Status {
            status: 429,
            headers: vec![("retry-after-ms", "300".to_owned())],
            body: r#"{"error":{"message":"Rate limit reached"}}"#.to_owned(),
        },
        Reply::Sse(vec![text_chunk("after the wait"), finish_chunk("stop")]),
    ])
    .await;
    let started = Instant::now();
    let response = completion(&server, |config| {
        // Our own backoff would be shorter than what the server asked for.
        config.retry_base_delay_ms = 1;
        config.retry_max_delay_ms = 1;
    })
    .complete_messages(request(), &mut |_| {})
    .await
    .unwrap();
    assert_eq!(response.text, "after the wait");
    assert_eq!(server.requests().len(), 2);
    // The server's 300 ms were honoured, not our 1 ms backoff.
    assert!(
        started.elapsed().as_millis() >= 300,
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn three_500s_end_in_an_error_after_two_retries() {
    let failure = || Reply::Status {
        status: 500,
        headers: vec![],
        body: r#"{"error":{"message":"upstream exploded"}}"#.to_owned(),
    };
    let server = FakeOpenAi::start(vec![failure(), failure(), failure(), failure()]).await;
    let error = completion(&server, |_| {})
        .complete_messages(request(), &mut |_| {})
        .await
        .unwrap_err();
    assert_eq!(
        error,
        ProviderError::Status {
            status: 500,
            message: "upstream exploded".to_owned()
        }
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_401_is_not_retried() {
    let server = FakeOpenAi::start(vec![Reply::Status {
        status: 401,
        headers: vec![],
        body: r#"{"error":{"message":"Incorrect API key provided"}}"#.to_owned(),
    }])
    .await;
    let error = completion(&server, |_| {})
        .complete_messages(request(), &mut |_| {})
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "model provider answered 401: Incorrect API key provided"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_stream_cut_mid_way_is_an_error() {
    let server = FakeOpenAi::start(vec![Reply::SseThenCut(vec![
        text_chunk("Half an "),
        text_chunk("answ"),
    ])])
    .await;
    let mut deltas = String::new();
    let error = completion(&server, |_| {})
        .complete_messages(request(), &mut |delta| deltas.push_str(delta))
        .await
        .unwrap_err();
    assert_eq!(deltas, "Half an answ");
    let ProviderError::Stream(message) = &error else {
        panic!("expected a stream error, got {error:?}")
    };
    assert!(
        message.starts_with("the connection broke mid-stream"),
        "{message}"
    );
}

#[tokio::test]
async fn a_stream_that_ends_without_finishing_is_an_error() {
    let server = FakeOpenAi::start(vec![Reply::Status {
        status: 200,
        headers: vec![("content-type", "text/event-stream".to_owned())],
        body: format!("data: {}\n\n", text_chunk("partial")),
    }])
    .await;
    let error = completion(&server, |_| {})
        .complete_messages(request(), &mut |_| {})
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "model stream failed: the stream ended before the model finished (no finish_reason and no [DONE])"
    );
}

#[tokio::test]
async fn a_stalled_stream_times_out() {
    let server = FakeOpenAi::start(vec![Reply::SseThenStall(vec![text_chunk("thinking")])]).await;
    let error = completion(&server, |config| config.idle_timeout_ms = 300)
        .complete_messages(request(), &mut |_| {})
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "model stream failed: the stream stalled: nothing arrived for 300 ms"
    );
}

/// Regression (issue 15): a server busy with a long prefill sends only `: ping` comments; they
/// are activity, so the idle timer does not end the stream.
#[tokio::test]
async fn sse_comments_keep_a_stream_alive() {
    let server = FakeOpenAi::start(vec![Reply::SsePingsThen(
        8,
        100,
        vec![text_chunk("Warm now."), finish_chunk("stop")],
    )])
    .await;
    let mut deltas = String::new();
    completion(&server, |config| config.idle_timeout_ms = 300)
        .complete_messages(request(), &mut |delta| deltas.push_str(delta))
        .await
        .unwrap();
    assert_eq!(deltas, "Warm now.");
}

#[tokio::test]
async fn a_server_that_does_not_stream_is_still_understood() {
    let body = json!({
        "id": "chatcmpl-2", "object": "chat.completion", "model": "plain-model",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "c9", "type": "function",
                "function": {"name": "time_now", "arguments": "{}"}}]}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    });
    let server = FakeOpenAi::start(vec![Reply::Status {
        status: 200,
        headers: vec![],
        body: body.to_string(),
    }])
    .await;
    let response = completion(&server, |_| {})
        .complete_messages(request(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(response.tool_calls[0].name, "time.now");
    assert_eq!(response.usage.total_tokens, 5);
}

#[tokio::test]
async fn an_unreachable_server_is_a_connection_error() {
    // Bind and drop to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config = OpenAiConfig::for_base_url(&format!("http://127.0.0.1:{port}/v1"));
    config.retry_base_delay_ms = 1;
    config.retry_max_delay_ms = 1;
    let error = CompletionService::new(Arc::new(OpenAiProvider::new(config).unwrap()))
        .complete_messages(request(), &mut |_| {})
        .await
        .unwrap_err();
    assert!(matches!(error, ProviderError::Connection(_)), "{error:?}");
}

/// A plugin with one tool, so a classic prompt has something to call.
struct Adder;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct AddInput {
    a: i64,
    b: i64,
}

#[async_trait]
impl Plugin for Adder {
    fn id(&self) -> &str {
        "math"
    }
    async fn prepare(&self, context: &mut PrepareContext) -> anyhow::Result<()> {
        context.add_tool(
            define_tool(
                "math.add",
                "Adds two integers",
                |_cx, input: AddInput| async move { Ok::<_, ToolError>(input.a + input.b) },
            )
            .into_arc(),
        );
        Ok(())
    }
}

#[tokio::test]
async fn a_classic_prompt_runs_end_to_end_and_malformed_arguments_reach_the_model() {
    let server = FakeOpenAi::start(vec![
        Reply::Sse(vec![
            tool_chunk(0, Some("call_bad"), Some("math_add"), "{\"a\": 1, \"b\": "),
            finish_chunk("tool_calls"),
            usage_chunk(50, 10, 0),
        ]),
        Reply::Sse(vec![
            tool_chunk(
                0,
                Some("call_good"),
                Some("math_add"),
                "{\"a\": 1, \"b\": 2}",
            ),
            finish_chunk("tool_calls"),
            usage_chunk(80, 10, 0),
        ]),
        Reply::Sse(vec![
            text_chunk("1 + 2 = 3"),
            finish_chunk("stop"),
            usage_chunk(100, 5, 0),
        ]),
    ])
    .await;
    let runtime = Runtime::builder()
        .config(Config::from_value(
            json!({"openai": {"baseUrl": server.base_url}}),
        ))
        .registered_plugins()
        .plugin(Arc::new(Adder))
        .provider_spec("openai")
        .build()
        .await
        .unwrap();
    let prompt = runtime
        .prompts()
        .create_and_run(PromptOptions {
            user_id: "alice".to_owned(),
            input: Some("What is 1 + 2?".to_owned()),
            ..PromptOptions::default()
        })
        .await
        .unwrap();

    assert_eq!(prompt.state, PromptState::Completed);
    let results: Vec<&ToolResult> = prompt
        .output
        .iter()
        .filter_map(|output| match output {
            PromptOutput::Tool(tool) => Some(&tool.result),
            _ => None,
        })
        .collect();
    let ToolResult::Error { error, .. } = results[0] else {
        panic!("malformed arguments should fail, got {:?}", results[0])
    };
    assert!(
        error.starts_with("invalid JSON in tool arguments"),
        "{error}"
    );
    assert_eq!(results[1], &ToolResult::Success { output: json!(3) });
    assert!(
        matches!(prompt.output.last(), Some(PromptOutput::Text(text)) if text.content == "1 + 2 = 3")
    );
    assert_eq!(prompt.usage.input_tokens, 230);
    assert_eq!(prompt.usage.model.as_deref(), Some("fake-model"));

    // The second request carries the failed call back, in the wire format of seed 004.
    let second = &server.requests()[1].body;
    let messages = second["messages"].as_array().unwrap();
    let assistant = &messages[messages.len() - 2];
    assert_eq!(assistant["role"], "assistant");
    // llama.cpp's chat templates fail on a missing `content` and answer 500 to `null`.
    assert_eq!(assistant["content"], "");
    assert_eq!(assistant["tool_calls"][0]["id"], "call_bad");
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "math_add");
    assert_eq!(
        assistant["tool_calls"][0]["function"]["arguments"],
        "{\"a\": 1, \"b\": "
    );
    let tool = &messages[messages.len() - 1];
    assert_eq!(tool["role"], "tool");
    assert_eq!(tool["tool_call_id"], "call_bad");
    assert!(
        tool["content"]
            .as_str()
            .unwrap()
            .starts_with("Error: invalid JSON in tool arguments"),
        "{tool}"
    );
}

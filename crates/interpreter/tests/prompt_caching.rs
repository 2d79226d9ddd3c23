//! Code mode against Anthropic's Messages API on a loopback server: the second model call of
//! a prompt reads the system prompt (code mode's declarations are in it) from the cache, and
//! the prompt's usage and cost say so.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentic_conformance::{FakeServer, Reply};
use agentic_core::{Config, PromptOptions, PromptState, Runtime};
use agentic_interpreter as _;
use agentic_plugin_anthropic::{AnthropicConfig, AnthropicProvider};
use agentic_testing::kit;
use serde_json::{Value, json};

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// A streamed answer whose text is `text`, with this usage.
fn answer(text: &str, input: u64, cache_write: u64, cache_read: u64) -> String {
    [
        event(
            "message_start",
            &json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                "role": "assistant", "content": [], "model": "claude-sonnet-4-5-20250929",
                "usage": {"input_tokens": input, "cache_creation_input_tokens": cache_write,
                    "cache_read_input_tokens": cache_read, "output_tokens": 1}}}),
        ),
        event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        ),
        event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": 0}),
        ),
        event(
            "message_delta",
            &json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 20}}),
        ),
        event("message_stop", &json!({"type": "message_stop"})),
    ]
    .concat()
}

#[tokio::test]
async fn the_second_call_of_a_code_prompt_reads_the_prefix_from_the_cache() {
    let server = FakeServer::start(vec![
        Reply::Stream(answer(
            r#"console.log(kitEcho({ text: "hi" }));"#,
            40,
            3_000,
            0,
        )),
        Reply::Stream(answer(r#"done("It said hi.");"#, 60, 0, 3_000)),
    ])
    .await
    .unwrap();
    let provider = Arc::new(
        AnthropicProvider::new(AnthropicConfig::for_base_url(
            server.base_url(),
            "sk-ant-test",
        ))
        .unwrap(),
    );
    let runtime = Runtime::builder()
        .config(Config::from_value(json!({ "prices": {
            "claude-sonnet-4-5": { "input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75 }
        }})))
        .registered_plugins()
        .plugin(kit::plugin())
        .provider(provider)
        .build()
        .await
        .unwrap();
    let prompt = runtime
        .prompts()
        .create_and_run(PromptOptions {
            user_id: "alice".into(),
            input: Some("Echo hi".into()),
            mode: Some("code".into()),
            ..PromptOptions::default()
        })
        .await
        .unwrap();
    assert_eq!(prompt.state, PromptState::Completed, "{:?}", prompt.error);
    assert_eq!(prompt.text(), "It said hi.");

    // Both calls marked the system prompt, code mode's tool declarations in it, cacheable.
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        let system = request.body["system"].as_array().unwrap();
        let last = system.last().unwrap();
        assert_eq!(last["cache_control"], json!({ "type": "ephemeral" }));
        assert!(last["text"].as_str().unwrap().contains("kit.echo"));
    }
    // The first call wrote the prefix, the second read it; the cost prices each.
    let usage = &prompt.usage;
    assert_eq!(usage.model_calls, 2);
    assert_eq!(usage.cache_write_tokens, 3_000);
    assert_eq!(usage.cache_read_tokens, 3_000);
    assert_eq!(usage.input_tokens, 40 + 3_000 + 60 + 3_000);
    let expected = (100.0 * 3.0 + 3_000.0 * 3.75 + 3_000.0 * 0.3 + 40.0 * 15.0) / 1_000_000.0;
    let cost = usage.cost.unwrap();
    assert!((cost - expected).abs() < 1e-12, "{cost} != {expected}");
    // With the cache, the prompt costs less than the same tokens read uncached.
    let uncached = (100.0 * 3.0 + 6_000.0 * 3.0 + 40.0 * 15.0) / 1_000_000.0;
    assert!(cost < uncached, "{cost} >= {uncached}");
}

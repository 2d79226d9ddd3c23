//! A real HTTP server on 127.0.0.1 that speaks the Chat Completions wire format, SSE
//! included, and answers from a queue of scripted replies.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

/// One scripted HTTP answer.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// An SSE stream of these `data:` payloads, each sent as its own write.
    Sse(Vec<String>),
    /// The SSE stream's bytes sent in pieces of this many bytes, cutting lines mid-way.
    SseInPieces(Vec<String>, usize),
    /// These payloads, then the connection drops without `[DONE]`.
    SseThenCut(Vec<String>),
    /// These payloads, then silence.
    SseThenStall(Vec<String>),
    /// `: ping` comments, this many at this interval in ms (a server in a long prefill, as
    /// llama.cpp's does), then the payloads.
    SsePingsThen(usize, u64, Vec<String>),
    Status {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub body: Value,
    pub authorization: Option<String>,
}

#[derive(Clone, Default)]
struct Shared {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

pub(crate) struct FakeOpenAi {
    pub base_url: String,
    shared: Shared,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeOpenAi {
    pub(crate) async fn start(replies: Vec<Reply>) -> Self {
        let shared = Shared::default();
        shared.replies.lock().unwrap().extend(replies);
        let app = Router::new()
            .route("/v1/chat/completions", post(answer))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            base_url: format!("http://{address}/v1"),
            shared,
            server,
        }
    }

    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }
}

async fn answer(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.requests.lock().unwrap().push(Recorded {
        body,
        authorization: headers
            .get("authorization")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned),
    });
    let reply = shared.replies.lock().unwrap().pop_front();
    match reply {
        None => status_reply(
            500,
            &[],
            r#"{"error":{"message":"fake server has no reply left"}}"#,
        ),
        Some(Reply::Status {
            status,
            headers,
            body,
        }) => status_reply(status, &headers, &body),
        Some(Reply::Sse(payloads)) => {
            let mut frames: Vec<String> = payloads.iter().map(|p| frame(p)).collect();
            frames.push(frame("[DONE]"));
            sse(futures::stream::iter(
                frames.into_iter().map(Ok::<_, Infallible>),
            ))
        }
        Some(Reply::SseInPieces(payloads, size)) => {
            let mut whole: String = payloads.iter().map(|p| frame(p)).collect();
            whole.push_str(&frame("[DONE]"));
            let pieces: Vec<Result<String, Infallible>> = whole
                .as_bytes()
                .chunks(size)
                .map(|piece| Ok(String::from_utf8_lossy(piece).into_owned()))
                .collect();
            sse(futures::stream::iter(pieces))
        }
        Some(Reply::SseThenCut(payloads)) => {
            let frames: Vec<String> = payloads.iter().map(|p| frame(p)).collect();
            // The pause lets the frames reach the client before the connection drops.
            let cut = futures::stream::iter(frames.into_iter().map(Ok::<_, std::io::Error>)).chain(
                futures::stream::once(async {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    Err(std::io::Error::other("cut"))
                }),
            );
            sse(cut)
        }
        Some(Reply::SsePingsThen(count, interval_ms, payloads)) => {
            let pings = futures::stream::iter(0..count).then(move |_| async move {
                tokio::time::sleep(Duration::from_millis(interval_ms)).await;
                Ok::<_, Infallible>(": ping\n\n".to_owned())
            });
            let mut frames: Vec<String> = payloads.iter().map(|p| frame(p)).collect();
            frames.push(frame("[DONE]"));
            sse(pings.chain(futures::stream::iter(
                frames.into_iter().map(Ok::<_, Infallible>),
            )))
        }
        Some(Reply::SseThenStall(payloads)) => {
            let frames: Vec<String> = payloads.iter().map(|p| frame(p)).collect();
            let stalled = futures::stream::iter(frames.into_iter().map(Ok::<_, Infallible>)).chain(
                futures::stream::once(async {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok(String::new())
                }),
            );
            sse(stalled)
        }
    }
}

use futures::StreamExt;

fn frame(payload: &str) -> String {
    format!("data: {payload}\n\n")
}

fn sse<S, E>(stream: S) -> Response
where
    S: futures::Stream<Item = Result<String, E>> + Send + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync>> + 'static,
{
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

fn status_reply(status: u16, headers: &[(&'static str, String)], body: &str) -> Response {
    let mut builder = Response::builder().status(StatusCode::from_u16(status).unwrap());
    if !headers.iter().any(|(name, _)| *name == "content-type") {
        builder = builder.header("content-type", "application/json");
    }
    for (name, value) in headers {
        builder = builder.header(*name, value);
    }
    builder.body(Body::from(body.to_owned())).unwrap()
}

/// A text delta chunk.
pub(crate) fn text_chunk(text: &str) -> String {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "fake-model",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": null}]})
    .to_string()
}

/// A chunk carrying one tool-call fragment.
pub(crate) fn tool_chunk(
    index: u64,
    id: Option<&str>,
    name: Option<&str>,
    arguments: &str,
) -> String {
    let mut function = json!({"arguments": arguments});
    if let Some(name) = name {
        function["name"] = json!(name);
    }
    let mut call = json!({"index": index, "type": "function", "function": function});
    if let Some(id) = id {
        call["id"] = json!(id);
    }
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "fake-model",
        "choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]})
    .to_string()
}

pub(crate) fn finish_chunk(reason: &str) -> String {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "fake-model",
        "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
    .to_string()
}

pub(crate) fn usage_chunk(prompt: u64, completion: u64, reasoning: u64) -> String {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "fake-model",
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "completion_tokens_details": {"reasoning_tokens": reasoning}}})
    .to_string()
}

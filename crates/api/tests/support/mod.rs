//! A real server on 127.0.0.1 over a SQLite file, with the kit tools, code mode (in-process
//! backend) and a scripted model; and a real HTTP client.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentic_api::ApiConfig;
use agentic_conversation::ConversationService;
use agentic_core::{Config, Runtime};
use agentic_plugin_script::ScriptedProvider;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::oneshot;

pub(crate) struct Server {
    pub base: String,
    pub client: reqwest::Client,
    pub db_url: String,
    pub provider: Arc<ScriptedProvider>,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    _dir: tempfile::TempDir,
}

pub(crate) async fn server(turns: &str) -> Server {
    server_with(turns, ApiConfig::default()).await
}

pub(crate) async fn server_with(turns: &str, api: ApiConfig) -> Server {
    start(turns, api, false, None).await
}

/// [`server`] whose event service keeps only `capacity` events for replay.
pub(crate) async fn server_with_event_capacity(turns: &str, capacity: usize) -> Server {
    start(turns, ApiConfig::default(), false, Some(capacity)).await
}

/// [`server`] with the fs plugin too, each user's files in their own directory under the
/// server's temporary directory, as `agentic serve` has it.
pub(crate) async fn server_with_files(turns: &str) -> Server {
    start(turns, ApiConfig::default(), true, None).await
}

async fn start(turns: &str, api: ApiConfig, files: bool, events: Option<usize>) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let db_url = agentic_conversation::sqlite_url(&dir.path().join("api.db"));
    let provider = Arc::new(ScriptedProvider::from_yaml(turns).unwrap());
    let mut config = json!({ "interpreter": { "sandbox": { "backend": "in-process" } } });
    if files {
        config["fs"] = json!({ "root": dir.path().join("files"), "perUser": true });
    }
    let mut builder = Runtime::builder()
        .config(Config::from_value(config))
        .plugin(agentic_testing::kit::plugin())
        .plugin(Arc::new(Slow))
        .plugin(Arc::new(agentic_interpreter::InterpreterPlugin::default()));
    if files {
        builder = builder.plugin(Arc::new(agentic_plugin_fs::FsPlugin::default()));
    }
    if let Some(capacity) = events {
        builder = builder.event_capacity(capacity);
    }
    let runtime = builder.provider(provider.clone()).build().await.unwrap();
    let service = ConversationService::open(Arc::new(runtime), &db_url)
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    let handle = tokio::spawn(agentic_api::serve(listener, service, api, async move {
        let _ = stopped.await;
    }));
    Server {
        base,
        client: reqwest::Client::new(),
        db_url,
        provider,
        stop: Some(stop),
        handle: Some(handle),
        _dir: dir,
    }
}

/// `slow.wait`: a tool that takes as long as it is told to, for prompts caught mid-call.
struct Slow;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Wait {
    ms: u64,
}

#[async_trait::async_trait]
impl agentic_core::Plugin for Slow {
    fn id(&self) -> &str {
        "slow"
    }

    async fn prepare(&self, context: &mut agentic_core::PrepareContext) -> anyhow::Result<()> {
        context.add_tool(
            agentic_core::define_tool(
                "slow.wait",
                "Waits this many milliseconds",
                |_cx, input: Wait| async move {
                    tokio::time::sleep(Duration::from_millis(input.ms)).await;
                    Ok::<_, agentic_core::ToolError>(format!("waited {} ms", input.ms))
                },
            )
            .into_arc(),
        );
        Ok(())
    }
}

/// Sends `request` and reads the answer as JSON, whatever its status.
pub(crate) async fn json_of(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

impl Server {
    pub(crate) fn get(&self, user: &str, path: &str) -> reqwest::RequestBuilder {
        self.client
            .get(format!("{}{path}", self.base))
            .header("x-user-id", user)
    }

    /// `GET path` as `user`, read as JSON.
    pub(crate) async fn get_json(&self, user: &str, path: &str) -> Value {
        json_of(self.get(user, path)).await
    }

    /// `POST path` with `body` as `user`, read as JSON.
    pub(crate) async fn post_json(&self, user: &str, path: &str, body: Value) -> Value {
        json_of(self.post(user, path, body)).await
    }

    pub(crate) fn post(&self, user: &str, path: &str, body: Value) -> reqwest::RequestBuilder {
        self.client
            .post(format!("{}{path}", self.base))
            .header("x-user-id", user)
            .json(&body)
    }

    pub(crate) fn patch(&self, user: &str, path: &str, body: Value) -> reqwest::RequestBuilder {
        self.client
            .patch(format!("{}{path}", self.base))
            .header("x-user-id", user)
            .json(&body)
    }

    pub(crate) fn delete(&self, user: &str, path: &str) -> reqwest::RequestBuilder {
        self.client
            .delete(format!("{}{path}", self.base))
            .header("x-user-id", user)
    }

    /// Starts a prompt; returns (promptId, conversationId).
    pub(crate) async fn prompt(&self, user: &str, body: Value) -> (String, String) {
        let response = self.post(user, "/api/prompt", body).send().await.unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        assert_eq!(status, 202, "{body}");
        (
            body["promptId"].as_str().unwrap().to_owned(),
            body["conversationId"].as_str().unwrap().to_owned(),
        )
    }

    /// Polls `GET /api/prompts/:id` until its state is one of `states`.
    pub(crate) async fn wait_for(&self, user: &str, prompt_id: &str, states: &[&str]) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let prompt = self
                .get_json(user, &format!("/api/prompts/{prompt_id}"))
                .await;
            if states.contains(&prompt["state"].as_str().unwrap_or_default()) {
                return prompt;
            }
            assert!(
                Instant::now() < deadline,
                "prompt never got to {states:?}: {prompt}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the server the way SIGTERM does and waits for it to finish.
    pub(crate) async fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(handle) = self.handle.take() {
            tokio::time::timeout(Duration::from_secs(30), handle)
                .await
                .expect("the server did not stop")
                .unwrap()
                .unwrap();
        }
    }
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sse {
    pub id: String,
    pub event: String,
    pub data: Value,
}

/// Reads events from `GET path` until `until` says stop (inclusive) or the stream ends.
pub(crate) async fn read_events(
    client: &reqwest::Client,
    base: &str,
    user: &str,
    path: &str,
    last_event_id: Option<&str>,
    mut until: impl FnMut(&Sse) -> bool,
) -> Vec<Sse> {
    let mut request = client
        .get(format!("{base}{path}"))
        .header("x-user-id", user);
    if let Some(id) = last_event_id {
        request = request.header("last-event-id", id);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let mut stream = eventsource_stream::EventStream::new(response.bytes_stream());
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while let Ok(Some(next)) = tokio::time::timeout_at(deadline, stream.next()).await {
        let event = next.unwrap();
        let sse = Sse {
            id: event.id,
            event: event.event,
            data: serde_json::from_str(&event.data).unwrap_or(Value::Null),
        };
        let stop = until(&sse);
        events.push(sse);
        if stop {
            break;
        }
    }
    events
}

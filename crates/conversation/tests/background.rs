#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Background services: registered by plugins in `setup()`, started over a conversation
//! service, stopped by cancellation, and aborted when they ignore it.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentic_conversation::background::CancellationToken;
use agentic_conversation::{
    BackgroundService, ConversationService, PromptRequest, register_background_service,
    start_background_services,
};
use agentic_core::{Plugin, PromptState, Runtime, SetupContext};
use agentic_plugin_script::{ScriptedProvider, Turn};
use async_trait::async_trait;
use support::databases;

/// Runs one prompt for user `bg` as soon as it starts, then waits to be stopped.
struct Greeter {
    seen: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl BackgroundService for Greeter {
    fn name(&self) -> &str {
        "test.greeter"
    }

    async fn run(&self, service: ConversationService, shutdown: CancellationToken) {
        let mut conversation = service.create("bg").await.unwrap();
        let prompt = conversation
            .prompt(PromptRequest {
                input: Some("Hello from the background".to_owned()),
                ..PromptRequest::default()
            })
            .await
            .unwrap();
        self.record(format!("prompt {:?}", prompt.state));
        shutdown.cancelled().await;
        self.record("stopped".to_owned());
    }
}

impl Greeter {
    fn record(&self, what: String) {
        self.seen.lock().unwrap().push(what);
    }
}

/// Never looks at its shutdown token.
struct Stubborn;

#[async_trait]
impl BackgroundService for Stubborn {
    fn name(&self) -> &str {
        "test.stubborn"
    }

    async fn run(&self, _service: ConversationService, _shutdown: CancellationToken) {
        std::future::pending::<()>().await;
    }
}

struct BackgroundPlugin(Arc<Mutex<Vec<String>>>);

#[async_trait]
impl Plugin for BackgroundPlugin {
    fn id(&self) -> &str {
        "background-test"
    }

    async fn setup(&self, context: &mut SetupContext<'_>) -> anyhow::Result<()> {
        register_background_service(
            context,
            Arc::new(Greeter {
                seen: self.0.clone(),
            }),
        );
        register_background_service(context, Arc::new(Stubborn));
        Ok(())
    }
}

#[tokio::test]
async fn registered_services_run_over_the_service_and_stop_when_told() {
    for db in databases().await {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let provider = ScriptedProvider::new(vec![Turn {
            text: Some("Hi.".to_owned()),
            ..Turn::default()
        }]);
        let runtime = Runtime::builder()
            .plugin(Arc::new(BackgroundPlugin(seen.clone())))
            .provider(Arc::new(provider))
            .build()
            .await
            .unwrap();
        let service = ConversationService::open(Arc::new(runtime), &db.url)
            .await
            .unwrap();

        let background = start_background_services(&service);
        assert_eq!(background.names(), ["test.greeter", "test.stubborn"]);
        for _ in 0..400 {
            if !seen.lock().unwrap().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The stubborn one holds `stop` for its grace, then is aborted.
        background.stop(Duration::from_millis(200)).await;
        assert_eq!(
            *seen.lock().unwrap(),
            ["prompt Completed", "stopped"],
            "{}",
            db.name
        );
        let conversations = service.list("bg").await.unwrap();
        assert_eq!(conversations.len(), 1, "{}", db.name);
        let prompts = service
            .get("bg", &conversations[0].id)
            .await
            .unwrap()
            .prompts()
            .await
            .unwrap();
        assert_eq!(prompts[0].prompt.state, PromptState::Completed);
    }
}

#[tokio::test]
async fn a_runtime_without_background_services_starts_none() {
    let db = databases().await.remove(0);
    let runtime = Runtime::builder()
        .provider(Arc::new(ScriptedProvider::new(Vec::new())))
        .build()
        .await
        .unwrap();
    let service = ConversationService::open(Arc::new(runtime), &db.url)
        .await
        .unwrap();
    let background = start_background_services(&service);
    assert!(background.names().is_empty());
    background.stop(Duration::from_millis(10)).await;
}

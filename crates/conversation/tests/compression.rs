#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Context compression, seen from the model's side: the messages it is sent before the history
//! passes its budget, the summary request, and the messages after, for a classic and a code
//! prompt. The same on SQLite and PostgreSQL.

mod support;

use std::sync::Arc;

use agentic_conversation::{
    ArchivedHistory, ArchivedPrompt, CompressionHook, ConversationService, PromptRequest,
    register_compression_hook,
};
use agentic_core::{ChatMessage, ModelRequest, Plugin, PromptState, SetupContext};
use serde::Serialize;
use support::{databases, kit_config, runtime_with_plugins, service_with};

#[derive(Debug, PartialEq, Serialize)]
struct Seen {
    /// The last prompt before compression.
    before: Vec<Message>,
    /// What the model is asked to summarise.
    summary_request: Vec<Message>,
    /// The first prompt after.
    after: Vec<Message>,
    /// Positions of the prompts now archived (still stored).
    archived: Vec<i64>,
    summary: Option<String>,
}

#[derive(Debug, PartialEq, Serialize)]
struct Message {
    role: String,
    content: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<String>,
}

fn messages(request: &ModelRequest, mode: &str) -> Vec<Message> {
    request
        .messages
        .iter()
        .enumerate()
        .map(|(index, message): (usize, &ChatMessage)| Message {
            role: format!("{:?}", message.role).to_lowercase(),
            // Code mode's own system prompt is snapshotted by the interpreter's tests.
            content: if index == 0 && mode == "code" {
                "[code-mode system prompt]".to_owned()
            } else {
                message.content.clone()
            },
            tool_calls: message
                .tool_calls
                .iter()
                .map(|call| format!("{} {}", call.name, call.arguments))
                .collect(),
        })
        .collect()
}

const ANSWER: &str = "Oslo is the capital of Norway, at the head of the Oslofjord, with \
about 700,000 people in the city proper and over a million in the wider urban area today.";

async fn run(mode: &str) -> Vec<(String, Seen)> {
    let mut all = Vec::new();
    for db in databases().await {
        let last = if mode == "code" {
            "- code: |\n    output(\"Bergen, Trondheim and Stavanger.\");\n    done();\n".to_owned()
        } else {
            "- text: Bergen, Trondheim and Stavanger.\n".to_owned()
        };
        let turns = format!(
            "- text: \"{ANSWER}\"\n\
             - toolCalls:\n    - {{ name: kit.echo, input: {{ text: fjord }} }}\n\
             - text: \"The echo said fjord. {ANSWER}\"\n\
             - text: \"{ANSWER}\"\n\
             - text: The user asked about Oslo, its size and a fjord echo.\n\
             {last}"
        );
        let config = kit_config(serde_json::json!({
            "conversation": { "contextWindow": 240, "compressAt": 0.5, "keepRecent": 2 }
        }));
        let (service, provider) = service_with(&db, &turns, config).await;
        let mut conversation = service.create("alice").await.unwrap();
        for input in [
            "Tell me about Oslo",
            "Echo fjord, then tell me again",
            "Once more",
        ] {
            let prompt = conversation
                .prompt(PromptRequest {
                    input: Some(input.into()),
                    ..PromptRequest::default()
                })
                .await
                .unwrap();
            assert_eq!(prompt.state, PromptState::Completed);
        }
        let before_count = provider.requests().len();
        let prompt = conversation
            .prompt(PromptRequest {
                input: Some("Which other cities are large?".into()),
                mode: Some(mode.to_owned()),
                ..PromptRequest::default()
            })
            .await
            .unwrap();
        assert_eq!(prompt.state, PromptState::Completed, "{:?}", prompt.error);
        let requests = provider.requests();
        assert_eq!(
            requests.len(),
            before_count + 2,
            "{}: one summary request, then the prompt",
            db.name
        );
        let stored = conversation.prompts().await.unwrap();
        assert_eq!(stored.len(), 4, "nothing is deleted");
        let seen = Seen {
            before: messages(&requests[before_count - 1], "classic"),
            summary_request: messages(&requests[before_count], "classic"),
            after: messages(&requests[before_count + 1], mode),
            archived: stored
                .iter()
                .filter(|stored| stored.archived)
                .map(|stored| stored.position)
                .collect(),
            summary: service
                .get("alice", conversation.id())
                .await
                .unwrap()
                .conversation()
                .summary
                .clone(),
        };
        all.push((db.name.to_owned(), seen));
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_history_is_compressed_past_the_budget() {
    let seen = run("classic").await;
    insta::assert_yaml_snapshot!("classic", seen[0].1);
    for (name, other) in &seen[1..] {
        assert_eq!(other, &seen[0].1, "{name} differs from sqlite");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_history_is_compressed_the_same_way() {
    let seen = run("code").await;
    insta::assert_yaml_snapshot!("code", seen[0].1);
    for (name, other) in &seen[1..] {
        assert_eq!(other, &seen[0].1, "{name} differs from sqlite");
    }
}

/// Records what compression hands its hooks.
#[derive(Default)]
struct Recorder {
    seen: std::sync::Mutex<Vec<ArchivedHistory>>,
}

#[async_trait::async_trait]
impl CompressionHook for Recorder {
    async fn archived(&self, archived: &ArchivedHistory) -> anyhow::Result<()> {
        self.seen.lock().unwrap().push(archived.clone());
        Ok(())
    }
}

struct Failing;

#[async_trait::async_trait]
impl CompressionHook for Failing {
    async fn archived(&self, _archived: &ArchivedHistory) -> anyhow::Result<()> {
        anyhow::bail!("this hook always fails")
    }
}

/// Registers a failing hook, then the recorder, from `setup()`, as a plugin would.
struct HookPlugin(Arc<Recorder>);

#[async_trait::async_trait]
impl Plugin for HookPlugin {
    fn id(&self) -> &str {
        "hooks"
    }

    async fn setup(&self, context: &mut SetupContext<'_>) -> anyhow::Result<()> {
        register_compression_hook(context, Arc::new(Failing));
        register_compression_hook(context, self.0.clone());
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_get_the_archived_prompts_and_a_failing_hook_changes_nothing() {
    for db in databases().await {
        let recorder = Arc::new(Recorder::default());
        let turns = format!(
            "- text: \"{ANSWER}\"\n\
             - text: \"Again: {ANSWER}\"\n\
             - text: \"Once more: {ANSWER}\"\n\
             - text: The user asked about Oslo three times.\n\
             - text: Bergen.\n"
        );
        let config = kit_config(serde_json::json!({
            "conversation": { "contextWindow": 200, "compressAt": 0.5, "keepRecent": 2 }
        }));
        let (runtime, provider) =
            runtime_with_plugins(&turns, config, vec![Arc::new(HookPlugin(recorder.clone()))])
                .await;
        let service = ConversationService::open(runtime, &db.url).await.unwrap();
        let mut conversation = service.create("alice").await.unwrap();
        for input in [
            "Tell me about Oslo",
            "Again",
            "Once more",
            "Which other city?",
        ] {
            let prompt = conversation
                .prompt(PromptRequest {
                    input: Some(input.into()),
                    ..PromptRequest::default()
                })
                .await
                .unwrap();
            assert_eq!(prompt.state, PromptState::Completed, "{}", db.name);
        }
        assert_eq!(provider.requests().len(), 5, "{}: one summary", db.name);
        let stored = conversation.prompts().await.unwrap();
        let archived: Vec<String> = stored
            .iter()
            .filter(|stored| stored.archived)
            .map(|stored| stored.prompt.id.clone())
            .collect();
        let seen = recorder.seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![ArchivedHistory {
                user_id: "alice".into(),
                conversation_id: conversation.id().to_owned(),
                summary: "The user asked about Oslo three times.".into(),
                prompts: vec![ArchivedPrompt {
                    prompt_id: archived[0].clone(),
                    text: format!("User: Tell me about Oslo\nAssistant: {ANSWER}\n"),
                }],
            }],
            "{}",
            db.name
        );
    }
}

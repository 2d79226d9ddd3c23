#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Conversations end to end on SQLite and PostgreSQL: history, titles, ownership, the busy
//! rule, restarts (running, waiting in classic; waiting in code is `durable_code.rs`), concurrent writers and
//! plugin migrations.

mod support;

use std::sync::Arc;

use agentic_conversation::{
    ConversationError, ConversationService, PromptRequest, register_migrations,
    sea_orm_migration::{MigrationName, MigrationTrait, SchemaManager},
};
use agentic_core::{
    ChatRole, ModelKind, Plugin, Prompt, PromptChange, PromptOutput, PromptState, Runtime,
    SetupContext, ToolResult,
};
use async_trait::async_trait;
use sea_orm::{ConnectionTrait, Statement};
use support::{databases, kit_config, runtime, service, store};

fn request(input: &str, mode: &str) -> PromptRequest {
    PromptRequest {
        input: Some(input.to_owned()),
        mode: Some(mode.to_owned()),
        ..PromptRequest::default()
    }
}

fn tool_results(prompt: &Prompt) -> Vec<(String, ToolResult)> {
    prompt
        .output
        .iter()
        .filter_map(|output| match output {
            PromptOutput::Tool(tool) => Some((tool.function.clone(), tool.result.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_persist_with_mixed_mode_history_titles_and_owners() {
    for db in databases().await {
        let turns = r#"
- toolCalls:
    - { name: kit.add, input: { a: 2, b: 3 } }
- text: The sum is 5.
- code: |
    const r = kitAdd({ a: 5, b: 10 });
    output(`Now ${r}.`);
    done();
"#;
        let (service, provider) = service(&db, turns).await;
        let mut conversation = service.create("alice").await.unwrap();
        let first = conversation
            .prompt(request(
                "What is 2 + 3? Please show your working.",
                "classic",
            ))
            .await
            .unwrap();
        assert_eq!(first.state, PromptState::Completed, "{}", db.name);
        let second = conversation
            .prompt(request("And add 10 to it", "code"))
            .await
            .unwrap();
        assert_eq!(
            second.state,
            PromptState::Completed,
            "{}: {:?}",
            db.name,
            second.error
        );

        // The code prompt saw the classic one (compactly, tool result included).
        let requests = provider.requests();
        let code_request = &requests[2];
        let history: Vec<&str> = code_request
            .messages
            .iter()
            .map(|message| message.content.as_str())
            .collect();
        assert!(
            history.iter().any(|text| text.contains("What is 2 + 3?")),
            "{}: {history:#?}",
            db.name
        );
        assert!(
            history
                .iter()
                .any(|text| text.contains("kit.add") && text.contains('5')),
            "{}: {history:#?}",
            db.name
        );

        // Stored as it ran, in order, and readable by a fresh service over the same database.
        drop(service);
        let (service, _) = support::service(&db, "[]").await;
        let loaded = service.get("alice", conversation.id()).await.unwrap();
        assert_eq!(
            loaded.conversation().title,
            "What is 2 + 3? Please show your working."
        );
        let prompts = loaded.prompts().await.unwrap();
        assert_eq!(prompts.len(), 2);
        assert_eq!(prompts[0].prompt, first, "{}", db.name);
        assert_eq!(prompts[1].prompt, second, "{}", db.name);
        assert_eq!(prompts[1].prompt.mode, "code");
        assert_eq!(
            service.prompt("alice", &second.id).await.unwrap().prompt,
            second
        );

        // Another user sees none of it.
        assert!(matches!(
            service.get("mallory", conversation.id()).await,
            Err(ConversationError::NotFound(_))
        ));
        assert!(matches!(
            service.prompt("mallory", &second.id).await,
            Err(ConversationError::PromptNotFound(_))
        ));
        assert!(service.list("mallory").await.unwrap().is_empty());
        assert!(matches!(
            service.delete("mallory", conversation.id()).await,
            Err(ConversationError::NotFound(_))
        ));
        let listed = service.list("alice").await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].id, conversation.id());

        // A title set by something better sticks.
        let mut loaded = loaded;
        loaded.set_title("Arithmetic").await.unwrap();
        assert_eq!(
            service
                .get("alice", conversation.id())
                .await
                .unwrap()
                .conversation()
                .title,
            "Arithmetic"
        );

        service.delete("alice", conversation.id()).await.unwrap();
        assert!(service.list("alice").await.unwrap().is_empty());
        assert!(matches!(
            service.prompt("alice", &second.id).await,
            Err(ConversationError::PromptNotFound(_))
        ));
        let _ = conversation.id();
        conversation = service.create("alice").await.unwrap();
        assert_eq!(conversation.conversation().title, "New conversation");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_is_carried_between_prompts() {
    for db in databases().await {
        let (service, _) = service(&db, "- text: one\n- text: two\n").await;
        let mut conversation = service.create("alice").await.unwrap();
        let mut first = request("hi", "classic");
        first.state = Some(serde_json::Map::from_iter([(
            "city".to_owned(),
            serde_json::json!("Oslo"),
        )]));
        conversation.prompt(first).await.unwrap();
        let stored = service
            .store()
            .conversation("alice", conversation.id())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            stored.state.get("city"),
            Some(&serde_json::json!("Oslo")),
            "{}",
            db.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_prompt_in_a_busy_conversation_gets_a_clear_error() {
    for db in databases().await {
        let turns = "- { text: slow answer, delayMs: 600 }\n- text: next\n";
        let (service, _) = service(&db, turns).await;
        let mut conversation = service.create("alice").await.unwrap();
        let started = conversation
            .start(request("first", "classic"))
            .await
            .unwrap();
        let first_id = started.prompt_id().to_owned();
        let running = tokio::spawn(started.run());

        let mut again = service.get("alice", conversation.id()).await.unwrap();
        let error = again.start(request("second", "classic")).await.unwrap_err();
        match &error {
            ConversationError::Busy { prompt_id, .. } => assert_eq!(prompt_id, &first_id),
            other => panic!("{}: expected busy, got {other:?}", db.name),
        }
        assert!(error.to_string().contains("is busy"), "{error}");
        // Deleting a conversation whose prompt runs is refused the same way.
        assert!(matches!(
            service.delete("alice", conversation.id()).await,
            Err(ConversationError::Busy { .. })
        ));

        let first = running.await.unwrap().unwrap();
        assert_eq!(first.state, PromptState::Completed);
        let second = again.prompt(request("second", "classic")).await.unwrap();
        assert_eq!(second.state, PromptState::Completed, "{}", db.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_waiting_for_approval_survives_a_restart_and_completes_when_approved() {
    for db in databases().await {
        let turns =
            "- toolCalls:\n    - { id: call_del, name: kit.delete, input: { path: notes.txt } }\n";
        let (service, _) = service(&db, turns).await;
        let mut conversation = service.create("alice").await.unwrap();
        let waiting = conversation
            .prompt(request("Delete notes.txt", "classic"))
            .await
            .unwrap();
        assert_eq!(waiting.state, PromptState::WaitingForApproval);
        let conversation_id = conversation.id().to_owned();
        drop(conversation);
        // The process stops (SIGKILL is the crash test's business) ...
        assert!(service.shutdown().await.unwrap().is_empty(), "{}", db.name);
        drop(service);

        // ... and a new one starts: new runtime, new service, same database.
        let (service, provider) = support::service(&db, "- text: Deleted it.\n").await;
        assert_eq!(
            service.recovery().waiting,
            vec![waiting.id.clone()],
            "{}",
            db.name
        );
        assert!(service.recovery().interrupted.is_empty());
        let stored = service.prompt("alice", &waiting.id).await.unwrap();
        assert_eq!(stored.prompt.state, PromptState::WaitingForApproval);

        // Still busy until decided.
        let mut again = service.get("alice", &conversation_id).await.unwrap();
        assert!(matches!(
            again.start(request("next", "classic")).await,
            Err(ConversationError::Busy { .. })
        ));
        // Someone else cannot approve it.
        assert!(matches!(
            service
                .decide(
                    "mallory",
                    &waiting.id,
                    "call_del",
                    agentic_core::Verdict::Approve
                )
                .await,
            Err(ConversationError::PromptNotFound(_))
        ));

        let done = service
            .decide(
                "alice",
                &waiting.id,
                "call_del",
                agentic_core::Verdict::Approve,
            )
            .await
            .unwrap();
        assert_eq!(
            done.state,
            PromptState::Completed,
            "{}: {:?}",
            db.name,
            done.error
        );
        assert_eq!(
            tool_results(&done),
            vec![(
                "kit.delete".to_owned(),
                ToolResult::Success {
                    output: serde_json::json!("deleted notes.txt")
                }
            )]
        );
        // The model was asked to go on with the tool's result in its messages.
        let resumed = &provider.requests()[0];
        assert!(
            resumed
                .messages
                .iter()
                .any(|message| message.role == ChatRole::Tool
                    && message.content.contains("deleted notes.txt")),
            "{}: {:#?}",
            db.name,
            resumed.messages
        );
        assert_eq!(
            service.prompt("alice", &waiting.id).await.unwrap().prompt,
            done
        );
        // And the conversation is free again.
        let (service, _) = support::service(&db, "- text: hello again\n").await;
        let mut again = service.get("alice", &conversation_id).await.unwrap();
        let next = again.prompt(request("next", "classic")).await.unwrap();
        assert_eq!(next.state, PromptState::Completed);
    }
}

/// A cancel stored for a running prompt whose process then died (sent to another server,
/// which stored it and could not reach the owner) is not dropped: the sweep that finds the
/// prompt ends it cancelled, as asked, instead of interrupted to be continued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_stored_before_the_owner_died_is_applied_by_the_sweep() {
    use sea_orm::ConnectionTrait as _;
    for db in databases().await {
        let prompt_id = {
            let store = agentic_conversation::Store::open(&db.url, &Default::default())
                .await
                .unwrap();
            let conversation = store.create_conversation("alice", "t").await.unwrap();
            let prompt = Prompt::new("alice", "classic", ModelKind::Normal, Some("go".into()));
            store
                .insert_prompt(&conversation.id, &prompt)
                .await
                .unwrap();
            assert!(
                store
                    .claim(&conversation.id, &prompt.id)
                    .await
                    .unwrap()
                    .is_ok()
            );
            let insert = sea_orm::Statement::from_sql_and_values(
                store.connection().get_database_backend(),
                match store.connection().get_database_backend() {
                    sea_orm::DatabaseBackend::Postgres => {
                        "INSERT INTO prompt_decisions (id, prompt_id, user_id, tool_call_id, verdict, created_at) VALUES ($1, $2, $3, $4, $5, $6)"
                    }
                    _ => {
                        "INSERT INTO prompt_decisions (id, prompt_id, user_id, tool_call_id, verdict, created_at) VALUES (?, ?, ?, ?, ?, ?)"
                    }
                },
                [
                    "decision-1".into(),
                    prompt.id.clone().into(),
                    "alice".into(),
                    "".into(),
                    r#"{"type":"cancel"}"#.into(),
                    chrono::Utc::now().into(),
                ],
            );
            store.connection().execute_raw(insert).await.unwrap();
            store.close().await.unwrap();
            prompt.id
        };
        let (service, _) = support::service(&db, "- text: fine\n").await;
        assert!(service.recovery().interrupted.is_empty(), "{}", db.name);
        let cancelled: Vec<&str> = service
            .recovery()
            .cancelled
            .iter()
            .map(|(_, id, _)| id.as_str())
            .collect();
        assert_eq!(cancelled, [prompt_id.as_str()], "{}", db.name);
        let stored = service.prompt("alice", &prompt_id).await.unwrap();
        assert_eq!(stored.prompt.state, PromptState::Cancelled, "{}", db.name);
        // The cancel was applied once: a second sweep finds nothing, and the conversation
        // takes the next prompt.
        let mut conversation = service.get("alice", &stored.conversation_id).await.unwrap();
        let next = conversation
            .prompt(request("next", "classic"))
            .await
            .unwrap();
        assert_eq!(next.state, PromptState::Completed, "{}", db.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_prompt_found_at_startup_is_interrupted_and_the_conversation_goes_on() {
    for db in databases().await {
        // What a killed process leaves: a running prompt, one finished tool, one pending.
        {
            let store = agentic_conversation::Store::open(&db.url, &Default::default())
                .await
                .unwrap();
            let conversation = store.create_conversation("alice", "t").await.unwrap();
            let mut prompt = Prompt::new("alice", "classic", ModelKind::Normal, Some("go".into()));
            store
                .insert_prompt(&conversation.id, &prompt)
                .await
                .unwrap();
            assert!(
                store
                    .claim(&conversation.id, &prompt.id)
                    .await
                    .unwrap()
                    .is_ok()
            );
            for (index, (id, result)) in [
                (
                    "call_a",
                    ToolResult::Success {
                        output: serde_json::json!("a done"),
                    },
                ),
                ("call_b", ToolResult::pending("")),
            ]
            .into_iter()
            .enumerate()
            {
                prompt
                    .output
                    .push(PromptOutput::Tool(agentic_core::ToolOutput {
                        id: id.into(),
                        function: "kit.echo".into(),
                        input: serde_json::json!({ "text": id }),
                        result,
                        start: chrono::Utc::now(),
                        end: None,
                        decision: None,
                    }));
                store
                    .save_prompt(&prompt, PromptChange::Output(index))
                    .await
                    .unwrap();
            }
            store.close().await.unwrap();
        }
        let (service, provider) = support::service(&db, "- text: fine\n").await;
        let interrupted = service.recovery().interrupted.clone();
        assert_eq!(interrupted.len(), 1, "{}", db.name);
        let stored = service.prompt("alice", &interrupted[0]).await.unwrap();
        assert_eq!(stored.prompt.state, PromptState::Interrupted);
        assert!(
            stored
                .prompt
                .error
                .as_deref()
                .unwrap()
                .contains("interrupted")
        );
        let results = tool_results(&stored.prompt);
        assert_eq!(
            results[0].1,
            ToolResult::Success {
                output: serde_json::json!("a done")
            }
        );
        assert!(
            matches!(&results[1].1, ToolResult::Error { error, .. } if error.contains("Interrupted"))
        );

        let mut conversation = service.get("alice", &stored.conversation_id).await.unwrap();
        let next = conversation
            .prompt(request("again", "classic"))
            .await
            .unwrap();
        assert_eq!(next.state, PromptState::Completed, "{}", db.name);
        // The model sees a valid history: every call has its result.
        let messages = &provider.requests()[0].messages;
        let calls: usize = messages
            .iter()
            .map(|message| message.tool_calls.len())
            .sum();
        let results = messages
            .iter()
            .filter(|message| message.role == ChatRole::Tool)
            .count();
        assert_eq!(calls, 2);
        assert_eq!(results, 2);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_writers_with_their_own_connections_all_commit() {
    for db in databases().await {
        // Migrate once, then 16 independent services (16 pools, as 16 processes would have).
        drop(support::service(&db, "[]").await);
        let mut tasks = Vec::new();
        for writer in 0..16 {
            let url = db.url.clone();
            tasks.push(tokio::spawn(async move {
                let mut turns = String::new();
                for round in 0..4 {
                    turns.push_str(&format!(
                        "- toolCalls:\n    - {{ name: kit.echo, input: {{ text: w{writer}r{round} }} }}\n- text: done {round}\n"
                    ));
                }
                let (runtime, _) = runtime(&turns, kit_config(serde_json::json!({}))).await;
                let service = ConversationService::open(runtime, &url).await.unwrap();
                let mut conversation = service.create(&format!("user{writer}")).await.unwrap();
                for round in 0..4 {
                    let prompt = conversation
                        .prompt(request(&format!("echo {round}"), "classic"))
                        .await
                        .unwrap();
                    assert_eq!(prompt.state, PromptState::Completed);
                }
                conversation.id().to_owned()
            }));
        }
        let mut ids = Vec::new();
        for task in tasks {
            ids.push(task.await.unwrap());
        }
        let store = store(&db).await;
        for (writer, id) in ids.iter().enumerate() {
            let prompts = store.conversation_prompts(id).await.unwrap();
            assert_eq!(prompts.len(), 4, "{} writer {writer}", db.name);
            for (position, stored) in prompts.iter().enumerate() {
                assert_eq!(stored.position, position as i64);
                assert_eq!(
                    stored.prompt.output.len(),
                    2,
                    "{} writer {writer}: {:#?}",
                    db.name,
                    stored.prompt
                );
            }
        }
        assert_eq!(store.integrity_check().await.unwrap(), "ok");
    }
}

struct NotesPlugin;

struct CreateNotes;

impl MigrationName for CreateNotes {
    fn name(&self) -> &str {
        "0001_notes"
    }
}

#[async_trait]
impl MigrationTrait for CreateNotes {
    async fn up(&self, manager: &SchemaManager) -> Result<(), sea_orm::DbErr> {
        manager
            .get_connection()
            .execute_unprepared("CREATE TABLE notes (id VARCHAR(64) PRIMARY KEY, body TEXT)")
            .await
            .map(|_| ())
    }
}

#[async_trait]
impl Plugin for NotesPlugin {
    fn id(&self) -> &str {
        "notes"
    }

    async fn setup(&self, context: &mut SetupContext<'_>) -> anyhow::Result<()> {
        register_migrations(context, "notes", vec![Arc::new(CreateNotes)]);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_migrations_run_once_at_startup() {
    for db in databases().await {
        for _ in 0..2 {
            let runtime = Runtime::builder()
                .plugin(Arc::new(NotesPlugin))
                .build()
                .await
                .unwrap();
            let service = ConversationService::open(Arc::new(runtime), &db.url)
                .await
                .unwrap();
            let connection = service.store().connection();
            connection
                .execute_unprepared(
                    "INSERT INTO notes (id, body) VALUES ('x', 'y') ON CONFLICT DO NOTHING",
                )
                .await
                .unwrap();
            let rows = connection
                .query_all_raw(Statement::from_string(
                    connection.get_database_backend(),
                    "SELECT name FROM agentic_migrations ORDER BY name",
                ))
                .await
                .unwrap();
            let names: Vec<String> = rows
                .iter()
                .map(|row| row.try_get_by_index::<String>(0).unwrap())
                .collect();
            assert_eq!(
                names,
                vec![
                    "agentic/0001_conversations".to_owned(),
                    "agentic/0002_event_log".to_owned(),
                    "agentic/0003_prompt_journal".to_owned(),
                    "agentic/0004_event_log_by_user".to_owned(),
                    "agentic/0005_prompt_decisions".to_owned(),
                    "agentic/0006_approval_scopes".to_owned(),
                    "notes/0001_notes".to_owned()
                ],
                "{}",
                db.name
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_is_tuned_for_concurrent_writers() {
    let dbs = databases().await;
    let db = &dbs[0];
    let store = agentic_conversation::Store::open(&db.url, &Default::default())
        .await
        .unwrap();
    let connection = store.connection();
    let pragma = |name: &'static str| {
        let connection = connection.clone();
        async move {
            let row = connection
                .query_one_raw(Statement::from_string(
                    sea_orm::DbBackend::Sqlite,
                    format!("PRAGMA {name}"),
                ))
                .await
                .unwrap()
                .unwrap();
            row.try_get_by_index::<sea_orm::prelude::Json>(0)
                .map(|value| value.to_string())
                .or_else(|_| {
                    row.try_get_by_index::<i64>(0)
                        .map(|value| value.to_string())
                })
                .or_else(|_| row.try_get_by_index::<String>(0))
                .unwrap()
        }
    };
    assert_eq!(pragma("journal_mode").await.trim_matches('"'), "wal");
    assert_eq!(pragma("foreign_keys").await, "1");
    assert_eq!(pragma("busy_timeout").await, "10000");
    assert_eq!(pragma("synchronous").await, "1", "NORMAL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_commit_together_and_a_failing_one_fails_alone() {
    for db in databases().await {
        let store = agentic_conversation::Store::open(&db.url, &Default::default())
            .await
            .unwrap();
        let conversation = store.create_conversation("alice", "t").await.unwrap();
        let mut tasks = Vec::new();
        for index in 0..64 {
            let store = store.clone();
            let conversation = conversation.id.clone();
            tasks.push(tokio::spawn(async move {
                let prompt = Prompt::new(
                    "alice",
                    "classic",
                    ModelKind::Normal,
                    Some(format!("{index}")),
                );
                if index % 8 == 0 {
                    // Never inserted: saving it must fail, and only it.
                    return store
                        .save_prompt(&prompt, PromptChange::Prompt)
                        .await
                        .map(|()| index);
                }
                store.insert_prompt(&conversation, &prompt).await?;
                store.save_prompt(&prompt, PromptChange::Prompt).await?;
                Ok(index)
            }));
        }
        let mut failed = 0;
        for task in tasks {
            match task.await.unwrap() {
                Ok(index) => assert_ne!(index % 8, 0),
                Err(error) => {
                    assert!(error.to_string().contains("is not stored"), "{error:#}");
                    failed += 1;
                }
            }
        }
        assert_eq!(failed, 8, "{}", db.name);
        let prompts = store.conversation_prompts(&conversation.id).await.unwrap();
        assert_eq!(prompts.len(), 56, "{}", db.name);
        let mut positions: Vec<i64> = prompts.iter().map(|stored| stored.position).collect();
        positions.dedup();
        assert_eq!(positions, (0..56).collect::<Vec<_>>(), "{}", db.name);
        assert_eq!(store.integrity_check().await.unwrap(), "ok");
    }
}

/// Checkpoints of many prompts at once are merged into a few statements on SQLite: each
/// prompt must still end with exactly its own outputs, state, usage and error, whether it
/// came to rest or was left running with its outputs in the journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_checkpoints_of_many_prompts_each_keep_their_own_changes() {
    for db in databases().await {
        let store = agentic_conversation::Store::open(&db.url, &Default::default())
            .await
            .unwrap();
        let mut tasks = Vec::new();
        for index in 0..96usize {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let conversation = store.create_conversation("alice", "t").await?;
                let mut prompt = Prompt::new(
                    "alice",
                    "classic",
                    ModelKind::Normal,
                    Some(format!("{index}")),
                );
                store.insert_prompt(&conversation.id, &prompt).await?;
                for step in 0..(index % 4 + 1) {
                    prompt
                        .output
                        .push(PromptOutput::Text(agentic_core::TextOutput {
                            id: format!("{index}-{step}"),
                            content: format!("prompt {index} step {step}"),
                            start: chrono::Utc::now(),
                            end: None,
                        }));
                    prompt.usage.output_tokens = step as u64 + 1;
                    store
                        .save_prompt(&prompt, PromptChange::Output(prompt.output.len() - 1))
                        .await?;
                }
                // A third stay running; the rest complete or fail.
                match index % 3 {
                    0 => {}
                    1 => {
                        prompt.state = PromptState::Completed;
                        store.save_prompt(&prompt, PromptChange::Prompt).await?;
                    }
                    _ => {
                        prompt.state = PromptState::Failed;
                        prompt.error = Some(format!("error {index}"));
                        store.save_prompt(&prompt, PromptChange::Prompt).await?;
                    }
                }
                anyhow::Ok((prompt, conversation.id))
            }));
        }
        for task in tasks {
            let (expected, conversation) = task.await.unwrap().unwrap();
            let stored = store.conversation_prompts(&conversation).await.unwrap();
            assert_eq!(stored.len(), 1, "{}", db.name);
            let stored = &stored[0].prompt;
            assert_eq!(stored.state, expected.state, "{}", db.name);
            assert_eq!(stored.error, expected.error, "{}", db.name);
            assert_eq!(stored.output, expected.output, "{}", db.name);
            assert_eq!(
                stored.usage.output_tokens, expected.usage.output_tokens,
                "{}",
                db.name
            );
        }
        // Prompts at rest keep their timeline in their row, not in the journal.
        let journalled = store
            .connection()
            .query_one_raw(Statement::from_string(
                store.connection().get_database_backend(),
                "SELECT COUNT(*) FROM prompt_outputs",
            ))
            .await
            .unwrap()
            .unwrap()
            .try_get_by_index::<i64>(0)
            .unwrap();
        let running_outputs: i64 = (0..96).filter(|i| i % 3 == 0).map(|i| i % 4 + 1).sum();
        assert_eq!(journalled, running_outputs, "{}", db.name);
        assert_eq!(store.integrity_check().await.unwrap(), "ok");
    }
}

/// A prompt that comes to rest moves its journaled outputs into its row. A reader that reads
/// the row and the journal while that happens must see them in one place or the other: seen
/// apart, a running prompt read as having lost every output (the playground showed a waiting
/// call with no script around it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_read_while_it_comes_to_rest_never_loses_outputs() {
    for db in databases().await {
        let store = agentic_conversation::Store::open(&db.url, &Default::default())
            .await
            .unwrap();
        let conversation = store.create_conversation("alice", "t").await.unwrap();
        let mut prompt = Prompt::new("alice", "code", ModelKind::Normal, Some("go".into()));
        store
            .insert_prompt(&conversation.id, &prompt)
            .await
            .unwrap();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (store, done, conversation, id) = (
                store.clone(),
                done.clone(),
                conversation.id.clone(),
                prompt.id.clone(),
            );
            tokio::spawn(async move {
                let (mut seen, mut reads) = (0, 0);
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    let listed = store.conversation_prompts(&conversation).await.unwrap();
                    let one = store.prompt("alice", &id).await.unwrap().unwrap();
                    for (how, read) in [("listed", &listed[0].prompt), ("alone", &one.prompt)] {
                        // The reads are in order, so neither may show fewer than the last.
                        let count = read.output.len();
                        assert!(
                            count >= seen,
                            "read {how} with {count} outputs after {seen} ({:?})",
                            read.state
                        );
                        seen = count;
                    }
                    reads += 1;
                }
                reads
            })
        };
        for step in 0..60 {
            // Runs: two outputs go to the journal; then waits: the timeline goes to the row.
            prompt.state = PromptState::Running;
            store
                .save_prompt(&prompt, PromptChange::Prompt)
                .await
                .unwrap();
            for half in 0..2 {
                prompt
                    .output
                    .push(PromptOutput::Text(agentic_core::TextOutput {
                        id: format!("{step}-{half}"),
                        content: format!("step {step}"),
                        start: chrono::Utc::now(),
                        end: None,
                    }));
                store
                    .save_prompt(&prompt, PromptChange::Output(prompt.output.len() - 1))
                    .await
                    .unwrap();
            }
            prompt.state = PromptState::WaitingForApproval;
            store
                .save_prompt(&prompt, PromptChange::Prompt)
                .await
                .unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        let reads = reader.await.unwrap();
        assert!(reads > 0, "{}: the reader never read", db.name);
        let stored = store.prompt("alice", &prompt.id).await.unwrap().unwrap();
        assert_eq!(stored.prompt.output, prompt.output, "{}", db.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_held_by_a_dead_process_token_is_released_at_startup() {
    for db in databases().await {
        let conversation_id = {
            let store = agentic_conversation::Store::open(&db.url, &Default::default())
                .await
                .unwrap();
            let conversation = store.create_conversation("alice", "t").await.unwrap();
            // What a process killed between taking a conversation and storing its prompt leaves.
            let token = "claim:no-such-instance:123";
            assert!(store.claim(&conversation.id, token).await.unwrap().is_ok());
            store.close().await.unwrap();
            conversation.id
        };
        let (service, _) = support::service(&db, "- text: free again\n").await;
        let mut conversation = service.get("alice", &conversation_id).await.unwrap();
        let prompt = conversation
            .prompt(request("hello", "classic"))
            .await
            .unwrap();
        assert_eq!(prompt.state, PromptState::Completed, "{}", db.name);
    }
}

/// Servers started together on an empty database all come up: the first migrates, the others
/// wait for it and find every migration applied (on PostgreSQL, `CREATE TABLE IF NOT EXISTS`
/// run by two sessions at once fails in one of them without the lock).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_servers_migrating_an_empty_database_at_once_all_come_up() {
    for round in 0..3 {
        for db in databases().await {
            let opening: Vec<_> = (0..5)
                .map(|_| {
                    let url = db.url.clone();
                    tokio::spawn(async move {
                        agentic_conversation::Store::open(
                            &url,
                            &agentic_core::Extensions::default(),
                        )
                        .await
                    })
                })
                .collect();
            let mut stores = Vec::new();
            for opened in opening {
                let store = opened.await.unwrap().unwrap_or_else(|error| {
                    panic!(
                        "{} round {round}: a server failed to start: {error:#}",
                        db.name
                    )
                });
                stores.push(store);
            }
            let connection = stores[0].connection();
            let applied = connection
                .query_all_raw(Statement::from_string(
                    connection.get_database_backend(),
                    "SELECT name FROM agentic_migrations",
                ))
                .await
                .unwrap();
            assert_eq!(applied.len(), 6, "{} round {round}", db.name);
            for store in stores {
                store.close().await.unwrap();
            }
        }
    }
}

/// With `[approval] timeout`, a call nobody decides is rejected with a reason the model reads,
/// and the prompt goes on; a call decided in time is not touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_nobody_decides_is_rejected_at_the_approval_timeout_and_the_prompt_goes_on() {
    for db in databases().await {
        let turns = "- toolCalls:\n    - { id: call_del, name: kit.delete, input: { path: notes.txt } }\n\
                     - text: I could not delete it.\n";
        let config = kit_config(serde_json::json!({ "approval": { "timeout": "1s" } }));
        let (service, provider) = support::service_with(&db, turns, config).await;
        let mut conversation = service.create("alice").await.unwrap();
        let waiting = conversation
            .prompt(request("Delete notes.txt", "classic"))
            .await
            .unwrap();
        assert_eq!(waiting.state, PromptState::WaitingForApproval);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let done = loop {
            let stored = service.prompt("alice", &waiting.id).await.unwrap().prompt;
            if stored.state == PromptState::Completed {
                break stored;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{}: still {:?}",
                db.name,
                stored.state
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        };
        let results = tool_results(&done);
        assert_eq!(results.len(), 1, "{}", db.name);
        let ToolResult::Error { error, kind, .. } = &results[0].1 else {
            panic!("{}: {:?}", db.name, results[0].1);
        };
        assert_eq!(*kind, agentic_core::ErrorKind::Rejected);
        assert!(
            error.contains("no decision within 1s (the [approval] timeout)"),
            "{error}"
        );
        assert_eq!(done.text(), "I could not delete it.");
        // The record says the rule decided, not a person, and what the request showed.
        let decision = done
            .output
            .iter()
            .find_map(|output| match output {
                PromptOutput::Tool(tool) => tool.decision.clone(),
                _ => None,
            })
            .unwrap();
        assert_eq!(
            serde_json::to_value(&decision.by).unwrap(),
            serde_json::json!({ "type": "policy", "name": "[approval] timeout" })
        );
        assert_eq!(decision.shown, "deletes notes.txt");
        // The model read why.
        let requests = provider.requests();
        let last = serde_json::to_string(&requests.last().unwrap().messages).unwrap();
        assert!(last.contains("no decision within 1s"), "{last}");
        service.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_approval_timeout_is_refused_when_the_service_opens() {
    let db = &databases().await[0];
    let (runtime, _) = runtime(
        "[]",
        kit_config(serde_json::json!({ "approval": { "timeout": "soon" } })),
    )
    .await;
    let error = ConversationService::open(runtime, &db.url)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("is not a duration"), "{error}");
}

#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Durable code mode, on SQLite and PostgreSQL: a code-mode prompt waiting for approval
//! survives a restart. Its script runs again in a fresh worker, answered from its journal:
//! the calls that ran before do not run again, and `llm()`, `Math.random()` and `Date` give
//! what they gave before. A script that does something else than its journal is stopped,
//! and the model reads where.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentic_conversation::{ConversationService, PromptRequest};
use agentic_core::{
    ErrorKind, Plugin, PrepareContext, Prompt, PromptChange, PromptOutput, PromptState, ToolError,
    ToolResult, define_tool,
};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use support::{TestDb, databases, kit_config, runtime_with_plugins};

/// `count.hit`: how many times it ran, over every runtime of the test.
struct Counter(Arc<AtomicUsize>);

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

#[async_trait]
impl Plugin for Counter {
    fn id(&self) -> &str {
        "count"
    }

    async fn prepare(&self, context: &mut PrepareContext) -> anyhow::Result<()> {
        let hits = self.0.clone();
        context.add_tool(
            define_tool(
                "count.hit",
                "Counts its calls",
                move |_cx, _input: Nothing| {
                    let n = hits.fetch_add(1, Ordering::SeqCst) + 1;
                    async move { Ok::<_, ToolError>(serde_json::json!({ "n": n })) }
                },
            )
            .into_arc(),
        );
        let hits = self.0.clone();
        context.add_tool(
            define_tool(
                "count.bump",
                "Counts its calls, with a person's approval",
                move |_cx, _input: Nothing| {
                    let n = hits.fetch_add(1, Ordering::SeqCst) + 1;
                    async move { Ok::<_, ToolError>(serde_json::json!({ "n": n })) }
                },
            )
            .require_approval("bumps the count")
            .into_arc(),
        );
        Ok(())
    }
}

/// A service whose code mode asks call by call (`[interpreter] plan = false`): a script waits
/// in the middle, at the call that needs approval.
async fn service(
    db: &TestDb,
    turns: &str,
    hits: &Arc<AtomicUsize>,
) -> (
    ConversationService,
    Arc<agentic_plugin_script::ScriptedProvider>,
) {
    service_planning(db, turns, hits, false).await
}

/// A service whose code mode plans first when `plan`.
async fn service_planning(
    db: &TestDb,
    turns: &str,
    hits: &Arc<AtomicUsize>,
    plan: bool,
) -> (
    ConversationService,
    Arc<agentic_plugin_script::ScriptedProvider>,
) {
    let config = serde_json::json!({
        "interpreter": { "sandbox": { "backend": "in-process" }, "plan": plan }
    });
    let (runtime, provider) = runtime_with_plugins(
        turns,
        kit_config(config),
        vec![Arc::new(Counter(hits.clone()))],
    )
    .await;
    let service = ConversationService::open(runtime, &db.url).await.unwrap();
    (service, provider)
}

fn request(input: &str) -> PromptRequest {
    PromptRequest {
        input: Some(input.to_owned()),
        mode: Some("code".to_owned()),
        ..PromptRequest::default()
    }
}

fn texts(prompt: &Prompt) -> Vec<String> {
    prompt
        .output
        .iter()
        .filter_map(|output| match output {
            PromptOutput::Text(text) => Some(text.content.clone()),
            _ => None,
        })
        .collect()
}

fn calls(prompt: &Prompt, function: &str) -> Vec<ToolResult> {
    prompt
        .output
        .iter()
        .filter_map(|output| match output {
            PromptOutput::Tool(tool) if tool.function == function => Some(tool.result.clone()),
            _ => None,
        })
        .collect()
}

/// The id of the `kit.delete` call a prompt waits at.
fn waiting_delete(waiting: &Prompt) -> String {
    waiting
        .output
        .iter()
        .find_map(|output| match output {
            PromptOutput::Tool(tool) if tool.function == "kit.delete" => Some(tool.id.clone()),
            _ => None,
        })
        .expect("the prompt waits at kit.delete")
}

/// Reads every kind of input a journal keeps, shows some of it, then waits at `kit.delete`.
const SCRIPT: &str = r#"
- code: |
    const first = count.hit({});
    const seen = { r: Math.random(), t: Date.now(), said: llm("Say hi") };
    output("before: " + JSON.stringify(seen));
    const deleted = kitDelete({ path: "notes.txt" });
    const second = count.hit({});
    done(`after: ${JSON.stringify(seen)} first=${first.n} second=${second.n} ${deleted}`);
- text: hi there
"#;

/// Starts the script in one service and stops it there, waiting; returns the prompt.
async fn wait_then_stop(db: &TestDb, hits: &Arc<AtomicUsize>) -> (Prompt, String) {
    let (service, _) = service(db, SCRIPT, hits).await;
    let mut conversation = service.create("alice").await.unwrap();
    let waiting = conversation
        .prompt(request("Delete notes.txt"))
        .await
        .unwrap();
    assert_eq!(
        waiting.state,
        PromptState::WaitingForApproval,
        "{}: {:?}",
        db.name,
        waiting.error
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    let call = waiting_delete(&waiting);
    drop(conversation);
    // Nothing is interrupted: a waiting code prompt resumes after a restart.
    assert!(service.shutdown().await.unwrap().is_empty(), "{}", db.name);
    drop(service);
    (waiting, call)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_prompt_waiting_at_restart_resumes_from_its_journal_when_approved() {
    for db in databases().await {
        let hits = Arc::new(AtomicUsize::new(0));
        let (waiting, call) = wait_then_stop(&db, &hits).await;
        let before = texts(&waiting);
        assert_eq!(before.len(), 1, "{before:?}");

        // A new process: its model has nothing to say (every answer must come from the
        // journal), and the prompt still waits.
        let (service, provider) = service(&db, "- text: unexpected\n", &hits).await;
        assert_eq!(service.recovery().waiting, vec![waiting.id.clone()]);
        let done = service
            .decide("alice", &waiting.id, &call, agentic_core::Verdict::Approve)
            .await
            .unwrap();
        assert_eq!(
            done.state,
            PromptState::Completed,
            "{}: {:#?}",
            db.name,
            done
        );
        // `count.hit` ran once before the restart and once after: never again for the
        // replayed call.
        assert_eq!(hits.load(Ordering::SeqCst), 2, "{}", db.name);
        assert!(provider.requests().is_empty(), "the model was asked again");
        // The text shown before is not shown again, and the replayed values are the same.
        let shown = texts(&done);
        assert_eq!(shown.len(), 2, "{}: {shown:?}", db.name);
        let seen = before[0].strip_prefix("before: ").unwrap();
        assert_eq!(
            shown[1],
            format!("after: {seen} first=1 second=2 deleted notes.txt"),
            "{}",
            db.name
        );
        assert!(seen.contains("\"said\":\"hi there\""), "{seen}");
        assert_eq!(
            calls(&done, "count.hit"),
            vec![
                ToolResult::Success {
                    output: serde_json::json!({ "n": 1 })
                },
                ToolResult::Success {
                    output: serde_json::json!({ "n": 2 })
                },
            ]
        );
        assert_eq!(
            service.prompt("alice", &waiting.id).await.unwrap().prompt,
            done
        );
        // Once the prompt ended, its journal stays: it is what an export plays again, the
        // model's replies with the script's seed.
        let journal = service.store().journal_entries(&waiting.id).await.unwrap();
        let kinds: Vec<&str> = journal
            .iter()
            .filter_map(|entry| entry.get("type")?.as_str())
            .collect();
        assert!(kinds.contains(&"modelReply"), "{kinds:?}");
        assert!(kinds.contains(&"start"), "{kinds:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_prompt_waiting_at_restart_can_be_rejected() {
    for db in databases().await {
        let hits = Arc::new(AtomicUsize::new(0));
        let (waiting, call) = wait_then_stop(&db, &hits).await;
        let turns = "- code: |\n    done(\"Left notes.txt alone.\");\n";
        let (service, _) = service(&db, turns, &hits).await;
        let done = service
            .decide(
                "alice",
                &waiting.id,
                &call,
                agentic_core::Verdict::reject(Some("keep it")),
            )
            .await
            .unwrap();
        assert_eq!(done.state, PromptState::Completed, "{}: {done:#?}", db.name);
        assert_eq!(
            calls(&done, "kit.delete"),
            vec![ToolResult::error(
                ErrorKind::Rejected,
                "Rejected by user: keep it"
            )]
        );
        // The script went on from the rejection (its error ended it), and nothing ran twice.
        assert_eq!(hits.load(Ordering::SeqCst), 1, "{}", db.name);
        let executions = calls(&done, "code.execute");
        assert_eq!(executions.len(), 2, "{executions:#?}");
        match &executions[0] {
            ToolResult::Error { error, .. } => assert!(error.contains("keep it"), "{error}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(texts(&done).last().unwrap(), "Left notes.txt alone.");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_that_diverges_from_its_journal_is_stopped_and_the_model_reads_where() {
    for db in databases().await {
        let hits = Arc::new(AtomicUsize::new(0));
        let (waiting, call) = wait_then_stop(&db, &hits).await;
        // The stored timeline now says the first call had other input: the same script
        // cannot match it.
        {
            let store = support::store(&db).await;
            let mut stored = store.prompt("alice", &waiting.id).await.unwrap().unwrap();
            let first = stored
                .prompt
                .output
                .iter_mut()
                .find_map(|output| match output {
                    PromptOutput::Tool(tool) if tool.function == "count.hit" => Some(tool),
                    _ => None,
                })
                .unwrap();
            first.input = serde_json::json!({ "other": true });
            store
                .save_prompt(&stored.prompt, PromptChange::Prompt)
                .await
                .unwrap();
        }
        let turns = "- code: |\n    done(\"Stopped, as the journal did not match.\");\n";
        let (service, _) = service(&db, turns, &hits).await;
        let done = service
            .decide("alice", &waiting.id, &call, agentic_core::Verdict::Approve)
            .await
            .unwrap();
        assert_eq!(done.state, PromptState::Completed, "{}: {done:#?}", db.name);
        let executions = calls(&done, "code.execute");
        match &executions[0] {
            ToolResult::Error { error, .. } => assert!(
                error.contains("diverged from its journal at call 1")
                    && error.contains("count.hit({})"),
                "{error}"
            ),
            other => panic!("{other:?}"),
        }
        // The call it waited at never ran; nothing ran twice; the model went on.
        match &calls(&done, "kit.delete")[0] {
            ToolResult::Error { error, .. } => assert!(error.starts_with("Interrupted"), "{error}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(hits.load(Ordering::SeqCst), 1, "{}", db.name);
        assert_eq!(
            texts(&done).last().unwrap(),
            "Stopped, as the journal did not match."
        );
    }
}

/// The script of [`SCRIPT`], after a reply in Python that is refused.
const SCRIPT_AFTER_A_REFUSAL: &str = r#"
- text: |
    ```python
    print("hi")
    ```
- code: |
    const first = count.hit({});
    const deleted = kitDelete({ path: "notes.txt" });
    const second = count.hit({});
    done(`first=${first.n} second=${second.n} ${deleted}`);
"#;

/// Rewrites a stored prompt's timeline as the release before error kinds wrote it: every
/// error with its words only (the one difference between the two formats).
async fn store_as_before_error_kinds(db: &TestDb, prompt_id: &str) {
    use agentic_conversation::entity::prompt;
    use agentic_conversation::sea_orm::sea_query::Expr;
    use agentic_conversation::sea_orm::{ColumnTrait, EntityTrait, QueryFilter};

    let store = support::store(db).await;
    let stored = store.prompt("alice", prompt_id).await.unwrap().unwrap();
    let mut output = serde_json::to_value(&stored.prompt.output).unwrap();
    let mut stripped = 0;
    for item in output.as_array_mut().unwrap() {
        if let Some(result) = item
            .get_mut("result")
            .and_then(|result| result.as_object_mut())
            && result.get("type").and_then(|kind| kind.as_str()) == Some("error")
        {
            result.remove("kind");
            result.remove("notice");
            stripped += 1;
        }
    }
    assert!(stripped > 0, "no error to store the old way");
    prompt::Entity::update_many()
        .col_expr(prompt::Column::Output, Expr::value(output))
        .filter(prompt::Column::Id.eq(prompt_id))
        .exec(store.connection())
        .await
        .unwrap();
}

/// A code prompt stored by the release before error kinds, waiting for approval after a
/// refused reply, resumes as it would have there: the refusal is read as the rule's notice,
/// the script replays from its journal, and nothing runs twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_prompt_stored_before_error_kinds_resumes_the_same() {
    for db in databases().await {
        let hits = Arc::new(AtomicUsize::new(0));
        let (waiting, call) = {
            let (service, _) = service(&db, SCRIPT_AFTER_A_REFUSAL, &hits).await;
            let mut conversation = service.create("alice").await.unwrap();
            let waiting = conversation
                .prompt(request("Delete notes.txt"))
                .await
                .unwrap();
            assert_eq!(
                waiting.state,
                PromptState::WaitingForApproval,
                "{}",
                db.name
            );
            let call = waiting_delete(&waiting);
            drop(conversation);
            assert!(service.shutdown().await.unwrap().is_empty(), "{}", db.name);
            (waiting, call)
        };
        store_as_before_error_kinds(&db, &waiting.id).await;

        let (service, provider) = service(&db, "- text: unexpected\n", &hits).await;
        let loaded = service.prompt("alice", &waiting.id).await.unwrap().prompt;
        let refusal = &calls(&loaded, "code.execute")[0];
        assert_eq!(refusal.error_kind(), Some(ErrorKind::NotRun), "{refusal:?}");
        assert_eq!(refusal.notice(), Some("not_a_program"), "{refusal:?}");
        assert_eq!(loaded, waiting, "{}: read back as it was written", db.name);

        let done = service
            .decide("alice", &waiting.id, &call, agentic_core::Verdict::Approve)
            .await
            .unwrap();
        assert_eq!(done.state, PromptState::Completed, "{}: {done:#?}", db.name);
        assert_eq!(hits.load(Ordering::SeqCst), 2, "{}", db.name);
        assert!(provider.requests().is_empty(), "the model was asked again");
        assert_eq!(
            texts(&done).last().unwrap(),
            "first=1 second=2 deleted notes.txt"
        );
    }
}

/// Plan first, across a restart: the dry run's plan waits (nothing that changes anything ran),
/// a new process takes the decision and runs the program once, for real, and its `llm()`
/// reads the answer the dry run got, from the journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_waiting_at_restart_is_decided_in_a_new_process_and_runs_once() {
    for db in databases().await {
        let hits = Arc::new(AtomicUsize::new(0));
        let (service, _) = service_planning(&db, SCRIPT, &hits, true).await;
        let mut conversation = service.create("alice").await.unwrap();
        let waiting = conversation
            .prompt(request("Delete notes.txt"))
            .await
            .unwrap();
        assert_eq!(
            waiting.state,
            PromptState::WaitingForApproval,
            "{}",
            db.name
        );
        // `count.hit` is not read-only: the dry run answered it with a placeholder.
        assert_eq!(hits.load(Ordering::SeqCst), 0, "{}", db.name);
        assert!(texts(&waiting).is_empty(), "a dry run shows nothing");
        let plan = waiting
            .output
            .iter()
            .find_map(|output| match output {
                PromptOutput::Tool(tool) if tool.function == "code.plan" => Some(tool.clone()),
                _ => None,
            })
            .expect("the prompt waits at a plan");
        assert!(plan.result.is_awaiting_approval());
        assert_eq!(plan.input["calls"][0]["tool"], "kit.delete");
        assert_eq!(plan.input["calls"][0]["input"]["path"], "notes.txt");
        drop(conversation);
        assert!(service.shutdown().await.unwrap().is_empty(), "{}", db.name);
        drop(service);

        let (service, provider) = service_planning(&db, "- text: unexpected\n", &hits, true).await;
        let done = service
            .decide(
                "alice",
                &waiting.id,
                &plan.id,
                agentic_core::Verdict::Approve,
            )
            .await
            .unwrap();
        assert_eq!(done.state, PromptState::Completed, "{}: {done:#?}", db.name);
        assert_eq!(hits.load(Ordering::SeqCst), 2, "{}", db.name);
        assert!(provider.requests().is_empty(), "the model was asked again");
        let shown = texts(&done);
        assert_eq!(shown.len(), 2, "{}: {shown:?}", db.name);
        assert!(shown[0].contains("\"said\":\"hi there\""), "{shown:?}");
        assert!(
            shown[1].ends_with("first=1 second=2 deleted notes.txt"),
            "{shown:?}"
        );
        let delete = done
            .output
            .iter()
            .find_map(|output| match output {
                PromptOutput::Tool(tool) if tool.function == "kit.delete" => Some(tool.clone()),
                _ => None,
            })
            .unwrap();
        let record = delete.decision.expect("the plan decided the call");
        assert!(record.shown.contains("of the plan"), "{}", record.shown);
    }
}

/// The calls of one `parallel()` request that wait together survive a restart together: a new
/// process decides them at once (the second approved, the first not), from a decision that
/// names the second, and the script reads both answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_waiting_together_at_restart_are_decided_together_in_a_new_process() {
    const TOGETHER: &str = r#"
- code: |
    const first = count.hit({});
    const results = parallel([
      { tool: "kit.delete", input: { path: "a.txt" } },
      { tool: "kit.delete", input: { path: "b.txt" } },
    ]);
    done(results.map((result) => result.error ?? result).join(" | ") + ` hits=${first.n}`);
"#;
    for db in databases().await {
        let hits = Arc::new(AtomicUsize::new(0));
        let (first, _) = service(&db, TOGETHER, &hits).await;
        let mut conversation = first.create("alice").await.unwrap();
        let waiting = conversation
            .prompt(request("Delete a.txt and b.txt"))
            .await
            .unwrap();
        assert_eq!(
            waiting.state,
            PromptState::WaitingForApproval,
            "{}",
            db.name
        );
        let asked: Vec<String> = waiting
            .calls_awaiting_approval()
            .into_iter()
            .filter(|tool| tool.result.is_awaiting_approval())
            .map(|tool| tool.id.clone())
            .collect();
        assert_eq!(asked.len(), 2, "{}: {waiting:#?}", db.name);
        drop(conversation);
        assert!(first.shutdown().await.unwrap().is_empty(), "{}", db.name);
        drop(first);

        let (second, provider) = service(&db, "- text: unexpected\n", &hits).await;
        let done = second
            .decide(
                "alice",
                &waiting.id,
                &asked[1],
                agentic_core::Verdict::ApproveOnly {
                    calls: vec![1],
                    reason: Some("keep a".to_owned()),
                },
            )
            .await
            .unwrap();
        assert_eq!(done.state, PromptState::Completed, "{}: {done:#?}", db.name);
        assert!(provider.requests().is_empty(), "the model was asked again");
        assert_eq!(hits.load(Ordering::SeqCst), 1, "{}", db.name);
        assert_eq!(
            calls(&done, "kit.delete"),
            vec![
                ToolResult::error(ErrorKind::Rejected, "Rejected by user: keep a"),
                ToolResult::Success {
                    output: serde_json::json!("deleted b.txt")
                },
            ],
            "{}",
            db.name
        );
        assert_eq!(
            texts(&done).last().unwrap(),
            "Rejected by user: keep a | deleted b.txt hits=1",
            "{}",
            db.name
        );
    }
}

/// A call a scope approved stays out of the decision on the calls asked about with it, across
/// a restart: the person was shown the two deletes, and the places of their decision index
/// those two, not the request's three calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_a_scope_approved_stays_out_of_a_decision_taken_after_a_restart() {
    const TURNS: &str = r#"
- code: |
    done("bumped " + count.bump({}).n);
- code: |
    const results = parallel([
      { tool: "kit.delete", input: { path: "a.txt" } },
      { tool: "count.bump", input: {} },
      { tool: "kit.delete", input: { path: "b.txt" } },
    ]);
    done(results.map((result) => result.error ?? JSON.stringify(result)).join(" | "));
"#;
    for db in databases().await {
        let hits = Arc::new(AtomicUsize::new(0));
        let (first, _) = service(&db, TURNS, &hits).await;
        let mut conversation = first.create("alice").await.unwrap();
        let waiting = conversation.prompt(request("Bump")).await.unwrap();
        let bump = waiting.calls_awaiting_approval()[0].id.clone();
        let scope = agentic_core::scope::Scope {
            reach: agentic_core::scope::Reach::Conversation,
            tool: None,
            expires_in: None,
        };
        let bumped = first
            .decide_with_scope(
                "alice",
                &waiting.id,
                &bump,
                agentic_core::Verdict::Approve,
                Some(scope),
            )
            .await
            .unwrap();
        assert_eq!(
            bumped.state,
            PromptState::Completed,
            "{}: {bumped:#?}",
            db.name
        );
        let waiting = conversation
            .prompt(request("Delete a.txt and b.txt, and bump"))
            .await
            .unwrap();
        assert_eq!(
            waiting.state,
            PromptState::WaitingForApproval,
            "{}",
            db.name
        );
        let asked: Vec<String> = waiting
            .calls_awaiting_approval()
            .into_iter()
            .map(|tool| tool.id.clone())
            .collect();
        assert_eq!(
            asked.len(),
            2,
            "{}: the scope approved the bump: {waiting:#?}",
            db.name
        );
        drop(conversation);
        assert!(first.shutdown().await.unwrap().is_empty(), "{}", db.name);
        drop(first);

        let (second, _) = service(&db, "- text: unexpected\n", &hits).await;
        let done = second
            .decide(
                "alice",
                &waiting.id,
                &asked[0],
                agentic_core::Verdict::ApproveOnly {
                    calls: vec![1],
                    reason: Some("keep a".to_owned()),
                },
            )
            .await
            .unwrap();
        assert_eq!(done.state, PromptState::Completed, "{}: {done:#?}", db.name);
        assert_eq!(
            calls(&done, "kit.delete"),
            vec![
                ToolResult::error(ErrorKind::Rejected, "Rejected by user: keep a"),
                ToolResult::Success {
                    output: serde_json::json!("deleted b.txt")
                },
            ],
            "{}",
            db.name
        );
        // The bump ran: once in the first prompt, once in the second.
        assert_eq!(hits.load(Ordering::SeqCst), 2, "{}", db.name);
    }
}

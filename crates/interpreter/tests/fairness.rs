//! Users share the sandbox fairly: a user's scripts queue behind that user's own, while
//! another user's script runs at once; a script waiting for a person holds no slot.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use agentic_interpreter::protocol::{ExecuteRequest, HostReply, HostRequest, ToolBinding};
use agentic_interpreter::{Backend, Execution, Sandbox, SandboxConfig, SandboxEvent};
use serde_json::json;

fn sandbox() -> Arc<Sandbox> {
    Sandbox::new(SandboxConfig {
        backend: Backend::InProcess,
        pool_size: 4,
        max_running: 4,
        max_running_per_user: 1,
        ..SandboxConfig::default()
    })
}

fn request(code: &str) -> ExecuteRequest {
    ExecuteRequest {
        code: code.to_owned(),
        tools: vec![ToolBinding {
            id: "kit.wait".to_owned(),
            function: Some("wait".to_owned()),
            aliases: Vec::new(),
            member: None,
            description: "Waits for the test".to_owned(),
            result: Default::default(),
        }],
        input: None,
        store: serde_json::Map::new(),
        limits: SandboxConfig::default().script_limits(),
        same_tools_as_before: false,
        determinism: Default::default(),
    }
}

async fn start(sandbox: &Arc<Sandbox>, user: &str, code: &str) -> Execution {
    sandbox
        .start_with_wall_time(Some(user), request(code), None)
        .await
}

/// The script's first tool call: its id.
async fn first_call(execution: &mut Execution) -> u64 {
    match execution.next().await {
        SandboxEvent::Request {
            id,
            request: HostRequest::CallTool { .. },
            ..
        } => id,
        other => panic!("expected a tool call, got {other:?}"),
    }
}

async fn finish(execution: &mut Execution) -> serde_json::Value {
    loop {
        match execution.next().await {
            SandboxEvent::Request { id, .. } => {
                execution
                    .reply(id, HostReply::Value { value: json!(1) })
                    .await;
            }
            SandboxEvent::Finished(outcome) => return outcome.result.unwrap(),
            SandboxEvent::Output(_) | SandboxEvent::Log(_) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_scripts_queue_behind_their_own_and_not_behind_others() {
    let sandbox = sandbox();
    sandbox.warm_up().await.unwrap();
    // Mallory's first script holds her slot: it waits inside a tool call.
    let mut first = start(&sandbox, "mallory", "wait({}); 'first'").await;
    let held = first_call(&mut first).await;
    // Her second one waits for that slot...
    let second = {
        let sandbox = sandbox.clone();
        tokio::spawn(async move {
            let mut second = start(&sandbox, "mallory", "'second'").await;
            finish(&mut second).await
        })
    };
    // ...while Alice's runs at once.
    let mut alice = start(&sandbox, "alice", "wait({}) + 1").await;
    assert_eq!(finish(&mut alice).await, json!(2));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !second.is_finished(),
        "mallory's second script ran beside her first"
    );
    first
        .reply(held, HostReply::Value { value: json!(0) })
        .await;
    assert_eq!(finish(&mut first).await, json!("first"));
    let second = tokio::time::timeout(Duration::from_secs(30), second)
        .await
        .expect("the second script never got the slot")
        .unwrap();
    assert_eq!(second, json!("second"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_waiting_for_a_person_gives_its_slot_back() {
    let sandbox = sandbox();
    sandbox.warm_up().await.unwrap();
    let mut waiting = start(&sandbox, "mallory", "wait({}); 'approved'").await;
    let call = first_call(&mut waiting).await;
    waiting.pause_clock();
    // Her other prompt's script runs while the first waits for the approval.
    let mut other = start(&sandbox, "mallory", "'meanwhile'").await;
    assert_eq!(finish(&mut other).await, json!("meanwhile"));
    waiting.resume_clock().await;
    waiting
        .reply(call, HostReply::Value { value: json!(0) })
        .await;
    assert_eq!(finish(&mut waiting).await, json!("approved"));
}

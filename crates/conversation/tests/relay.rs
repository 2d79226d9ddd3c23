#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Servers on one PostgreSQL share their events (`relay.rs`): two services, each with its own
//! runtime and event hub, as two `agentic serve` processes have them. Every event published on
//! either reaches both, in one order, with the same `seq`; a subscriber that resumes on the
//! other server from its last `seq` misses nothing and sees nothing twice.

mod support;

use std::time::Duration;

use agentic_conversation::relay;
use agentic_core::{EventPayload, EventSubscription, Received};
use support::{databases, kit_config, service_with};

async fn next_event(subscription: &mut EventSubscription) -> (u64, String) {
    match tokio::time::timeout(Duration::from_secs(10), subscription.next())
        .await
        .expect("an event within 10 s")
        .expect("the hub is open")
    {
        Received::Event(event) => {
            let EventPayload::ConversationUpdated { conversation_id } = &event.payload else {
                panic!("unexpected event {event:?}");
            };
            (event.seq, conversation_id.clone())
        }
        Received::Lagged(missed) => panic!("lagged by {missed}"),
    }
}

#[tokio::test]
async fn servers_on_one_postgres_share_events_in_one_order() {
    for db in databases().await {
        if db.name != "postgres" {
            // One SQLite file is one server: nothing to share, and the relay refuses.
            let (service, _) = service_with(&db, "[]", kit_config(serde_json::json!({}))).await;
            assert!(
                relay::start(
                    service.store().clone(),
                    service.runtime().services().events.clone()
                )
                .await
                .is_err()
            );
            continue;
        }
        let (a, _) = service_with(&db, "[]", kit_config(serde_json::json!({}))).await;
        let (b, _) = service_with(&db, "[]", kit_config(serde_json::json!({}))).await;
        let hub_a = a.runtime().services().events.clone();
        let hub_b = b.runtime().services().events.clone();
        let _relay_a = relay::start(a.store().clone(), hub_a.clone())
            .await
            .unwrap();
        let _relay_b = relay::start(b.store().clone(), hub_b.clone())
            .await
            .unwrap();
        let mut on_a = hub_a.subscribe(Some("alice"));
        let mut on_b = hub_b.subscribe(Some("alice"));
        let mut bob_on_b = hub_b.subscribe(Some("bob"));

        // Published on both servers at once, large and small.
        let big = "x".repeat(20_000);
        let publishing = {
            let (hub_a, hub_b, big) = (hub_a.clone(), hub_b.clone(), big.clone());
            tokio::spawn(async move {
                for index in 0..200 {
                    let (hub, name) = if index % 2 == 0 {
                        (&hub_a, format!("a-{index}"))
                    } else {
                        (&hub_b, format!("b-{index}"))
                    };
                    let name = if index % 50 == 7 {
                        format!("{name}-{big}")
                    } else {
                        name
                    };
                    hub.publish(
                        "alice",
                        EventPayload::ConversationUpdated {
                            conversation_id: name,
                        },
                    );
                    if index % 10 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
                hub_a.publish(
                    "bob",
                    EventPayload::ConversationUpdated {
                        conversation_id: "bob's".to_owned(),
                    },
                );
            })
        };
        let mut seen_a = Vec::new();
        let mut seen_b = Vec::new();
        for _ in 0..200 {
            seen_a.push(next_event(&mut on_a).await);
            seen_b.push(next_event(&mut on_b).await);
        }
        publishing.await.unwrap();
        // One order, one numbering, on both servers; every event once.
        assert_eq!(seen_a, seen_b);
        let seqs: Vec<u64> = seen_a.iter().map(|(seq, _)| *seq).collect();
        assert!(seqs.windows(2).all(|pair| pair[0] < pair[1]), "{seqs:?}");
        let mut names: Vec<&str> = seen_a.iter().map(|(_, name)| name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 200);
        // Each server's own events keep the order it published them in.
        let from_a: Vec<usize> = seen_a
            .iter()
            .filter_map(|(_, name)| name.strip_prefix("a-"))
            .map(|rest| rest.split('-').next().unwrap().parse().unwrap())
            .collect();
        assert!(
            from_a.windows(2).all(|pair| pair[0] < pair[1]),
            "{from_a:?}"
        );
        // Other users' events reach only their subscribers, on the other server too.
        assert_eq!(next_event(&mut bob_on_b).await.1, "bob's");

        // A client that followed A resumes on B from its last seq: nothing lost, nothing twice.
        let resume_after = seen_a[99].0;
        let (replayed, complete) = hub_b.replay_since("alice", resume_after);
        assert!(complete);
        let replayed: Vec<(u64, String)> = replayed
            .iter()
            .filter_map(|event| match &event.payload {
                EventPayload::ConversationUpdated { conversation_id } => {
                    Some((event.seq, conversation_id.clone()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(replayed, seen_a[100..].to_vec());

        // A server that starts later, and never read these events, replays them from the
        // log: the same events, with the same seqs.
        let (c, _) = service_with(&db, "[]", kit_config(serde_json::json!({}))).await;
        let hub_c = c.runtime().services().events.clone();
        let _relay_c = relay::start(c.store().clone(), hub_c.clone())
            .await
            .unwrap();
        let (window, complete) = relay::replay_since(c.store(), "alice", resume_after, 4096)
            .await
            .unwrap();
        assert!(complete);
        let from_log: Vec<(u64, String)> = window
            .iter()
            .filter_map(|event| match &event.payload {
                EventPayload::ConversationUpdated { conversation_id } => {
                    Some((event.seq, conversation_id.clone()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(from_log, seen_a[100..].to_vec());
        // At most `limit` of them, and then it says there is more.
        let (first, complete) = relay::replay_since(c.store(), "alice", resume_after, 10)
            .await
            .unwrap();
        assert_eq!(first.len(), 10);
        assert!(!complete);
        // Nobody on C follows alice: C read none of her events, and knows the log's last seq.
        assert!(hub_c.replay_since("alice", 0).0.is_empty());
        assert_eq!(hub_c.last_seq(), hub_a.last_seq());
    }
}

#[tokio::test]
async fn a_decision_on_one_server_reaches_the_prompt_waiting_on_another() {
    let turns = r#"
- code: |
    const deleted = kit.delete({ path: "a.txt" });
    done("Done: " + deleted);
"#;
    for db in databases().await {
        if db.name != "postgres" {
            continue;
        }
        let (a, _) = service_with(&db, turns, kit_config(serde_json::json!({}))).await;
        let (b, _) = service_with(&db, "[]", kit_config(serde_json::json!({}))).await;
        let _relay_a = relay::start_for(&a).await.unwrap();
        let _relay_b = relay::start_for(&b).await.unwrap();
        // A code-mode prompt waits on A: its script is paused in A's sandbox.
        let mut conversation = a.create("alice").await.unwrap();
        let started = conversation
            .start(agentic_conversation::PromptRequest {
                input: Some("Delete a.txt".to_owned()),
                mode: Some("code".to_owned()),
                ..Default::default()
            })
            .await
            .unwrap();
        let prompt_id = started.prompt_id().to_owned();
        let waiting = started.run().await.unwrap();
        assert_eq!(waiting.state, agentic_core::PromptState::WaitingForApproval);
        let call = waiting
            .output
            .iter()
            .find_map(|output| match output {
                // The delete, or (code mode) the program's plan that holds it.
                agentic_core::PromptOutput::Tool(tool) if tool.result.is_awaiting_approval() => {
                    Some(tool.id.clone())
                }
                _ => None,
            })
            .unwrap();
        // Approved on B, it runs on A, once: B never builds an executor of its own.
        b.decide("alice", &prompt_id, &call, agentic_core::Verdict::Approve)
            .await
            .unwrap();
        assert!(b.runtime().prompts().get(&prompt_id).is_none());
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let done = loop {
            let stored = b.prompt("alice", &prompt_id).await.unwrap();
            if stored.prompt.state.is_finished() {
                break stored.prompt;
            }
            assert!(std::time::Instant::now() < deadline, "{stored:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(done.state, agentic_core::PromptState::Completed, "{done:?}");
        assert_eq!(done.text(), "Done: deleted a.txt");
        let deletes = done
            .output
            .iter()
            .filter(|output| {
                matches!(output, agentic_core::PromptOutput::Tool(tool) if tool.function == "kit.delete")
            })
            .count();
        assert_eq!(deletes, 1);
        // A decision about a prompt that no longer waits is refused, wherever it is taken.
        assert!(
            b.decide("alice", &prompt_id, &call, agentic_core::Verdict::Approve)
                .await
                .is_err()
        );
    }
}

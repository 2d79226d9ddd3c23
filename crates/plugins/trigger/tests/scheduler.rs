//! The scheduler over a real database: missed fires run once, one-shots once, users apart,
//! slots claimed once however many callers race, busy conversations retried, and the whole
//! loop started the way `agentic serve` starts it. Every test runs on a SQLite file and, when
//! `AGENTIC_TEST_POSTGRES_URL` names a server (as `.ci/run` does), on a fresh PostgreSQL
//! database too.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

// Integration tests are a separate crate: name the plugins so the linker keeps them.
use agentic_interpreter as _;
use agentic_plugin_trigger as _;

use agentic_conversation::{ConversationService, start_background_services};
use agentic_core::{Config, EventPayload, PromptState, Received, Runtime};
use agentic_plugin_script::{ScriptedProvider, Turn};
use agentic_plugin_trigger::scheduler::{
    TRIGGER_CONVERSATION_TITLE, fire_due, trigger_conversation,
};
use agentic_plugin_trigger::table::{self, TriggerRow};
use agentic_testing::TestDatabase as TestDb;
use chrono::{DateTime, Duration as TimeDelta, SubsecRound as _, Utc};
use serde_json::{Value, json};

#[tokio::test]
async fn a_fire_missed_while_no_server_ran_runs_once_after_a_restart() {
    for db in databases().await {
        let now = Utc::now().trunc_subsecs(0);
        // The first server stores an every-minute trigger, due five hours ago, and stops.
        let (first, _) = service(&db, &[]).await;
        let id = insert(&first, "alice", "* * * * *", now - TimeDelta::hours(5)).await;
        first.shutdown().await.unwrap();

        // The next one finds it and fires it once, not three hundred times.
        let (second, provider) = service(&db, &["Here is your reminder.", "Again."]).await;
        let pass = fire_due(&second, now).await.unwrap();
        assert_eq!(pass.started.len(), 1, "{}: {pass:?}", db.name);
        let prompt = pass.started.into_iter().next().unwrap();
        assert_eq!(prompt.trigger_id, id);
        let prompt_id = prompt.prompt.prompt_id().to_owned();
        let finished = prompt.prompt.run().await.unwrap();
        assert_eq!(finished.state, PromptState::Completed);
        assert_eq!(
            provider.remaining(),
            1,
            "one prompt, not one per missed slot"
        );

        let row = row(&second, "alice", &id).await;
        let next = row.next_fire_at.unwrap();
        assert!(next > now && next <= now + TimeDelta::minutes(1), "{next}");
        assert_eq!(row.last_fired_at, Some(now));
        assert_eq!(row.last_prompt_id.as_deref(), Some(prompt_id.as_str()));
        assert!(!row.done);
        // Due again only at its next slot (which may be a second away), not now.
        let again = fire_due(&second, now).await.unwrap();
        assert!(again.started.is_empty(), "{}: {again:?}", db.name);
        let at_next = fire_due(&second, next).await.unwrap();
        assert_eq!(at_next.started.len(), 1, "{}: {at_next:?}", db.name);
        for fired in at_next.started {
            fired.prompt.run().await.unwrap();
        }
        let again = fire_due(&second, next).await.unwrap();
        assert!(again.started.is_empty(), "{}: {again:?}", db.name);
        assert_eq!(provider.remaining(), 0);

        let conversation = trigger_conversation(&second, "alice").await.unwrap();
        assert_eq!(
            conversation.conversation().title,
            TRIGGER_CONVERSATION_TITLE
        );
        let prompts = conversation.prompts().await.unwrap();
        assert_eq!(prompts.len(), 2);
        assert_eq!(prompts[0].prompt.id, prompt_id);
        assert_eq!(prompts[0].prompt.input.as_deref(), Some("Say hello"));
        assert_eq!(prompts[0].prompt.state, PromptState::Completed);
    }
}

#[tokio::test]
async fn a_one_shot_fires_once_and_is_then_done() {
    for db in databases().await {
        let now = Utc::now().trunc_subsecs(0);
        let (service, _) = service(&db, &["Reminded."]).await;
        let made = invoke(
            &service,
            "alice",
            "trigger.create",
            json!({ "name": "Once", "schedule": rfc3339(now + TimeDelta::seconds(30)), "input": "Say hello", "mode": "code" }),
        )
        .await
        .unwrap();
        assert_eq!(made["kind"], "once");
        assert_eq!(made["mode"], "code");
        let id = made["id"].as_str().unwrap().to_owned();
        assert!(fire_due(&service, now).await.unwrap().started.is_empty());

        let at = now + TimeDelta::seconds(30);
        let pass = fire_due(&service, at).await.unwrap();
        assert_eq!(pass.started.len(), 1, "{}: {pass:?}", db.name);
        let row = row(&service, "alice", &id).await;
        assert!(row.done);
        assert_eq!(row.next_fire_at, None);
        assert!(
            fire_due(&service, at + TimeDelta::days(1))
                .await
                .unwrap()
                .started
                .is_empty()
        );

        let pending = invoke(&service, "alice", "trigger.list", json!({}))
            .await
            .unwrap();
        assert_eq!(pending["triggers"], json!([]));
        let done = invoke(
            &service,
            "alice",
            "trigger.list",
            json!({ "status": "done" }),
        )
        .await
        .unwrap();
        assert_eq!(done["triggers"][0]["id"], id.as_str());
        assert_eq!(done["triggers"][0]["status"], "done");
    }
}

#[tokio::test]
async fn each_user_has_their_own_triggers_and_trigger_conversation() {
    for db in databases().await {
        let now = Utc::now().trunc_subsecs(0);
        let (service, _) = service(&db, &[]).await;
        let alice = insert(&service, "alice", "*/5 * * * *", now).await;
        let bob = insert(&service, "bob", "*/5 * * * *", now).await;

        let alices = invoke(&service, "alice", "trigger.list", json!({}))
            .await
            .unwrap();
        let ids: Vec<&str> = alices["triggers"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|trigger| trigger["id"].as_str())
            .collect();
        assert_eq!(ids, [alice.as_str()]);
        let steal = invoke(&service, "bob", "trigger.delete", json!({ "id": alice }))
            .await
            .unwrap_err();
        assert!(steal.contains("no trigger with id"), "{steal}");

        let pass = fire_due(&service, now).await.unwrap();
        assert_eq!(pass.started.len(), 2, "{}: {pass:?}", db.name);
        for (user, trigger) in [("alice", &alice), ("bob", &bob)] {
            let fired = pass
                .started
                .iter()
                .find(|fired| &fired.trigger_id == trigger)
                .unwrap();
            let conversation = trigger_conversation(&service, user).await.unwrap();
            assert_eq!(fired.prompt.conversation_id(), conversation.id());
            assert_eq!(conversation.user_id(), user);
        }

        let gone = invoke(&service, "alice", "trigger.delete", json!({ "id": alice }))
            .await
            .unwrap();
        assert_eq!(gone["deleted"], true);
        let bobs = invoke(&service, "bob", "trigger.list", json!({}))
            .await
            .unwrap();
        assert_eq!(bobs["triggers"][0]["id"], bob.as_str());
    }
}

#[tokio::test]
async fn a_slot_is_claimed_once_however_many_callers_race() {
    for db in databases().await {
        let now = Utc::now().trunc_subsecs(0);
        // Two servers on one database, racing whole passes over the same due trigger.
        let (one, _) = service(&db, &[]).await;
        let (two, _) = service(&db, &[]).await;
        let id = insert(&one, "alice", "* * * * *", now - TimeDelta::minutes(3)).await;
        let (first, second) = tokio::join!(fire_due(&one, now), fire_due(&two, now));
        let (first, second) = (first.unwrap(), second.unwrap());
        assert_eq!(
            first.started.len() + second.started.len(),
            1,
            "{}: {first:?} {second:?}",
            db.name
        );
        // Both made sure of the user's trigger conversation; there is one.
        let conversations = one.list("alice").await.unwrap();
        assert_eq!(conversations.len(), 1, "{}: {conversations:?}", db.name);

        // The claim itself: many takers of one slot, one winner.
        let row = row(&one, "alice", &id).await;
        let next = row.next_fire_at.map(|at| at + TimeDelta::minutes(1));
        let claims = futures::future::join_all((0..6).map(|turn| {
            let store = if turn % 2 == 0 {
                one.store()
            } else {
                two.store()
            }
            .clone();
            let row = row.clone();
            async move { table::claim(&store, &row, next, now).await.unwrap() }
        }))
        .await;
        assert_eq!(
            claims.iter().filter(|won| **won).count(),
            1,
            "{}: {claims:?}",
            db.name
        );
    }
}

#[tokio::test]
async fn a_trigger_whose_conversation_is_busy_waits_and_then_fires() {
    for db in databases().await {
        let now = Utc::now().trunc_subsecs(0);
        let (service, _) = service(&db, &["First.", "Second."]).await;
        let early = insert(&service, "alice", "0 * * * *", now - TimeDelta::minutes(2)).await;
        let late = insert(&service, "alice", "0 * * * *", now - TimeDelta::minutes(1)).await;

        let pass = fire_due(&service, now).await.unwrap();
        assert_eq!(pass.started.len(), 1, "{}: {pass:?}", db.name);
        assert_eq!(pass.started[0].trigger_id, early);
        assert_eq!(pass.busy, std::slice::from_ref(&late));
        // While the first prompt holds the conversation, the second stays due.
        let meanwhile = fire_due(&service, now).await.unwrap();
        assert_eq!(
            meanwhile.busy,
            std::slice::from_ref(&late),
            "{}: {meanwhile:?}",
            db.name
        );
        assert!(row(&service, "alice", &late).await.next_fire_at.unwrap() <= now);

        let first = pass.started.into_iter().next().unwrap();
        first.prompt.run().await.unwrap();
        let retry = fire_due(&service, now + TimeDelta::seconds(2))
            .await
            .unwrap();
        assert_eq!(retry.started.len(), 1, "{}: {retry:?}", db.name);
        assert_eq!(retry.started[0].trigger_id, late);
        retry
            .started
            .into_iter()
            .next()
            .unwrap()
            .prompt
            .run()
            .await
            .unwrap();
        let prompts = trigger_conversation(&service, "alice")
            .await
            .unwrap()
            .prompts()
            .await
            .unwrap();
        assert_eq!(prompts.len(), 2);
    }
}

#[tokio::test]
async fn the_scheduler_started_like_serve_fires_a_new_trigger_as_a_published_prompt() {
    for db in databases().await {
        let (service, _) = service(&db, &["Good morning, Ada."]).await;
        let mut events = service.runtime().services().events.subscribe(Some("ada"));
        let background = start_background_services(&service);
        assert_eq!(background.names(), ["trigger.scheduler"]);

        // Due a moment from now: the scheduler is asleep (`tickMs` is long) and must be woken
        // by the creation, then sleep just until the trigger is due.
        let at = Utc::now().trunc_subsecs(0) + TimeDelta::seconds(2);
        invoke(
            &service,
            "ada",
            "trigger.create",
            json!({ "name": "Greeting", "schedule": rfc3339(at), "input": "Say hello" }),
        )
        .await
        .unwrap();

        let completed = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                match events.next().await {
                    Some(Received::Event(event)) => {
                        if let EventPayload::PromptCompleted { prompt_id, .. } = &event.payload {
                            return prompt_id.clone();
                        }
                    }
                    Some(Received::Lagged(_)) => {}
                    None => panic!("the event stream ended"),
                }
            }
        })
        .await
        .expect("the trigger fired and its prompt completed");
        assert!(Utc::now() >= at);
        background.stop(Duration::from_secs(5)).await;

        let conversation = trigger_conversation(&service, "ada").await.unwrap();
        let prompts = conversation.prompts().await.unwrap();
        assert_eq!(prompts.len(), 1, "{}", db.name);
        assert_eq!(prompts[0].prompt.id, completed);
        assert_eq!(prompts[0].prompt.state, PromptState::Completed);
        let text = serde_json::to_string(&prompts[0].prompt.output).unwrap();
        assert!(text.contains("Good morning, Ada."), "{text}");
    }
}

// ----- helpers -----

/// A SQLite file, then (when configured) a new PostgreSQL database.
async fn databases() -> Vec<TestDb> {
    agentic_testing::test_databases().await.unwrap()
}

/// A service over `db` whose model answers `replies` in order, one per prompt.
async fn service(db: &TestDb, replies: &[&str]) -> (ConversationService, Arc<ScriptedProvider>) {
    let turns = replies
        .iter()
        .map(|reply| Turn {
            text: Some((*reply).to_owned()),
            ..Turn::default()
        })
        .collect();
    let provider = Arc::new(ScriptedProvider::new(turns));
    let config = Config::from_value(json!({
        "interpreter": { "sandbox": { "backend": "in-process" } },
        // Long enough that only a wake-up or a due trigger ends a sleep within a test.
        "trigger": { "tickMs": 60000, "busyRetryMs": 100 }
    }));
    let runtime = Runtime::builder()
        .config(config)
        .registered_plugins()
        .provider(provider.clone())
        .build()
        .await
        .unwrap();
    let service = ConversationService::open(Arc::new(runtime), &db.url)
        .await
        .unwrap();
    (service, provider)
}

/// Stores a cron trigger as if made earlier, due at `next_fire_at` (which may be long past).
async fn insert(
    service: &ConversationService,
    user: &str,
    cron: &str,
    next_fire_at: DateTime<Utc>,
) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    let created = next_fire_at - TimeDelta::days(1);
    table::insert(
        service.store(),
        TriggerRow {
            id: id.clone(),
            user_id: user.to_owned(),
            name: format!("{user}'s"),
            schedule: cron.to_owned(),
            kind: "cron".to_owned(),
            input: "Say hello".to_owned(),
            mode: "classic".to_owned(),
            next_fire_at: Some(next_fire_at),
            done: false,
            last_fired_at: None,
            last_prompt_id: None,
            last_error: None,
            created_at: created,
            updated_at: created,
        },
    )
    .await
    .unwrap();
    id
}

async fn row(service: &ConversationService, user: &str, id: &str) -> TriggerRow {
    table::get(service.store(), user, id)
        .await
        .unwrap()
        .unwrap()
}

/// Calls a tool as `user` would from a prompt; the error as text.
async fn invoke(
    service: &ConversationService,
    user: &str,
    tool: &str,
    input: Value,
) -> Result<Value, String> {
    agentic_testing::ToolHarness::on(service.runtime().services().clone())
        .call(user, tool, input)
        .await
        .map_err(|error| error.to_string())
}

fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

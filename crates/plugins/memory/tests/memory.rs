//! The memory tools called directly (as a prompt would call them once approved), on a SQLite
//! file and, when `AGENTIC_TEST_POSTGRES_URL` names a server, on a fresh PostgreSQL database:
//! permissions that must hold, per-user isolation, search, the context `prepare()` gives, and
//! compressed history filed into archival memory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

// Integration tests are a separate crate: name the plugin so the linker keeps it.
use agentic_plugin_memory as _;

use agentic_conversation::{ConversationService, PromptRequest};
use agentic_core::{Approval, Config, ContextItem, PromptState, Runtime, State, ToolContext};
use agentic_plugin_script::ScriptedProvider;
use agentic_testing::{TestDatabase as TestDb, ToolHarness};
use serde_json::{Value, json};

/// The content of `user`'s block `label` in `tier`.
async fn content(harness: &ToolHarness, user: &str, tier: &str, label: &str) -> String {
    let block = harness
        .ok(user, "memory.read", json!({ "tier": tier, "label": label }))
        .await;
    block["content"].as_str().unwrap().to_owned()
}

/// A SQLite file, then (when configured) a new PostgreSQL database.
async fn databases() -> Vec<TestDb> {
    agentic_testing::test_databases().await.unwrap()
}

fn persona_config() -> Value {
    json!({
        "memory": {
            "core": [
                { "label": "persona", "content": "You are Ferris.", "permission": "read-only" },
                { "label": "human", "content": "Alice lives in Oslo.", "permission": "familiar" }
            ],
            "working": [
                { "label": "journal", "content": "Day 1.", "permission": "append" }
            ]
        }
    })
}

#[tokio::test]
async fn core_blocks_are_in_every_prompt_and_working_labels_are_listed() {
    for db in databases().await {
        let harness = ToolHarness::open(&db.url, persona_config()).await.unwrap();
        let fresh = harness.prepare("alice").await.unwrap();
        assert_eq!(
            fresh.context,
            vec![
                item("Core memory: persona (read-only)", "You are Ferris."),
                item("Core memory: human (familiar)", "Alice lives in Oslo."),
                item(
                    "Memory",
                    "Working memory blocks (memory.read gives their content): journal (append, \
                     6/8000 characters)."
                ),
            ],
            "{}",
            db.name
        );
        harness
            .ok(
                "alice",
                "memory.write",
                json!({ "tier": "core", "label": "goals", "content": "Run a marathon." }),
            )
            .await;
        harness
            .ok(
                "alice",
                "memory.write",
                json!({ "tier": "archival", "label": "races", "content": "Oslo half, 2025." }),
            )
            .await;
        let later = harness.prepare("alice").await.unwrap();
        assert_eq!(
            later.context,
            vec![
                item("Core memory: persona (read-only)", "You are Ferris."),
                item("Core memory: human (familiar)", "Alice lives in Oslo."),
                item("Core memory: goals (read-write)", "Run a marathon."),
                item(
                    "Memory",
                    "Working memory blocks (memory.read gives their content): journal (append, \
                     6/8000 characters).\nArchival memory holds 1 entry; memory.search finds them."
                ),
            ],
            "{}",
            db.name
        );
    }
}

#[tokio::test]
async fn one_users_memory_is_invisible_and_untouchable_to_another() {
    for db in databases().await {
        let harness = ToolHarness::open(&db.url, json!({})).await.unwrap();
        for (tier, label) in [
            ("core", "human"),
            ("working", "plan"),
            ("archival", "secrets"),
        ] {
            harness
                .ok(
                    "alice",
                    "memory.write",
                    json!({ "tier": tier, "label": label, "content": "Alice's secret plan" }),
                )
                .await;
        }
        let listed = harness.ok("bob", "memory.list", json!({})).await;
        assert_eq!(
            listed,
            json!({ "blocks": [], "archival": { "entries": 0, "labels": [] } }),
            "{}",
            db.name
        );
        let found = harness
            .ok(
                "bob",
                "memory.search",
                json!({ "query": "secret plan", "includeWorking": true }),
            )
            .await;
        assert_eq!(found, json!({ "hits": [] }), "{}", db.name);
        let read = harness
            .refused(
                "bob",
                "memory.read",
                json!({ "tier": "working", "label": "plan" }),
            )
            .await;
        assert!(read.contains("no working memory block \"plan\""), "{read}");
        let read = harness
            .refused(
                "bob",
                "memory.read",
                json!({ "tier": "archival", "label": "secrets" }),
            )
            .await;
        assert!(read.contains("no archival entries labelled"), "{read}");
        assert!(
            harness.prepare("bob").await.unwrap().context.is_empty(),
            "{}",
            db.name
        );
        // Bob's block of the same name is his own.
        harness
            .ok(
                "bob",
                "memory.write",
                json!({ "tier": "working", "label": "plan", "content": "Bob's plan" }),
            )
            .await;
        assert_eq!(
            content(&harness, "alice", "working", "plan").await,
            "Alice's secret plan"
        );
        assert_eq!(
            content(&harness, "bob", "working", "plan").await,
            "Bob's plan"
        );
        let alice = harness
            .ok("alice", "memory.search", json!({ "query": "secret" }))
            .await;
        assert_eq!(alice["hits"].as_array().unwrap().len(), 1, "{}", db.name);
        let listed = harness
            .ok("alice", "memory.list", json!({ "tier": "archival" }))
            .await;
        assert_eq!(
            listed,
            json!({ "blocks": [], "archival": { "entries": 1, "labels": [
                { "label": "secrets", "entries": 1 }
            ] } }),
            "{}",
            db.name
        );
        let refused = harness
            .refused(
                "alice",
                "memory.write",
                json!({ "tier": "working", "label": "plan", "content": "a\u{0}b" }),
            )
            .await;
        assert_eq!(refused, "content must not contain NUL characters");
    }
}

#[tokio::test]
async fn read_only_and_append_only_blocks_hold_even_when_called_directly() {
    for db in databases().await {
        let harness = ToolHarness::open(&db.url, persona_config()).await.unwrap();
        for mode in ["replace", "append"] {
            let refused = harness
                .refused(
                    "alice",
                    "memory.write",
                    json!({ "tier": "core", "label": "persona", "content": "A pirate.", "mode": mode }),
                )
                .await;
            assert_eq!(refused, "core memory block \"persona\" is read-only");
        }
        assert_eq!(
            content(&harness, "alice", "core", "persona").await,
            "You are Ferris."
        );

        let refused = harness
            .refused(
                "alice",
                "memory.write",
                json!({ "tier": "working", "label": "journal", "content": "Only day 2." }),
            )
            .await;
        assert!(refused.contains("only takes appends"), "{refused}");
        assert_eq!(
            content(&harness, "alice", "working", "journal").await,
            "Day 1."
        );
        harness
            .ok(
                "alice",
                "memory.write",
                json!({ "tier": "working", "label": "journal", "content": "Day 2.", "mode": "append" }),
            )
            .await;
        assert_eq!(
            content(&harness, "alice", "working", "journal").await,
            "Day 1.\nDay 2."
        );

        // A write cannot loosen a permission, whatever the block.
        let refused = harness
            .refused(
                "alice",
                "memory.write",
                json!({ "tier": "working", "label": "journal", "content": "x",
                        "mode": "append", "permission": "read-write" }),
            )
            .await;
        assert!(
            refused.contains("cannot change an existing block's permission"),
            "{refused}"
        );
        harness
            .ok(
                "alice",
                "memory.write",
                json!({ "tier": "working", "label": "log", "content": "one", "permission": "append" }),
            )
            .await;
        let refused = harness
            .refused(
                "alice",
                "memory.write",
                json!({ "tier": "working", "label": "log", "content": "two", "permission": "read-write" }),
            )
            .await;
        assert!(refused.contains("has permission \"append\""), "{refused}");
        assert_eq!(content(&harness, "alice", "working", "log").await, "one");
    }
}

#[tokio::test]
async fn config_decides_the_permission_of_configured_blocks_even_after_they_were_written() {
    for db in databases().await {
        let open = json!({ "memory": { "core": [
            { "label": "human", "content": "Alice.", "permission": "read-write" }
        ] } });
        let before = ToolHarness::open(&db.url, open).await.unwrap();
        before
            .ok(
                "alice",
                "memory.write",
                json!({ "tier": "core", "label": "human", "content": "Alice, written by the model." }),
            )
            .await;
        // The operator makes the block read-only with new content.
        let tight = json!({ "memory": { "core": [
            { "label": "human", "content": "Alice, as the operator says.", "permission": "read-only" }
        ] } });
        let after = ToolHarness::open(&db.url, tight).await.unwrap();
        assert_eq!(
            content(&after, "alice", "core", "human").await,
            "Alice, as the operator says.",
            "{}",
            db.name
        );
        let refused = after
            .refused(
                "alice",
                "memory.write",
                json!({ "tier": "core", "label": "human", "content": "x", "mode": "append" }),
            )
            .await;
        assert_eq!(refused, "core memory block \"human\" is read-only");
    }
}

#[tokio::test]
async fn familiar_blocks_need_approval_and_the_handler_refuses_a_write_that_skipped_it() {
    for db in databases().await {
        let harness = ToolHarness::open(&db.url, persona_config()).await.unwrap();
        let prepared = harness.prepare("alice").await.unwrap();
        let approval = |input: Value| prepared.tools.approval("memory.write", &input);
        assert_eq!(
            approval(
                json!({ "tier": "core", "label": "human", "content": "Bergen.", "mode": "append" })
            ),
            Approval::Required {
                reason: "appends to the familiar core memory block \"human\": \"Bergen.\"".into()
            }
        );
        assert_eq!(
            approval(
                json!({ "tier": "working", "label": "diary", "content": "x", "permission": "familiar" })
            ),
            Approval::Required {
                reason: "creates the familiar working memory block \"diary\": \"x\"".into()
            }
        );
        assert_eq!(
            approval(json!({ "tier": "working", "label": "diary", "content": "x" })),
            Approval::NotRequired
        );
        assert_eq!(
            approval(json!({ "tier": "archival", "label": "human", "content": "x" })),
            Approval::NotRequired
        );

        // Another prompt creates the familiar block `diary` after this prompt's tools were
        // made, so their approval rule does not know it yet: the handler refuses the write,
        // and from then on the rule asks.
        let stale = harness.prepare("alice").await.unwrap();
        harness
            .ok(
                "alice",
                "memory.write",
                json!({ "tier": "working", "label": "diary", "content": "Dear diary.",
                        "permission": "familiar" }),
            )
            .await;
        let write = json!({ "tier": "working", "label": "diary", "content": "Overwritten." });
        assert_eq!(
            stale.tools.approval("memory.write", &write),
            Approval::NotRequired
        );
        let refused = harness
            .call_with(&stale, "alice", "memory.write", write.clone())
            .await
            .unwrap_err()
            .to_string();
        assert!(refused.contains("needs a person's approval"), "{refused}");
        assert_eq!(
            content(&harness, "alice", "working", "diary").await,
            "Dear diary."
        );
        assert!(matches!(
            stale.tools.approval("memory.write", &write),
            Approval::Required { .. }
        ));
        // A fresh prompt knows from the start.
        assert!(matches!(
            harness
                .prepare("alice")
                .await
                .unwrap()
                .tools
                .approval("memory.write", &write),
            Approval::Required { .. }
        ));
    }
}

#[tokio::test]
async fn size_and_count_limits_hold() {
    for db in databases().await {
        let config = json!({ "memory": {
            "coreLimit": 10,
            "maxWorkingBlocks": 2,
            "archivalEntryLimit": 12,
            "working": [{ "label": "notes", "limit": 5 }]
        } });
        let harness = ToolHarness::open(&db.url, config).await.unwrap();
        let refused = harness
            .refused(
                "alice",
                "memory.write",
                json!({ "tier": "core", "label": "human", "content": "eleven char" }),
            )
            .await;
        assert!(
            refused.contains("would hold 11 characters, over its limit of 10"),
            "{refused}"
        );
        harness
            .ok(
                "alice",
                "memory.write",
                json!({ "tier": "working", "label": "notes", "content": "ab" }),
            )
            .await;
        let refused = harness
            .refused(
                "alice",
                "memory.write",
                json!({ "tier": "working", "label": "notes", "content": "cde", "mode": "append" }),
            )
            .await;
        assert!(
            refused.contains("would hold 6 characters, over its limit of 5"),
            "{refused}"
        );
        harness
            .ok(
                "alice",
                "memory.write",
                json!({ "tier": "working", "label": "plan", "content": "x" }),
            )
            .await;
        let refused = harness
            .refused(
                "alice",
                "memory.write",
                json!({ "tier": "working", "label": "third", "content": "x" }),
            )
            .await;
        assert!(
            refused.contains("working memory holds at most 2 blocks"),
            "{refused}"
        );
        let refused = harness
            .refused(
                "alice",
                "memory.write",
                json!({ "tier": "archival", "label": "long", "content": "thirteen char" }),
            )
            .await;
        assert!(
            refused.contains("at most 12 characters, got 13"),
            "{refused}"
        );
        let listed = harness
            .ok("alice", "memory.list", json!({ "tier": "working" }))
            .await;
        assert_eq!(
            listed,
            json!({ "blocks": [
                { "tier": "working", "label": "notes", "permission": "read-write", "chars": 2, "limit": 5 },
                { "tier": "working", "label": "plan", "permission": "read-write", "chars": 1, "limit": 8000 }
            ] }),
            "{}",
            db.name
        );
    }
}

#[tokio::test]
async fn search_ranks_by_words_matched_then_occurrences_then_recency() {
    for db in databases().await {
        let harness = ToolHarness::open(&db.url, json!({})).await.unwrap();
        for (label, content) in [
            ("trips", "Took the ferry to Oslo."),
            ("trips", "OSLO: the fjord ferry, then the Oslo opera."),
            ("trips", "Bergen in the rain."),
            ("islands", "Ærø: a small ferry island."),
            ("food", "100% rye bread_with butter"),
        ] {
            harness
                .ok(
                    "alice",
                    "memory.write",
                    json!({ "tier": "archival", "label": label, "content": content }),
                )
                .await;
        }
        harness
            .ok(
                "alice",
                "memory.write",
                json!({ "tier": "working", "label": "packing", "content": "Seasick pills for the ferry." }),
            )
            .await;
        let hits = |result: Value| -> Vec<(String, String, Vec<String>)> {
            result["hits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|hit| {
                    (
                        hit["tier"].as_str().unwrap().to_owned(),
                        hit["content"].as_str().unwrap().to_owned(),
                        serde_json::from_value(hit["matched"].clone()).unwrap(),
                    )
                })
                .collect()
        };
        let found = harness
            .ok("alice", "memory.search", json!({ "query": "oslo FERRY" }))
            .await;
        let strings = |terms: &[&str]| terms.iter().map(|term| (*term).to_owned()).collect();
        assert_eq!(
            hits(found),
            vec![
                (
                    "archival".to_owned(),
                    "OSLO: the fjord ferry, then the Oslo opera.".to_owned(),
                    strings(&["oslo", "ferry"])
                ),
                (
                    "archival".to_owned(),
                    "Took the ferry to Oslo.".to_owned(),
                    strings(&["oslo", "ferry"])
                ),
                (
                    "archival".to_owned(),
                    "Ærø: a small ferry island.".to_owned(),
                    strings(&["ferry"])
                ),
            ],
            "{}",
            db.name
        );
        let found = harness
            .ok(
                "alice",
                "memory.search",
                json!({ "query": "ferry", "includeWorking": true, "limit": 2 }),
            )
            .await;
        assert_eq!(
            hits(found),
            vec![
                (
                    "working".to_owned(),
                    "Seasick pills for the ferry.".to_owned(),
                    strings(&["ferry"])
                ),
                (
                    "archival".to_owned(),
                    "Ærø: a small ferry island.".to_owned(),
                    strings(&["ferry"])
                ),
            ],
            "{}: equal scores: the working block, then the newest entry",
            db.name
        );
        // Case folding beyond ASCII, and SQL wildcards in the query are only punctuation.
        let found = harness
            .ok("alice", "memory.search", json!({ "query": "ÆRØ" }))
            .await;
        assert_eq!(hits(found).len(), 1, "{}", db.name);
        let found = harness
            .ok("alice", "memory.search", json!({ "query": "100% bread_" }))
            .await;
        assert_eq!(
            hits(found),
            vec![(
                "archival".to_owned(),
                "100% rye bread_with butter".to_owned(),
                strings(&["100", "bread"])
            )]
        );
        let refused = harness
            .refused("alice", "memory.search", json!({ "query": "%_ --" }))
            .await;
        assert!(refused.contains("has no words to search for"), "{refused}");
        let refused = harness
            .refused(
                "alice",
                "memory.search",
                json!({ "query": "oslo", "limit": 0 }),
            )
            .await;
        assert!(
            refused.contains("limit must be between 1 and 25"),
            "{refused}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compression_files_the_archived_prompts_into_archival_memory() {
    for db in databases().await {
        let answer = "Oslo is the capital of Norway, at the head of the Oslofjord, with about \
                      700,000 people in the city proper and a million in the urban area.";
        let turns = format!(
            "- text: \"{answer}\"\n\
             - text: \"Again: {answer}\"\n\
             - text: \"Once more: {answer}\"\n\
             - text: The user asked about Oslo three times.\n\
             - text: Bergen.\n"
        );
        let provider = Arc::new(ScriptedProvider::from_yaml(&turns).unwrap());
        let config = json!({
            "conversation": { "contextWindow": 200, "compressAt": 0.5, "keepRecent": 2 }
        });
        let runtime = Runtime::builder()
            .config(Config::from_value(config))
            .registered_plugins()
            .provider(provider.clone())
            .build()
            .await
            .unwrap();
        let runtime = Arc::new(runtime);
        let service = ConversationService::open(runtime.clone(), &db.url)
            .await
            .unwrap();
        let harness = ToolHarness::on(runtime.services().clone());
        let mut conversation = service.create("alice").await.unwrap();
        for input in [
            "Tell me about the capital",
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
        let stored = conversation.prompts().await.unwrap();
        let archived: Vec<&str> = stored
            .iter()
            .filter(|stored| stored.archived)
            .map(|stored| stored.prompt.id.as_str())
            .collect();
        assert_eq!(archived.len(), 1, "{}: compression ran once", db.name);

        let found = harness
            .ok("alice", "memory.search", json!({ "query": "capital" }))
            .await;
        let hits = found["hits"].as_array().unwrap();
        assert_eq!(hits.len(), 1, "{}: {found}", db.name);
        assert_eq!(hits[0]["label"], "conversation");
        assert_eq!(hits[0]["conversationId"], conversation.id());
        assert_eq!(
            hits[0]["content"],
            format!("User: Tell me about the capital\nAssistant: {answer}")
        );
        let read = harness
            .ok(
                "alice",
                "memory.read",
                json!({ "tier": "archival", "label": "conversation" }),
            )
            .await;
        assert_eq!(read["entries"].as_array().unwrap().len(), 1, "{}", db.name);
        let bobs = harness
            .ok("bob", "memory.search", json!({ "query": "capital" }))
            .await;
        assert_eq!(bobs, json!({ "hits": [] }), "{}", db.name);
        let context = harness.prepare("alice").await.unwrap().context;
        assert_eq!(
            context,
            vec![item(
                "Memory",
                "Archival memory holds 1 entry; memory.search finds them."
            )],
            "{}",
            db.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compression_files_nothing_when_archiving_is_turned_off() {
    for db in databases().await {
        let turns = "- text: \"A long answer about Oslo and the fjord, the opera, the islands and the ferries.\"\n\
                     - text: \"Another long answer about Oslo and the fjord, the opera and the ferries.\"\n\
                     - text: \"A third long answer about Oslo and the fjord, the opera and the ferries.\"\n\
                     - text: Summary.\n\
                     - text: Done.\n";
        let provider = Arc::new(ScriptedProvider::from_yaml(turns).unwrap());
        let config = json!({
            "conversation": { "contextWindow": 100, "compressAt": 0.5, "keepRecent": 2 },
            "memory": { "archiveCompressed": false }
        });
        let runtime = Arc::new(
            Runtime::builder()
                .config(Config::from_value(config))
                .registered_plugins()
                .provider(provider.clone())
                .build()
                .await
                .unwrap(),
        );
        let service = ConversationService::open(runtime.clone(), &db.url)
            .await
            .unwrap();
        let mut conversation = service.create("alice").await.unwrap();
        for input in ["One", "Two", "Three", "Four"] {
            conversation
                .prompt(PromptRequest {
                    input: Some(input.into()),
                    ..PromptRequest::default()
                })
                .await
                .unwrap();
        }
        let stored = conversation.prompts().await.unwrap();
        assert!(
            stored.iter().any(|stored| stored.archived),
            "{}: compression ran",
            db.name
        );
        let harness = ToolHarness::on(runtime.services().clone());
        let listed = harness
            .ok("alice", "memory.list", json!({ "tier": "archival" }))
            .await;
        assert_eq!(
            listed,
            json!({ "blocks": [], "archival": { "entries": 0, "labels": [] } })
        );
    }
}

#[tokio::test]
async fn without_a_database_configured_blocks_still_reach_the_prompt_and_tools_say_why_not() {
    let runtime = Runtime::builder()
        .config(Config::from_value(persona_config()))
        .registered_plugins()
        .build()
        .await
        .unwrap();
    let services = runtime.services().clone();
    let prepared = services
        .prepare("alice", "p", "classic", &State::default())
        .await
        .unwrap();
    assert_eq!(
        prepared.context[..2],
        [
            item("Core memory: persona (read-only)", "You are Ferris."),
            item("Core memory: human (familiar)", "Alice lives in Oslo."),
        ]
    );
    let context = ToolContext::new("alice", "p", State::default(), services.clone());
    let error = prepared
        .tools
        .invoke(
            context,
            "memory.read",
            json!({ "tier": "core", "label": "persona" }),
        )
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "memory needs the conversation database, which is not open here"
    );
}

#[tokio::test]
async fn bad_config_fails_at_startup_with_the_reason() {
    for (memory, expected) in [
        (
            json!({ "core": [{ "label": "a" }, { "label": "a" }] }),
            "memory.core configures block \"a\" twice",
        ),
        (
            json!({ "core": [{ "label": "a", "content": "toolong", "limit": 3 }] }),
            "memory.core.a: content has 7 characters, over its limit of 3",
        ),
        (
            json!({ "working": [{ "label": "no spaces" }] }),
            "label \"no spaces\" must be",
        ),
        // Refused by the plugin's config schema before it sets up, naming the key.
        (
            json!({ "core": [{ "label": "a", "permission": "write-only" }] }),
            "section [memory]: `memory.core.0.permission`: \"write-only\" is not valid",
        ),
        (
            json!({ "colour": "red" }),
            "section [memory]: `memory`: Additional properties are not allowed ('colour' was unexpected)",
        ),
        (
            json!({ "maxCoreBlocks": 1, "core": [{ "label": "a" }, { "label": "b" }] }),
            "memory.core configures 2 blocks, more than maxCoreBlocks (1)",
        ),
    ] {
        let error = Runtime::builder()
            .config(Config::from_value(json!({ "memory": memory })))
            .registered_plugins()
            .build()
            .await
            .err()
            .unwrap_or_else(|| panic!("{memory} should be refused"));
        let text = format!("{error:#}");
        assert!(text.contains(expected), "{memory}: {text}");
    }
}

fn item(title: &str, content: &str) -> ContextItem {
    ContextItem {
        title: title.to_owned(),
        content: content.to_owned(),
    }
}

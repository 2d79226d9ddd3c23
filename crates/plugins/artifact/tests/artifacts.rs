//! The artifact tools called directly, as a mode would call them, on a SQLite file and (when
//! `AGENTIC_TEST_POSTGRES_URL` names a server, as `.ci/run` does) on a fresh PostgreSQL
//! database: per-user isolation, the size cap, bad input and unknown ids.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// Integration tests are a separate crate: name the plugin so the linker keeps it.
use agentic_plugin_artifact as _;

use agentic_core::{Config, Runtime, ToolError};
use agentic_testing::{TestDatabase as TestDb, ToolHarness};
use serde_json::{Value, json};

#[tokio::test]
async fn artifacts_are_kept_per_user() {
    for db in databases().await {
        let tools = ToolHarness::open(&db.url, json!({})).await.unwrap();
        let csv = tools
            .call(
                "alice",
                "artifact.store",
                json!({ "data": "day,sales\nmon,3\ntue,5\n", "type": "CSV", "description": " Sales " }),
            )
            .await
            .unwrap();
        // Metadata only: the data never comes back from a store.
        let mut keys: Vec<&str> = csv
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["createdAt", "description", "id", "size", "type"],
            "{}",
            db.name
        );
        assert_eq!(
            (&csv["type"], &csv["size"], &csv["description"]),
            (&json!("csv"), &json!(22), &json!("Sales")),
            "{}",
            db.name
        );
        let numbers = tools
            .call("alice", "artifact.store", json!({ "data": [1, 2, 3] }))
            .await
            .unwrap();
        assert_eq!(
            (&numbers["type"], &numbers["size"]),
            (&json!("json"), &json!(7))
        );
        assert!(numbers.get("description").is_none(), "{numbers}");

        let bobs = tools.call("bob", "artifact.list", json!({})).await.unwrap();
        assert_eq!(bobs, json!({ "artifacts": [], "total": 0 }), "{}", db.name);
        let stolen = tools
            .call("bob", "artifact.get", json!({ "id": csv["id"] }))
            .await
            .unwrap_err();
        assert!(
            stolen.to_string().starts_with("no artifact with id"),
            "{stolen}"
        );

        let alices = tools
            .call("alice", "artifact.list", json!({}))
            .await
            .unwrap();
        let ids: Vec<&Value> = alices["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| &a["id"])
            .collect();
        assert_eq!(
            ids,
            [&numbers["id"], &csv["id"]],
            "newest first on {}",
            db.name
        );
        assert_eq!(alices["total"], 2);
        assert!(alices["artifacts"][0].get("data").is_none(), "{alices}");
        assert_eq!(
            alices["artifacts"][1], csv,
            "list and store agree on {}",
            db.name
        );

        let only_csv = tools
            .call("alice", "artifact.list", json!({ "type": "csv" }))
            .await
            .unwrap();
        assert_eq!(only_csv["artifacts"], json!([csv]), "{}", db.name);
        let newest = tools
            .call("alice", "artifact.list", json!({ "limit": 1 }))
            .await
            .unwrap();
        assert_eq!(
            (
                newest["artifacts"].as_array().unwrap().len(),
                &newest["total"]
            ),
            (1, &json!(2))
        );

        let got = tools
            .call("alice", "artifact.get", json!({ "id": csv["id"] }))
            .await
            .unwrap();
        let mut expected = csv.clone();
        expected["data"] = json!("day,sales\nmon,3\ntue,5\n");
        assert_eq!(got, expected, "{}", db.name);
    }
}

#[tokio::test]
async fn data_comes_back_exactly_as_stored() {
    let data = json!({
        "text": "naïve \u{0} null byte, \"quotes\", emoji 🦀",
        "numbers": [0, -1, 1.5, 12345678901234567i64, 1e-7],
        "nested": { "empty": {}, "list": [[], [null], true] },
        "z": 1,
        "a": 2,
    });
    for db in databases().await {
        let tools = ToolHarness::open(&db.url, json!({})).await.unwrap();
        for data in [data.clone(), json!("plain text"), json!(42), json!(false)] {
            let stored = tools
                .call("alice", "artifact.store", json!({ "data": data }))
                .await
                .unwrap();
            let got = tools
                .call("alice", "artifact.get", json!({ "id": stored["id"] }))
                .await
                .unwrap();
            assert_eq!(got["data"], data, "{}", db.name);
            // Key order is kept too, not only the values.
            assert_eq!(got["data"].to_string(), data.to_string(), "{}", db.name);
        }
    }
}

#[tokio::test]
async fn the_size_cap_comes_from_config() {
    for db in databases().await {
        let tools = ToolHarness::open(&db.url, json!({ "artifact": { "maxBytes": 16 } }))
            .await
            .unwrap();
        let at_cap = tools
            .call("alice", "artifact.store", json!({ "data": "x".repeat(16) }))
            .await
            .unwrap();
        assert_eq!(at_cap["size"], 16);
        let over = tools
            .call("alice", "artifact.store", json!({ "data": "x".repeat(17) }))
            .await
            .unwrap_err();
        assert_eq!(
            over,
            ToolError::Failed(
                "data is 17 bytes, over the limit of 16 bytes for one artifact \
                 (config artifact.maxBytes); store it in smaller parts"
                    .to_owned()
            )
        );
        // [10,20,30,40,50,60] is 19 bytes of JSON.
        let array = tools
            .call(
                "alice",
                "artifact.store",
                json!({ "data": [10, 20, 30, 40, 50, 60] }),
            )
            .await
            .unwrap_err();
        assert!(array.to_string().starts_with("data is 19 bytes"), "{array}");
        let listed = tools
            .call("alice", "artifact.list", json!({}))
            .await
            .unwrap();
        assert_eq!(
            listed["total"], 1,
            "refused data is not kept on {}",
            db.name
        );
    }
}

#[tokio::test]
async fn a_cap_of_zero_is_a_startup_error() {
    let built = Runtime::builder()
        .config(Config::from_value(json!({ "artifact": { "maxBytes": 0 } })))
        .registered_plugins()
        .build()
        .await;
    let Err(error) = built else {
        panic!("maxBytes = 0 was accepted");
    };
    assert!(
        format!("{error:#}").contains("artifact.maxBytes must be at least 1, not 0"),
        "{error:#}"
    );
}

#[tokio::test]
async fn bad_input_gets_errors_the_model_can_act_on() {
    let db = databases().await.remove(0);
    let tools = ToolHarness::open(&db.url, json!({})).await.unwrap();
    let invalid = |error: ToolError| match error {
        ToolError::InvalidInput { message, .. } => message,
        other => panic!("expected invalid input, got {other:?}"),
    };
    let unknown_field = tools
        .call("alice", "artifact.store", json!({ "data": 1, "name": "x" }))
        .await
        .unwrap_err();
    assert!(invalid(unknown_field).contains("name"));
    let no_data = tools
        .call("alice", "artifact.store", json!({ "type": "csv" }))
        .await
        .unwrap_err();
    assert!(invalid(no_data).contains("\"data\" is a required property"));
    let no_id = tools
        .call("alice", "artifact.get", json!({}))
        .await
        .unwrap_err();
    assert!(invalid(no_id).contains("\"id\" is a required property"));
    let zero = tools
        .call("alice", "artifact.list", json!({ "limit": 0 }))
        .await
        .unwrap_err();
    assert!(invalid(zero).contains("limit"));

    let failed = |error: ToolError| match error {
        ToolError::Failed(message) => message,
        other => panic!("expected a failure, got {other:?}"),
    };
    let null = tools
        .call("alice", "artifact.store", json!({ "data": null }))
        .await
        .unwrap_err();
    assert!(failed(null).starts_with("data is null; pass the value to keep"));
    let blank_type = tools
        .call("alice", "artifact.list", json!({ "type": "  " }))
        .await
        .unwrap_err();
    assert_eq!(
        failed(blank_type),
        "type must not be empty; leave it out instead"
    );
    let unknown = tools
        .call("alice", "artifact.get", json!({ "id": "no-such-id" }))
        .await
        .unwrap_err();
    assert_eq!(
        failed(unknown),
        "no artifact with id \"no-such-id\"; artifact.list shows your artifacts and their ids"
    );
    let file = tools
        .call(
            "alice",
            "artifact.get",
            json!({ "id": "orders/order-1.json" }),
        )
        .await
        .unwrap_err();
    assert!(
        failed(file).ends_with(
            "\"orders/order-1.json\" looks like a file: artifacts are data that artifact.store \
             kept, and files are read with the file tools, e.g. fs.read({ path: \"orders/order-1.json\" })"
        )
    );
}

#[tokio::test]
async fn without_a_database_the_tools_say_so() {
    let runtime = Runtime::builder()
        .registered_plugins()
        .build()
        .await
        .unwrap();
    let tools = ToolHarness::on(runtime.services().clone());
    let error = tools
        .call("alice", "artifact.list", json!({}))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "artifacts need the conversation database, which is not open here"
    );
}

/// A SQLite file, then (when configured) a new PostgreSQL database.
async fn databases() -> Vec<TestDb> {
    agentic_testing::test_databases().await.unwrap()
}

#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The HTTP API against a real server on 127.0.0.1 with a real client: every route, every
//! error case, cross-user isolation, per-user limits, SSE with Last-Event-ID, shutdown.

mod support;

use std::time::{Duration, Instant};

use agentic_api::ApiConfig;
use serde_json::{Value, json};
use support::{Server, json_of, read_events, server, server_with, server_with_files};

/// Sends the request and reads its error answer.
async fn error_for(request: reqwest::RequestBuilder) -> (u16, String) {
    error_of(request.send().await.unwrap()).await
}

async fn error_of(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    let code = body["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("not our error shape: {body}"))
        .to_owned();
    assert!(body["error"]["message"].as_str().is_some(), "{body}");
    (status, code)
}

#[tokio::test]
async fn health_openapi_and_docs_need_no_identity_and_work_offline() {
    let mut server = server("[]").await;
    let health: Value = server
        .client
        .get(format!("{}/api/health", server.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");

    let document: Value = server
        .client
        .get(format!("{}/api/openapi.json", server.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(document["openapi"], "3.0.3");
    let mut described = agentic_api::openapi::described_routes();
    described.sort();
    let mut expected: Vec<(String, String)> = [
        ("POST", "/api/prompt"),
        ("GET", "/api/prompts/{id}"),
        ("POST", "/api/prompts/{id}/approve"),
        ("POST", "/api/prompts/{id}/reject"),
        ("POST", "/api/prompts/{id}/cancel"),
        ("POST", "/api/prompts/{id}/continue"),
        ("GET", "/api/prompts/{id}/export"),
        ("POST", "/api/prompts/{id}/replay"),
        ("GET", "/api/conversations"),
        ("GET", "/api/conversations/{id}"),
        ("DELETE", "/api/conversations/{id}"),
        ("PATCH", "/api/conversations/{id}"),
        ("GET", "/api/scopes"),
        ("DELETE", "/api/scopes/{id}"),
        ("GET", "/api/tools"),
        ("GET", "/api/tools/{id}"),
        ("POST", "/api/tools/{id}/invoke"),
        ("GET", "/api/capabilities"),
        ("GET", "/api/files"),
        ("GET", "/api/events/stream"),
        ("GET", "/api/health"),
    ]
    .iter()
    .map(|(method, path)| ((*method).to_owned(), (*path).to_owned()))
    .collect();
    expected.sort();
    assert_eq!(described, expected);
    // And the router serves each of them (no "no such route", no 405).
    for (method, path) in &described {
        if path == "/api/events/stream" {
            continue; // a stream that never ends; covered by its own tests
        }
        let url = format!(
            "{}{}",
            server.base,
            path.replace("{id}", &uuid::Uuid::new_v4().to_string())
        );
        let response = server
            .client
            .request(method.parse().unwrap(), url)
            .header("x-user-id", "alice")
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        assert_ne!(status, 405, "{method} {path}");
        assert!(!body.contains("no such route"), "{method} {path}: {body}");
    }
    // Every schema reference resolves inside the document.
    let text = document.to_string();
    for reference in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = reference.split('"').next().unwrap();
        assert!(
            document["components"]["schemas"].get(name).is_some(),
            "dangling $ref {name}"
        );
    }

    let page = server
        .client
        .get(format!("{}/api/docs/", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("swagger"));
    let script = server
        .client
        .get(format!("{}/api/docs/swagger-ui-bundle.js", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(script.status(), 200);
    assert!(script.bytes().await.unwrap().len() > 100_000);
    server.shutdown().await;
}

#[tokio::test]
async fn identity_is_required_and_checked() {
    let mut server = server("[]").await;
    let url = format!("{}/api/conversations", server.base);
    assert_eq!(
        error_for(server.client.get(&url)).await,
        (401, "unauthorized".to_owned())
    );
    for bad in ["", "   ", "a b", "../../etc/passwd", &"x".repeat(200)] {
        assert_eq!(
            error_for(server.client.get(&url).header("x-user-id", bad))
                .await
                .0,
            401,
            "{bad:?}"
        );
    }
    let ok = server
        .get("alice", "/api/conversations")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    server.shutdown().await;
}

#[tokio::test]
async fn a_token_is_required_when_configured() {
    let mut server = server_with(
        "[]",
        ApiConfig {
            token: Some("s3cret".into()),
            ..ApiConfig::default()
        },
    )
    .await;
    assert_eq!(error_for(server.get("alice", "/api/tools")).await.0, 401);
    assert_eq!(
        error_for(server.get("alice", "/api/tools").bearer_auth("guess"))
            .await
            .0,
        401
    );
    let right = server
        .get("alice", "/api/tools")
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), 200);
    // A token does not replace the user header.
    assert_eq!(
        error_for(
            server
                .client
                .get(format!("{}/api/tools", server.base))
                .bearer_auth("s3cret")
        )
        .await
        .0,
        401
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_prompt_runs_in_the_background_and_its_conversation_persists() {
    let turns = r#"
- toolCalls:
    - { name: kit.add, input: { a: 2, b: 3 } }
- text: It is 5.
- code: |
    const r = kitAdd({ a: 5, b: 1 });
    output(`Now ${r}.`);
    done();
"#;
    let mut server = server(turns).await;
    let (prompt_id, conversation_id) = server
        .prompt("alice", json!({ "input": "What is 2 + 3?" }))
        .await;
    let prompt = server.wait_for("alice", &prompt_id, &["completed"]).await;
    assert_eq!(prompt["conversationId"], conversation_id.as_str());
    assert_eq!(prompt["mode"], "classic");
    assert_eq!(prompt["output"].as_array().unwrap().len(), 2);

    // Continue it in code mode.
    let (second, same) = server
        .prompt(
            "alice",
            json!({ "input": "Add one", "mode": "code", "conversationId": conversation_id }),
        )
        .await;
    assert_eq!(same, conversation_id);
    let prompt = server.wait_for("alice", &second, &["completed"]).await;
    assert_eq!(prompt["mode"], "code");

    // The code prompt as a test case, with the classic one before it as history.
    let export = server
        .get("alice", &format!("/api/prompts/{second}/export?as=test"))
        .send()
        .await
        .unwrap();
    assert_eq!(export.status(), 200);
    assert_eq!(
        export.headers()["content-type"],
        "application/yaml; charset=utf-8"
    );
    let case = agentic_testing::TimelineCase::from_yaml(&export.text().await.unwrap()).unwrap();
    assert_eq!(case.input, "Add one");
    assert_eq!(case.history.len(), 1);
    assert_eq!(case.turns.len(), 3);
    assert!(case.turns[2].code.as_deref().unwrap().contains("kitAdd"));
    let recorded = case.recorded.unwrap();
    let calls: Vec<(&str, &Value)> = recorded
        .calls
        .iter()
        .map(|call| (call.tool.as_str(), &call.input))
        .collect();
    assert_eq!(
        calls,
        [
            ("kit.add", &json!({ "a": 2, "b": 3 })),
            ("kit.add", &json!({ "a": 5, "b": 1 }))
        ]
    );
    // Played again from the recording, then with an edited program that asks something new.
    let replay = format!("/api/prompts/{second}/replay");
    let replayed: Value = json_of(server.post("alice", &replay, json!({}))).await;
    assert_eq!(replayed["prompt"]["state"], "completed", "{replayed}");
    assert_eq!(replayed["divergences"], json!([]));
    assert_eq!(replayed["unusedCalls"], 0);
    let execution = prompt["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|output| output["function"] == "code.execute")
        .unwrap()["id"]
        .clone();
    let edited: Value = json_of(server.post(
        "alice",
        &replay,
        json!({
            "code": "const r = kitAdd({ a: 7, b: 1 });\noutput(`Now ${r}.`);\ndone();",
            "execution": execution,
        }),
    ))
    .await;
    assert_eq!(
        edited["divergences"],
        json!([{
            "call": 2,
            "made": "kit.add({\"a\":7,\"b\":1})",
            "recorded": "kit.add({\"a\":5,\"b\":1})"
        }]),
        "{edited}"
    );
    assert_eq!(
        error_for(server.post("alice", &replay, json!({ "code": "done();", "program": 4 }))).await,
        (409, "not_exportable".to_owned())
    );
    assert_eq!(
        error_for(server.get("alice", &format!("/api/prompts/{second}/export?as=json"))).await,
        (400, "invalid_query".to_owned())
    );
    assert_eq!(
        error_for(server.get("bob", &format!("/api/prompts/{second}/export?as=test")))
            .await
            .0,
        404
    );

    let list: Value = server.get_json("alice", "/api/conversations").await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["title"], "What is 2 + 3?");
    let detail: Value = server
        .get_json("alice", &format!("/api/conversations/{conversation_id}"))
        .await;
    assert_eq!(detail["id"], conversation_id.as_str());
    assert_eq!(detail["prompts"].as_array().unwrap().len(), 2);

    let deleted = server
        .delete("alice", &format!("/api/conversations/{conversation_id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    assert_eq!(
        error_for(server.get("alice", &format!("/api/conversations/{conversation_id}"))).await,
        (404, "not_found".to_owned())
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_conversation_is_renamed_by_its_owner_and_keeps_the_title() {
    let mut server = server("- text: Five.\n- text: Six.\n").await;
    let (first, conversation) = server
        .prompt("alice", json!({ "input": "What is 2 + 3?" }))
        .await;
    server.wait_for("alice", &first, &["completed"]).await;
    let path = format!("/api/conversations/{conversation}");

    let renamed = server
        .patch("alice", &path, json!({ "title": "  Sums  " }))
        .send()
        .await
        .unwrap();
    assert_eq!(renamed.status(), 200);
    let renamed: Value = renamed.json().await.unwrap();
    assert_eq!(renamed["id"], conversation.as_str());
    assert_eq!(renamed["title"], "Sums");

    for (user, body, expected) in [
        ("bob", json!({ "title": "Mine" }), (404, "not_found")),
        ("alice", json!({ "title": " " }), (400, "invalid_title")),
        (
            "alice",
            json!({ "title": "x".repeat(201) }),
            (400, "invalid_title"),
        ),
        ("alice", json!({ "name": "Sums" }), (422, "invalid_body")),
    ] {
        assert_eq!(
            error_for(server.patch(user, &path, body.clone())).await,
            (expected.0, expected.1.to_owned()),
            "{user} {body}"
        );
    }
    assert_eq!(
        error_for(server.patch("alice", "/api/conversations/nope", json!({ "title": "x" }))).await,
        (400, "invalid_id".to_owned())
    );

    // A later prompt keeps the title it was given.
    let (second, _) = server
        .prompt(
            "alice",
            json!({ "input": "And 3 + 3?", "conversationId": conversation }),
        )
        .await;
    server.wait_for("alice", &second, &["completed"]).await;
    let list: Value = server.get_json("alice", "/api/conversations").await;
    assert_eq!(list[0]["title"], "Sums");
    let detail: Value = server.get_json("alice", &path).await;
    assert_eq!(detail["title"], "Sums");
    server.shutdown().await;
}

/// A row of `cases/bad_requests.yaml`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct BadRequest {
    name: String,
    post: Option<String>,
    get: Option<String>,
    delete: Option<String>,
    body: Option<Value>,
    raw: Option<String>,
    content_type: Option<String>,
    status: u16,
    code: String,
}

#[tokio::test]
async fn bad_requests_get_a_4xx_json_error_and_never_a_500() {
    let mut server = server("- { text: slow, delayMs: 800 }\n").await;
    let cases: Vec<BadRequest> =
        serde_yaml_ng::from_str(include_str!("cases/bad_requests.yaml")).unwrap();
    for case in &cases {
        let fill = |text: &str| {
            text.replace("{uuid}", &uuid::Uuid::new_v4().to_string())
                .replace("{big}", &"x".repeat(1024 * 1024 + 10))
        };
        let (method, path) = match (&case.post, &case.get, &case.delete) {
            (Some(path), None, None) => (reqwest::Method::POST, path),
            (None, Some(path), None) => (reqwest::Method::GET, path),
            (None, None, Some(path)) => (reqwest::Method::DELETE, path),
            _ => panic!("{}: give one of post, get and delete", case.name),
        };
        let mut request = server
            .client
            .request(method, format!("{}{}", server.base, fill(path)))
            .header("x-user-id", "alice");
        if let Some(body) = &case.body {
            request =
                request.json(&serde_json::from_str::<Value>(&fill(&body.to_string())).unwrap());
        } else if let Some(raw) = &case.raw {
            request = request
                .header(
                    "content-type",
                    case.content_type.as_deref().unwrap_or("application/json"),
                )
                .body(raw.clone());
        }
        assert_eq!(
            error_for(request).await,
            (case.status, case.code.clone()),
            "{}",
            case.name
        );
    }

    // A second prompt in a conversation whose prompt still runs: 409.
    let (first, conversation) = server.prompt("alice", json!({ "input": "slow" })).await;
    assert_eq!(
        error_for(server.post(
            "alice",
            "/api/prompt",
            json!({ "input": "again", "conversationId": conversation }),
        ))
        .await,
        (409, "busy".into())
    );
    assert_eq!(
        error_for(server.delete("alice", &format!("/api/conversations/{conversation}"))).await,
        (409, "busy".into())
    );
    server.wait_for("alice", &first, &["completed"]).await;
    server.shutdown().await;
}

#[tokio::test]
async fn users_see_only_their_own_conversations_prompts_and_events() {
    let turns = "- { text: secret answer, delayMs: 300 }\n";
    let mut server = server(turns).await;
    // Bob listens to everything he may see while Alice prompts.
    let bob_events = {
        let server_base = server.base.clone();
        let client = server.client.clone();
        tokio::spawn(async move {
            let response = client
                .get(format!("{server_base}/api/events/stream"))
                .header("x-user-id", "bob")
                .send()
                .await
                .unwrap();
            let mut stream = eventsource_stream::EventStream::new(futures::StreamExt::boxed(
                response.bytes_stream(),
            ));
            let mut seen = Vec::new();
            while let Ok(Some(event)) = tokio::time::timeout(
                Duration::from_millis(1500),
                futures::StreamExt::next(&mut stream),
            )
            .await
            {
                seen.push(event.unwrap().event);
            }
            seen
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (prompt, conversation) = server
        .prompt("alice", json!({ "input": "my secret" }))
        .await;
    server.wait_for("alice", &prompt, &["completed"]).await;

    for path in [
        format!("/api/prompts/{prompt}"),
        format!("/api/conversations/{conversation}"),
    ] {
        assert_eq!(
            error_for(server.get("bob", &path)).await,
            (404, "not_found".into()),
            "{path}"
        );
    }
    assert_eq!(
        error_for(server.delete("bob", &format!("/api/conversations/{conversation}")))
            .await
            .0,
        404
    );
    assert_eq!(
        error_for(server.post(
            "bob",
            "/api/prompt",
            json!({ "input": "x", "conversationId": conversation }),
        ))
        .await
        .0,
        404
    );
    assert_eq!(
        error_for(server.post(
            "bob",
            &format!("/api/prompts/{prompt}/approve"),
            json!({ "toolCallId": "call_1" }),
        ))
        .await
        .0,
        404
    );
    let list: Value = server.get_json("bob", "/api/conversations").await;
    assert_eq!(list, json!([]));
    let seen = bob_events.await.unwrap();
    assert!(seen.is_empty(), "bob saw alice's events: {seen:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn tool_calls_wait_for_approval_and_can_be_approved_or_rejected() {
    let turns = r#"
- toolCalls:
    - { id: call_a, name: kit.delete, input: { path: a.txt } }
- text: Deleted a.
- toolCalls:
    - { id: call_b, name: kit.delete, input: { path: b.txt } }
- text: Did not delete b.
"#;
    let mut server = server(turns).await;
    let (prompt, conversation) = server
        .prompt("alice", json!({ "input": "Delete a.txt" }))
        .await;
    server
        .wait_for("alice", &prompt, &["waiting_for_approval"])
        .await;
    assert_eq!(
        error_for(server.post(
            "alice",
            &format!("/api/prompts/{prompt}/approve"),
            json!({ "toolCallId": "call_zzz" }),
        ))
        .await,
        (409, "not_waiting".into())
    );
    let approved = server
        .post(
            "alice",
            &format!("/api/prompts/{prompt}/approve"),
            json!({ "toolCallId": "call_a" }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), 202);
    let done = server.wait_for("alice", &prompt, &["completed"]).await;
    assert_eq!(done["output"][0]["result"]["output"], "deleted a.txt");
    assert_eq!(
        error_for(server.post(
            "alice",
            &format!("/api/prompts/{prompt}/approve"),
            json!({ "toolCallId": "call_a" }),
        ))
        .await,
        (409, "not_waiting".into())
    );

    let (second, _) = server
        .prompt(
            "alice",
            json!({ "input": "Delete b.txt", "conversationId": conversation }),
        )
        .await;
    server
        .wait_for("alice", &second, &["waiting_for_approval"])
        .await;
    let rejected = server
        .post(
            "alice",
            &format!("/api/prompts/{second}/reject"),
            json!({ "toolCallId": "call_b", "reason": "keep b" }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(rejected.status(), 202);
    let done = server.wait_for("alice", &second, &["completed"]).await;
    assert_eq!(
        done["output"][0]["result"]["error"],
        "Rejected by user: keep b"
    );
    server.shutdown().await;
}

/// The calls of one classic round that need approval wait for one decision: each is marked as
/// waiting, the event lists them as its batch, a decision naming any of them with `calls`
/// approves those places and rejects the others, and each call's record says which of the
/// three it was. A decision past the batch's end is refused with nothing stored; one for a
/// call already decided with the others is refused as not waiting.
#[tokio::test]
async fn the_calls_of_one_round_are_decided_together_over_http() {
    let turns = r#"
- toolCalls:
    - { id: call_a, name: kit.delete, input: { path: a.txt } }
    - { id: call_b, name: kit.delete, input: { path: b.txt } }
    - { id: call_c, name: kit.delete, input: { path: c.txt } }
- text: Deleted a and c.
"#;
    let server = server(turns).await;
    let (prompt, _) = server
        .prompt("alice", json!({ "input": "Delete three files" }))
        .await;
    server
        .wait_for("alice", &prompt, &["waiting_for_approval"])
        .await;
    let events = read_events(
        &server.client,
        &server.base,
        "alice",
        &format!("/api/events/stream?promptId={prompt}"),
        Some("0"),
        |event| event.event == "prompt.approval-requested",
    )
    .await;
    let requested = &events.last().unwrap().data;
    let batch: Vec<&str> = requested["data"]["batch"]
        .as_array()
        .unwrap_or_else(|| panic!("{requested}"))
        .iter()
        .map(|call| call["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(batch, ["call_a", "call_b", "call_c"], "{requested}");
    let stored = server
        .get_json("alice", &format!("/api/prompts/{prompt}"))
        .await;
    let waiting = stored["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|output| output["result"]["awaitingApproval"] == true)
        .count();
    assert_eq!(waiting, 3, "{stored}");

    let refused = server
        .post(
            "alice",
            &format!("/api/prompts/{prompt}/approve"),
            json!({ "toolCallId": "call_b", "calls": [0, 3] }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_decision", "{body}");

    let approved = server
        .post(
            "alice",
            &format!("/api/prompts/{prompt}/approve"),
            json!({ "toolCallId": "call_b", "calls": [0, 2], "reason": "keep b" }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), 202);
    let ended = server.wait_for("alice", &prompt, &["completed"]).await;
    let calls: Vec<&Value> = ended["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|output| output["type"] == "tool")
        .collect();
    assert_eq!(calls[0]["result"]["type"], "success", "{ended}");
    assert_eq!(calls[1]["result"]["kind"], "rejected", "{ended}");
    assert_eq!(calls[1]["result"]["error"], "Rejected by user: keep b");
    assert_eq!(calls[2]["result"]["type"], "success", "{ended}");
    for (index, call) in calls.iter().enumerate() {
        assert_eq!(call["decision"]["by"]["userId"], "alice");
        assert!(
            call["decision"]["shown"]
                .as_str()
                .unwrap()
                .starts_with(&format!("call {} of 3 decided together", index + 1)),
            "{call}"
        );
    }
    let late = server
        .post(
            "alice",
            &format!("/api/prompts/{prompt}/reject"),
            json!({ "toolCallId": "call_c" }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(late.status(), 409);
}

/// Scopes: an approval with a conversation scope lets the tool's later calls of the
/// conversation run without asking, each recorded as decided by the scope; the scope is
/// listed (to its user only), a scope that cannot be made is refused with nothing stored, and
/// once revoked the calls are asked about again.
#[tokio::test]
async fn an_approval_with_a_conversation_scope_approves_later_calls_until_revoked() {
    let turns = r#"
- toolCalls:
    - { id: call_a, name: kit.delete, input: { path: a.txt } }
- text: Deleted a.
- toolCalls:
    - { id: call_b, name: kit.delete, input: { path: b.txt } }
- text: Deleted b.
- toolCalls:
    - { id: call_c, name: kit.delete, input: { path: c.txt } }
- text: Asked for c.
"#;
    let mut server = server(turns).await;
    let (first, conversation) = server
        .prompt("alice", json!({ "input": "Delete a.txt" }))
        .await;
    server
        .wait_for("alice", &first, &["waiting_for_approval"])
        .await;
    for (scope, why) in [
        (
            json!({ "reach": "conversation", "expiresIn": "soon" }),
            "expiresIn",
        ),
        (
            json!({ "reach": "conversation", "expiresIn": "90d" }),
            "30 days",
        ),
        (
            json!({ "reach": "conversation", "tool": "kit delete" }),
            "pattern",
        ),
        (
            json!({ "reach": "everywhere" }),
            "expected `prompt` or `conversation`",
        ),
    ] {
        let refused = server
            .post(
                "alice",
                &format!("/api/prompts/{first}/approve"),
                json!({ "toolCallId": "call_a", "scope": scope }),
            )
            .send()
            .await
            .unwrap();
        let status = refused.status();
        let body: Value = refused.json().await.unwrap();
        assert!(status == 400 || status == 422, "{scope}: {status} {body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(why),
            "{body}"
        );
    }
    let approved = server
        .post(
            "alice",
            &format!("/api/prompts/{first}/approve"),
            json!({
                "toolCallId": "call_a",
                "scope": { "reach": "conversation", "expiresIn": "10m" }
            }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), 202);
    server.wait_for("alice", &first, &["completed"]).await;

    let scopes = server
        .get_json("alice", &format!("/api/scopes?conversation={conversation}"))
        .await;
    let scopes = scopes.as_array().unwrap();
    assert_eq!(scopes.len(), 1, "{scopes:?}");
    assert_eq!(scopes[0]["tool"], "kit.delete");
    assert_eq!(scopes[0]["reach"], "conversation");
    assert!(scopes[0]["expiresAt"].is_string());
    let scope = scopes[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(server.get_json("bob", "/api/scopes").await, json!([]));
    let status = server
        .delete("bob", &format!("/api/scopes/{scope}"))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 404);

    // The next prompt of the conversation does not ask.
    let (second, _) = server
        .prompt(
            "alice",
            json!({ "input": "Delete b.txt", "conversationId": conversation }),
        )
        .await;
    let done = server.wait_for("alice", &second, &["completed"]).await;
    let call = &done["output"][0];
    assert_eq!(call["result"]["output"], "deleted b.txt", "{done}");
    assert_eq!(call["decision"]["by"]["type"], "scope", "{call}");
    assert_eq!(call["decision"]["by"]["id"], scope.as_str());
    assert_eq!(call["decision"]["by"]["grantedBy"], "alice");

    let revoked = server
        .delete("alice", &format!("/api/scopes/{scope}"))
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 200);
    let revoked: Value = revoked.json().await.unwrap();
    assert!(revoked["revokedAt"].is_string(), "{revoked}");
    assert_eq!(
        server
            .get_json("alice", &format!("/api/scopes?conversation={conversation}"))
            .await,
        json!([])
    );
    let (third, _) = server
        .prompt(
            "alice",
            json!({ "input": "Delete c.txt", "conversationId": conversation }),
        )
        .await;
    server
        .wait_for("alice", &third, &["waiting_for_approval"])
        .await;
    server.shutdown().await;
}

/// A code-mode prompt waiting for approval has two pending calls, the program and the call
/// that waits: a decision about the program (or any call that does not wait) is refused at
/// once, naming the call that waits, instead of being accepted and dropped; a decision is
/// taken once, and a second one for the same call is refused.
#[tokio::test]
async fn a_decision_that_cannot_apply_is_refused_naming_the_call_that_waits() {
    let turns = r#"
- code: |
    output("deleting");
    kit.delete({ path: "a.txt" });
    done("Deleted a.");
"#;
    let mut server = server(turns).await;
    let (prompt, _) = server
        .prompt("alice", json!({ "input": "Delete a.txt", "mode": "code" }))
        .await;
    let waiting = server
        .wait_for("alice", &prompt, &["waiting_for_approval"])
        .await;
    let call_of = |function: &str| {
        waiting["output"]
            .as_array()
            .unwrap()
            .iter()
            .find(|output| output["function"] == function)
            .unwrap_or_else(|| panic!("no call of {function}: {waiting}"))["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // The program's plan waits (see docs/code-mode.md, Plans).
    let (program, delete) = (call_of("code.execute"), call_of("code.plan"));
    for decision in ["approve", "reject"] {
        let refused = server
            .post(
                "alice",
                &format!("/api/prompts/{prompt}/{decision}"),
                json!({ "toolCallId": program }),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 409);
        let body: Value = refused.json().await.unwrap();
        assert_eq!(body["error"]["code"], "not_waiting", "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("\"{delete}\" (code.plan)")),
            "{message}"
        );
    }
    let approved = server
        .post(
            "alice",
            &format!("/api/prompts/{prompt}/approve"),
            json!({ "toolCallId": delete }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), 202);
    let done = server.wait_for("alice", &prompt, &["completed"]).await;
    assert_eq!(
        done["output"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|output| output["function"] == "kit.delete"
                && output["result"]["output"] == "deleted a.txt")
            .count(),
        1,
        "{done}"
    );
    assert_eq!(
        error_for(server.post(
            "alice",
            &format!("/api/prompts/{prompt}/approve"),
            json!({ "toolCallId": delete }),
        ))
        .await,
        (409, "not_waiting".into())
    );
    server.shutdown().await;
}

/// A call's time is its run, not the time a person took to approve it, in both modes.
#[tokio::test]
async fn an_approved_call_starts_when_it_is_approved() {
    let classic = "- toolCalls:\n    - { id: call_a, name: kit.delete, input: { path: a.txt } }\n- text: Deleted a.\n";
    let code = "- code: |\n    kitDelete({ path: \"a.txt\" });\n    done(\"Deleted a.\");\n";
    for (mode, turns) in [("classic", classic), ("code", code)] {
        let mut server = server(turns).await;
        let (prompt, _) = server
            .prompt("alice", json!({ "input": "Delete a.txt", "mode": mode }))
            .await;
        let waiting = server
            .wait_for("alice", &prompt, &["waiting_for_approval"])
            .await;
        let call = |stored: &Value| {
            stored["output"]
                .as_array()
                .unwrap()
                .iter()
                .find(|output| output["function"] == "kit.delete")
                .unwrap()
                .clone()
        };
        let start = |call: &Value| {
            call["start"]
                .as_str()
                .unwrap()
                .parse::<chrono::DateTime<chrono::Utc>>()
                .unwrap()
        };
        // What waits: the call in classic mode, the program's plan in code mode.
        let asked = waiting["output"]
            .as_array()
            .unwrap()
            .iter()
            .find(|output| output["result"]["awaitingApproval"] == true)
            .unwrap()
            .clone();
        let approving = chrono::Utc::now();
        let approved = server
            .post(
                "alice",
                &format!("/api/prompts/{prompt}/approve"),
                json!({ "toolCallId": asked["id"] }),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(approved.status(), 202);
        let done = server.wait_for("alice", &prompt, &["completed"]).await;
        let ran = call(&done);
        assert_eq!(ran["result"]["output"], "deleted a.txt", "{mode}: {done}");
        assert!(
            start(&asked) <= approving && start(&ran) >= approving,
            "{mode}: asked at {}, approved at {approving}, started at {}",
            start(&asked),
            start(&ran)
        );
        server.shutdown().await;
    }
}

#[tokio::test]
async fn tools_capabilities_and_direct_invocation() {
    let mut server = server("[]").await;
    let tools: Value = server.get_json("alice", "/api/tools").await;
    let ids: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"kit.echo") && ids.contains(&"kit.add"),
        "{ids:?}"
    );
    let tool: Value = server.get_json("alice", "/api/tools/kit.add").await;
    assert_eq!(tool["inputSchema"]["required"], json!(["a", "b"]));
    assert_eq!(tool["mayNeedApproval"], false);
    let asks: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter(|tool| tool["mayNeedApproval"] == true)
        .map(|tool| tool["id"].as_str().unwrap())
        .collect();
    assert_eq!(asks, ["kit.delete"]);
    let delete: Value = server.get_json("alice", "/api/tools/kit.delete").await;
    assert_eq!(delete["mayNeedApproval"], true);
    assert_eq!(delete["idempotent"], false);
    // Reads and pure functions may run again after a crash; writes may not.
    let repeatable: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter(|tool| tool["idempotent"] == true)
        .map(|tool| tool["id"].as_str().unwrap())
        .collect();
    assert_eq!(repeatable, ["kit.add", "kit.echo", "kit.list"]);
    assert_eq!(tool["idempotent"], true);
    assert_eq!(
        error_for(server.get("alice", "/api/tools/kit.nope")).await,
        (404, "not_found".into())
    );

    let sum: Value = server
        .post(
            "alice",
            "/api/tools/kit.add/invoke",
            json!({ "a": 2, "b": 40 }),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(sum["output"], 42);
    assert_eq!(
        error_for(server.post("alice", "/api/tools/kit.add/invoke", json!({ "a": "two" }))).await,
        (400, "invalid_input".into())
    );
    assert_eq!(
        error_for(server.post(
            "alice",
            "/api/tools/kit.fail/invoke",
            json!({ "text": "broken" }),
        ))
        .await,
        (422, "tool_failed".into())
    );
    assert_eq!(
        error_for(server.post(
            "alice",
            "/api/tools/kit.delete/invoke",
            json!({ "path": "x" }),
        ))
        .await,
        (403, "approval_required".into())
    );
    assert_eq!(
        error_for(server.post("alice", "/api/tools/kit.nope/invoke", json!({}))).await,
        (404, "not_found".into())
    );

    let capabilities: Value = server.get_json("alice", "/api/capabilities").await;
    let modes: Vec<&str> = capabilities["modes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|mode| mode["id"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["classic", "code"]);
    assert_eq!(capabilities["provider"], "script");
    server.shutdown().await;
}

#[tokio::test]
async fn running_prompts_per_user_are_limited() {
    let turns = "- { text: one, delayMs: 1000 }\n- text: two\n- text: three\n";
    let mut server = server_with(
        turns,
        ApiConfig {
            max_running_per_user: 1,
            ..ApiConfig::default()
        },
    )
    .await;
    let (first, _) = server.prompt("alice", json!({ "input": "slow" })).await;
    let second = server
        .post(
            "alice",
            "/api/prompt",
            json!({ "input": "another conversation" }),
        )
        .send()
        .await
        .unwrap();
    assert!(second.headers().contains_key("retry-after"));
    assert_eq!(error_of(second).await, (429, "rate_limited".into()));
    // Other users are not held up by Alice.
    let (bobs, _) = server.prompt("bob", json!({ "input": "mine" })).await;
    server.wait_for("bob", &bobs, &["completed"]).await;
    server.wait_for("alice", &first, &["completed"]).await;
    // Once hers finished, Alice may go on.
    let (third, _) = server.prompt("alice", json!({ "input": "now" })).await;
    server.wait_for("alice", &third, &["completed"]).await;
    server.shutdown().await;
}

#[tokio::test]
async fn requests_per_user_are_rate_limited() {
    let mut server = server_with(
        "[]",
        ApiConfig {
            requests_per_minute: 60,
            burst: 3,
            ..ApiConfig::default()
        },
    )
    .await;
    for _ in 0..3 {
        let ok = server
            .get("alice", "/api/conversations")
            .send()
            .await
            .unwrap();
        assert_eq!(ok.status(), 200);
    }
    let limited = server
        .get("alice", "/api/conversations")
        .send()
        .await
        .unwrap();
    let retry: u64 = limited.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&retry), "{retry}");
    assert_eq!(error_of(limited).await, (429, "rate_limited".into()));
    let bob = server
        .get("bob", "/api/conversations")
        .send()
        .await
        .unwrap();
    assert_eq!(bob.status(), 200);
    server.shutdown().await;
}

#[tokio::test]
async fn an_event_stream_resumes_with_last_event_id_without_gaps_or_repeats() {
    let turns = r#"
- toolCalls:
    - { name: kit.echo, input: { text: one } }
  delayMs: 150
- toolCalls:
    - { name: kit.echo, input: { text: two } }
  delayMs: 150
- toolCalls:
    - { name: kit.echo, input: { text: three } }
  delayMs: 150
- text: All three echoed.
  delayMs: 150
"#;
    let mut server = server(turns).await;
    let is_end = |event: &support::Sse| event.event == "prompt.completed";
    // A reference listener that never disconnects.
    let reference = {
        let base = server.base.clone();
        let client = server.client.clone();
        tokio::spawn(async move {
            read_events(&client, &base, "alice", "/api/events/stream", None, is_end).await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (prompt, _) = server
        .prompt("alice", json!({ "input": "echo three times" }))
        .await;
    let path = format!("/api/events/stream?promptId={prompt}");
    // Read the first three events (from the start: `prompt.created` was published before
    // this client connected), then drop the connection.
    let mut count = 0;
    let first = read_events(
        &server.client,
        &server.base,
        "alice",
        &path,
        Some("0"),
        |_| {
            count += 1;
            count == 3
        },
    )
    .await;
    assert_eq!(first.len(), 3);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let last = first.last().unwrap().id.clone();
    let rest = read_events(
        &server.client,
        &server.base,
        "alice",
        &path,
        Some(&last),
        is_end,
    )
    .await;
    let reference = reference.await.unwrap();

    let resumed: Vec<(String, String)> = first
        .iter()
        .chain(&rest)
        .map(|event| (event.id.clone(), event.event.clone()))
        .collect();
    let expected: Vec<(String, String)> = reference
        .iter()
        .filter(|event| event.data["data"]["promptId"] == prompt.as_str())
        .map(|event| (event.id.clone(), event.event.clone()))
        .collect();
    assert_eq!(resumed, expected);
    assert_eq!(resumed.last().unwrap().1, "prompt.completed");
    let ids: Vec<u64> = resumed.iter().map(|(id, _)| id.parse().unwrap()).collect();
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "{ids:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn shutdown_interrupts_running_prompts_and_ends_event_streams() {
    let turns = "- { text: never finished, delayMs: 20000 }\n";
    let mut server = server(turns).await;
    let (prompt, _) = server
        .prompt("alice", json!({ "input": "take your time" }))
        .await;
    let listener = {
        let base = server.base.clone();
        let client = server.client.clone();
        tokio::spawn(async move {
            read_events(&client, &base, "alice", "/api/events/stream", None, |_| {
                false
            })
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    server.shutdown().await;
    assert!(started.elapsed() < Duration::from_secs(10));
    // The event stream ended with the server.
    tokio::time::timeout(Duration::from_secs(5), listener)
        .await
        .expect("the event stream did not end")
        .unwrap();
    // New connections are refused.
    assert!(
        server
            .client
            .get(format!("{}/api/health", server.base))
            .send()
            .await
            .is_err()
    );
    // The prompt is recorded interrupted.
    let store = agentic_conversation::Store::connect(&server.db_url)
        .await
        .unwrap();
    let stored = store.prompt("alice", &prompt).await.unwrap().unwrap();
    assert_eq!(stored.prompt.state, agentic_core::PromptState::Interrupted);
    assert_eq!(store.integrity_check().await.unwrap(), "ok");
}

#[tokio::test]
async fn an_event_id_from_before_a_restart_gets_a_gap_then_every_new_event() {
    let mut server = server("- text: fresh\n").await;
    let listener = {
        let (client, base) = (server.client.clone(), server.base.clone());
        tokio::spawn(async move {
            read_events(
                &client,
                &base,
                "alice",
                "/api/events/stream",
                Some("999999"),
                |event| event.event == "prompt.completed",
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (prompt, _) = server.prompt("alice", json!({ "input": "hi" })).await;
    let events = listener.await.unwrap();
    assert_eq!(events[0].event, "stream.gap", "{events:?}");
    assert_eq!(events[1].event, "prompt.created");
    assert_eq!(
        events.last().unwrap().data["data"]["promptId"],
        prompt.as_str()
    );
    server.shutdown().await;
}

/// A client that follows one prompt from the start (`Last-Event-ID: 0`, as `agentic prompt
/// --server` does) on a server that has published more events than its replay window holds
/// gets no gap when the window still reaches back to the prompt's creation; a client asking
/// for a prompt whose start has left the window does.
#[tokio::test]
async fn a_prompt_followed_from_the_start_has_no_gap_while_its_start_is_kept() {
    let turns = r#"
- toolCalls:
    - { name: kit.echo, input: { text: one } }
    - { name: kit.echo, input: { text: two } }
    - { name: kit.echo, input: { text: three } }
- text: Echoed.
- text: Second.
"#;
    let mut server = support::server_with_event_capacity(turns, 8).await;
    let (first, _) = server.prompt("alice", json!({ "input": "echo" })).await;
    server.wait_for("alice", &first, &["completed"]).await;
    let (second, _) = server.prompt("alice", json!({ "input": "again" })).await;
    server.wait_for("alice", &second, &["completed"]).await;
    let is_end = |event: &support::Sse| event.event == "prompt.completed";
    let path = format!("/api/events/stream?promptId={second}");
    let events = read_events(
        &server.client,
        &server.base,
        "alice",
        &path,
        Some("0"),
        is_end,
    )
    .await;
    let names: Vec<&str> = events.iter().map(|event| event.event.as_str()).collect();
    assert_eq!(names.first(), Some(&"prompt.created"), "{names:?}");
    assert_eq!(names.last(), Some(&"prompt.completed"), "{names:?}");
    assert!(!names.contains(&"stream.gap"), "{names:?}");
    // The first prompt's start is gone from the window: that client is told.
    let path = format!("/api/events/stream?promptId={first}");
    let events = read_events(
        &server.client,
        &server.base,
        "alice",
        &path,
        Some("0"),
        |_| true,
    )
    .await;
    assert_eq!(events[0].event, "stream.gap", "{events:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn an_event_stream_can_follow_one_conversation() {
    let mut server = server("- text: first\n- text: second\n- text: third\n").await;
    let (first, wanted) = server.prompt("alice", json!({ "input": "one" })).await;
    server.wait_for("alice", &first, &["completed"]).await;
    let listener = {
        let (client, base) = (server.client.clone(), server.base.clone());
        let path = format!("/api/events/stream?conversationId={wanted}");
        tokio::spawn(async move {
            read_events(&client, &base, "alice", &path, None, |event| {
                event.event == "prompt.completed"
            })
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A prompt in another conversation of the same user, then one in the followed one.
    let (other, _) = server
        .prompt("alice", json!({ "input": "elsewhere" }))
        .await;
    server.wait_for("alice", &other, &["completed"]).await;
    let (followed, _) = server
        .prompt("alice", json!({ "input": "two", "conversationId": wanted }))
        .await;
    let events = listener.await.unwrap();
    assert!(!events.is_empty());
    for event in &events {
        assert_eq!(
            event.data["data"]["promptId"],
            followed.as_str(),
            "{event:?}"
        );
    }
    assert_eq!(events.last().unwrap().event, "prompt.completed");
    server.shutdown().await;
}

/// Regression (issue 18): `mallory+x`, `mallory:x` and `mallory_x` once shared one directory,
/// so a file one of them wrote could be read and listed by the others.
#[tokio::test]
async fn users_whose_ids_differ_only_in_punctuation_never_share_files() {
    let turns = r#"
- toolCalls:
    - { id: call_w, name: fs.write, input: { path: secret.txt, content: "plus's secret" } }
- text: Written.
"#;
    let mut server = server_with_files(turns).await;
    let (prompt, _) = server
        .prompt("mallory+x", json!({ "input": "Keep a secret" }))
        .await;
    server
        .wait_for("mallory+x", &prompt, &["waiting_for_approval"])
        .await;
    let approved = server
        .post(
            "mallory+x",
            &format!("/api/prompts/{prompt}/approve"),
            json!({ "toolCallId": "call_w" }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), 202);
    let done = server.wait_for("mallory+x", &prompt, &["completed"]).await;
    assert!(done["output"][0]["result"]["error"].is_null(), "{done}");

    let read = |user: &'static str| {
        server.post(
            user,
            "/api/tools/fs.read/invoke",
            json!({ "path": "secret.txt" }),
        )
    };
    let own = server
        .post_json(
            "mallory+x",
            "/api/tools/fs.read/invoke",
            json!({ "path": "secret.txt" }),
        )
        .await;
    assert_eq!(own["output"]["content"], "plus's secret", "{own}");
    for other in ["mallory_x", "mallory:x", "Mallory+x"] {
        let (status, code) = error_for(read(other)).await;
        assert_eq!((status, code.as_str()), (422, "tool_failed"), "{other}");
        let listed = server
            .post_json(
                other,
                "/api/tools/fs.list/invoke",
                json!({ "recursive": true }),
            )
            .await;
        assert_eq!(listed["output"]["entries"], json!([]), "{other}: {listed}");
    }
    server.shutdown().await;
}

/// Regression (issue 18): the user ids `.` and `..` passed the API's check and then failed
/// in the fs plugin, as a 500 on the tool routes and a failed prompt. Every id the API
/// accepts works everywhere.
#[tokio::test]
async fn dot_user_ids_work_on_every_route() {
    let turns = "- text: Hello, dots.\n- text: Hello again.\n";
    let mut server = server_with_files(turns).await;
    for user in [".", ".."] {
        let tools = server.get(user, "/api/tools").send().await.unwrap();
        assert_eq!(tools.status(), 200, "{user}");
        let tool = server.get(user, "/api/tools/fs.read").send().await.unwrap();
        assert_eq!(tool.status(), 200, "{user}");
        let listed = server
            .post(user, "/api/tools/fs.list/invoke", json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(listed.status(), 200, "{user}");
        let (prompt, _) = server.prompt(user, json!({ "input": "Hi" })).await;
        let done = server
            .wait_for(user, &prompt, &["completed", "failed"])
            .await;
        assert_eq!(done["state"], "completed", "{user}: {done}");
    }
    server.shutdown().await;
}

/// A JSON array is no prompt: serde would read `["x"]` as `{"input": "x"}`.
#[tokio::test]
async fn a_body_that_is_not_a_json_object_is_refused() {
    let server = server("- text: never asked\n").await;
    for (path, body) in [
        ("/api/prompt", json!(["x"])),
        ("/api/prompt", json!("x")),
        ("/api/tools/kit.echo/invoke", json!(["hi"])),
    ] {
        let response = server.post("alice", path, body).send().await.unwrap();
        assert_eq!(response.status(), 422, "{path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_body", "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("must be a JSON object"),
            "{body}"
        );
    }
    let conversations = server.get_json("alice", "/api/conversations").await;
    assert_eq!(conversations, json!([]), "nothing was started");
}

/// A body shorter than its Content-Length gets a 408 once the body timeout passes, instead of
/// holding the connection open.
#[tokio::test]
async fn a_body_that_never_arrives_in_full_gets_a_408() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let api = ApiConfig {
        body_timeout_seconds: 1,
        ..ApiConfig::default()
    };
    let server = server_with("- text: never asked\n", api).await;
    let address = server.base.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    stream
        .write_all(
            b"POST /api/prompt HTTP/1.1\r\nHost: x\r\nX-User-Id: alice\r\n\
              Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"input\":",
        )
        .await
        .unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), async {
        let mut buffer = [0u8; 4096];
        while !String::from_utf8_lossy(&answer).contains("}}") {
            let count = stream.read(&mut buffer).await.unwrap();
            if count == 0 {
                break;
            }
            answer.extend_from_slice(&buffer[..count]);
        }
    })
    .await;
    assert!(read.is_ok(), "no answer within 30 s");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body_timeout"), "{answer}");
}

#[tokio::test]
async fn a_prompt_can_be_cancelled_running_or_waiting_and_its_conversation_goes_on() {
    let turns = r#"
- toolCalls:
    - { id: call_slow, name: slow.wait, input: { ms: 60000 } }
- text: After the cancel, the model sees the call ended.
- toolCalls:
    - { id: call_del, name: kit.delete, input: { path: a.txt } }
- code: |
    const r = await slow.wait({ ms: 60000 });
    done(r);
"#;
    let mut server = server(turns).await;
    let events = {
        let (base, client) = (server.base.clone(), server.client.clone());
        tokio::spawn(async move {
            let mut cancels = 0;
            read_events(
                &client,
                &base,
                "alice",
                "/api/events/stream",
                None,
                |event| {
                    cancels += usize::from(event.event == "prompt.cancelled");
                    cancels == 3
                },
            )
            .await
        })
    };

    // Running, mid-tool: the call is closed as an error and the conversation is free.
    let (prompt, conversation) = server
        .prompt("alice", json!({ "input": "wait a minute" }))
        .await;
    wait_until_tool_runs(&server, &prompt).await;
    let started = Instant::now();
    let cancelled = server
        .post_json("alice", &format!("/api/prompts/{prompt}/cancel"), json!({}))
        .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    assert_eq!(
        cancelled["output"][0]["result"]["error"],
        agentic_core::CANCELLED_TOOL_ERROR
    );
    let stored = server.wait_for("alice", &prompt, &["cancelled"]).await;
    assert_eq!(stored["output"], cancelled["output"]);
    // Twice, or someone else's: refused.
    assert_eq!(
        error_for(server.post("alice", &format!("/api/prompts/{prompt}/cancel"), json!({}))).await,
        (409, "not_cancellable".into())
    );
    assert_eq!(
        error_for(server.post("bob", &format!("/api/prompts/{prompt}/cancel"), json!({}))).await,
        (404, "not_found".into())
    );
    assert_eq!(
        error_for(server.post("alice", "/api/prompts/nope/cancel", json!({}))).await,
        (400, "invalid_id".into())
    );
    let (next, _) = server
        .prompt(
            "alice",
            json!({ "input": "and now?", "conversationId": conversation }),
        )
        .await;
    let done = server.wait_for("alice", &next, &["completed"]).await;
    assert_eq!(
        done["output"][0]["content"],
        "After the cancel, the model sees the call ended."
    );
    let history = format!("{:?}", server.provider.requests().last().unwrap().messages);
    assert!(history.contains("Cancelled"), "{history}");

    // Waiting for approval: it ends there, and the decision comes too late.
    let (waiting, conversation) = server
        .prompt("alice", json!({ "input": "delete a.txt" }))
        .await;
    server
        .wait_for("alice", &waiting, &["waiting_for_approval"])
        .await;
    let cancelled = server
        .post_json(
            "alice",
            &format!("/api/prompts/{waiting}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    assert_eq!(
        error_for(server.post(
            "alice",
            &format!("/api/prompts/{waiting}/approve"),
            json!({ "toolCallId": "call_del" }),
        ))
        .await,
        (409, "not_waiting".into())
    );
    assert!(
        server
            .get_json("alice", &format!("/api/conversations/{conversation}"))
            .await["activePromptId"]
            .is_null()
    );

    // Code mode, inside a script's tool call: the script and its call stop.
    let (code, _) = server
        .prompt("alice", json!({ "input": "wait in code", "mode": "code" }))
        .await;
    wait_until_tool_runs(&server, &code).await;
    let started = Instant::now();
    let cancelled = server
        .post_json("alice", &format!("/api/prompts/{code}/cancel"), json!({}))
        .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    assert!(
        cancelled["output"]
            .as_array()
            .unwrap()
            .iter()
            .any(|output| output["result"]["error"] == agentic_core::CANCELLED_TOOL_ERROR),
        "{cancelled}"
    );

    let seen = tokio::time::timeout(Duration::from_secs(10), events)
        .await
        .expect("three prompt.cancelled events")
        .unwrap();
    let ids: Vec<&str> = seen
        .iter()
        .filter(|event| event.event == "prompt.cancelled")
        .map(|event| event.data["data"]["promptId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [prompt.as_str(), waiting.as_str(), code.as_str()]);
    server.shutdown().await;
}

/// Waits until the prompt has a tool call that has started and not finished.
async fn wait_until_tool_runs(server: &Server, prompt: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let stored = server
            .get_json("alice", &format!("/api/prompts/{prompt}"))
            .await;
        let pending = stored["output"].as_array().is_some_and(|outputs| {
            outputs
                .iter()
                .any(|output| output["type"] == "tool" && output["result"]["type"] == "pending")
        });
        if pending {
            return;
        }
        assert!(Instant::now() < deadline, "no tool call ran: {stored}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_playground_is_served_offline_and_public_and_files_only_to_their_owner() {
    let turns = r#"
- toolCalls:
    - { id: call_w, name: fs.write, input: { path: "charts/a.svg", content: "<svg xmlns='http://www.w3.org/2000/svg'/>" } }
- text: Written.
"#;
    let mut server = server_with_files(turns).await;
    // The page and its files: no identity needed, compiled in, with a strict policy.
    for (path, kind) in [
        ("/", "text/html"),
        ("/assets/app.js", "text/javascript"),
        ("/assets/app.css", "text/css"),
    ] {
        let response = server
            .client
            .get(format!("{}{path}", server.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let headers = response.headers().clone();
        assert!(headers["content-type"].to_str().unwrap().starts_with(kind));
        assert!(
            headers["content-security-policy"]
                .to_str()
                .unwrap()
                .contains("script-src 'self'")
        );
        let etag = headers["etag"].to_str().unwrap().to_owned();
        let body = response.bytes().await.unwrap();
        assert!(!body.is_empty());
        let again = server
            .client
            .get(format!("{}{path}", server.base))
            .header("if-none-match", &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 304, "{path}");
    }
    let page = server
        .client
        .get(format!("{}/", server.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("/assets/app.js"));
    // Gzipped when asked for.
    let zipped = server
        .client
        .get(format!("{}/assets/app.js", server.base))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(zipped.headers()["content-encoding"], "gzip");
    let zipped_len = zipped.bytes().await.unwrap().len();
    assert!(zipped_len < 100 * 1024, "{zipped_len} bytes");
    assert!(!page.contains("http://") && !page.contains("https://"));

    // A file a prompt wrote, to its owner only.
    let (prompt, _) = server.prompt("alice", json!({ "input": "chart" })).await;
    server
        .wait_for("alice", &prompt, &["waiting_for_approval"])
        .await;
    server
        .post(
            "alice",
            &format!("/api/prompts/{prompt}/approve"),
            json!({ "toolCallId": "call_w" }),
        )
        .send()
        .await
        .unwrap();
    server.wait_for("alice", &prompt, &["completed"]).await;
    let own = server
        .get("alice", "/api/files?path=charts/a.svg")
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), 200);
    assert_eq!(own.headers()["content-type"], "image/svg+xml");
    assert!(
        own.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .starts_with("sandbox")
    );
    assert!(own.text().await.unwrap().starts_with("<svg"));
    for (user, path) in [
        ("bob", "/api/files?path=charts/a.svg"),
        ("bob", "/api/files?path=../alice/charts/a.svg"),
        ("alice", "/api/files?path=../../api.db"),
        ("alice", "/api/files?path=/etc/passwd"),
        ("alice", "/api/files?path=nothing-here.txt"),
    ] {
        let (status, code) = error_for(server.get(user, path)).await;
        assert_eq!(status, 404, "{user} {path}: {code}");
    }
    assert_eq!(
        error_for(server.get("alice", "/api/files")).await.0,
        400,
        "no path"
    );
    server.shutdown().await;
}

/// A prompt can go without a plugin's tools (`leaveOut`); the conversation keeps the choice
/// for its later prompts until one sends another, `[]` brings them back, and an id that names
/// no plugin is refused with the plugins there are. The task's tools (here the test kit's)
/// are offered before the everyday ones (the interpreter's).
#[tokio::test]
async fn a_prompt_leaves_out_plugins_and_its_conversation_keeps_the_choice() {
    let turns = "- text: one\n- text: two\n- text: three\n";
    let mut server = server(turns).await;
    let offered = |server: &Server, index: usize| -> Vec<String> {
        server.provider.requests()[index]
            .tools
            .iter()
            .map(|tool| tool.name.clone())
            .collect()
    };
    let (status, code) = error_for(server.post(
        "alice",
        "/api/prompt",
        json!({ "input": "hi", "leaveOut": ["nope"] }),
    ))
    .await;
    assert_eq!((status, code.as_str()), (400, "unknown_plugin"));

    let (first, conversation) = server
        .prompt("alice", json!({ "input": "hi", "leaveOut": ["slow"] }))
        .await;
    server.wait_for("alice", &first, &["completed"]).await;
    let tools = offered(&server, 0);
    assert!(
        !tools.iter().any(|tool| tool.starts_with("slow.")),
        "{tools:?}"
    );
    assert!(tools.contains(&"kit.add".to_owned()), "{tools:?}");
    let kit = tools.iter().position(|tool| tool == "kit.add").unwrap();
    let interpreter = tools
        .iter()
        .position(|tool| tool == "interpreter.run-code")
        .unwrap();
    assert!(kit < interpreter, "{tools:?}");

    let (second, _) = server
        .prompt(
            "alice",
            json!({ "input": "again", "conversationId": conversation }),
        )
        .await;
    server.wait_for("alice", &second, &["completed"]).await;
    assert!(
        !offered(&server, 1)
            .iter()
            .any(|tool| tool.starts_with("slow."))
    );

    let (third, _) = server
        .prompt(
            "alice",
            json!({ "input": "all", "conversationId": conversation, "leaveOut": [] }),
        )
        .await;
    server.wait_for("alice", &third, &["completed"]).await;
    assert!(offered(&server, 2).contains(&"slow.wait".to_owned()));
    server.shutdown().await;
}

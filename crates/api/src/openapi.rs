//! The OpenAPI 3.0 document at `/api/openapi.json`, built from the same types the handlers use
//! (schemas by schemars), and Swagger UI at `/api/docs`, served from files compiled into the
//! binary: nothing is downloaded at build or run time.

use agentic_conversation::{Conversation, StoredPrompt};
use agentic_core::Capabilities;
use axum::Router;
use schemars::generate::SchemaSettings;
use schemars::{Schema, SchemaGenerator};
use serde_json::{Map, Value, json};
use utoipa_swagger_ui::SwaggerUi;

use crate::AppState;
use crate::error::ErrorBody;
use crate::types::{
    ApproveBody, CancelSent, ConversationDetail, DecisionAccepted, Health, InvokeResult,
    PromptAccepted, PromptBody, RejectBody, RenameBody, ToolDetail, ToolSummary,
};

/// Swagger UI at `/api/docs`, reading `/api/openapi.json`.
pub fn docs() -> Router<AppState> {
    SwaggerUi::new("/api/docs")
        .external_url_unchecked("/api/openapi.json", document())
        .into()
}

struct Operation {
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    public: bool,
    body: Option<Schema>,
    ok: (u16, Option<Schema>, &'static str),
    errors: &'static [(u16, &'static str)],
}

const AUTH_ERRORS: [(u16, &str); 2] = [
    (
        401,
        "X-User-Id missing or invalid, or the bearer token does not match",
    ),
    (429, "over the per-user request rate; see retry-after"),
];

/// The whole document.
pub fn document() -> Value {
    let mut generator: SchemaGenerator = SchemaSettings::openapi3().into_generator();
    let prompt_body = generator.subschema_for::<PromptBody>();
    let prompt_accepted = generator.subschema_for::<PromptAccepted>();
    let stored_prompt = generator.subschema_for::<StoredPrompt>();
    let cancelled_prompt = stored_prompt.clone();
    let approve_body = generator.subschema_for::<ApproveBody>();
    let replay_body = generator.subschema_for::<crate::types::ReplayBody>();
    let replayed = generator.subschema_for::<crate::export::Replayed>();
    let reject_body = generator.subschema_for::<RejectBody>();
    let decision = generator.subschema_for::<DecisionAccepted>();
    let cancel_sent = generator.subschema_for::<CancelSent>();
    let conversations = generator.subschema_for::<Vec<Conversation>>();
    let conversation = generator.subschema_for::<ConversationDetail>();
    let rename_body = generator.subschema_for::<RenameBody>();
    let renamed = generator.subschema_for::<Conversation>();
    let tools = generator.subschema_for::<Vec<ToolSummary>>();
    let tool = generator.subschema_for::<ToolDetail>();
    let invoke_input = generator.subschema_for::<Value>();
    let invoke_result = generator.subschema_for::<InvokeResult>();
    let capabilities = generator.subschema_for::<Capabilities>();
    let scopes = generator.subschema_for::<Vec<agentic_core::scope::ScopeGrant>>();
    let scope = generator.subschema_for::<agentic_core::scope::ScopeGrant>();
    let health = generator.subschema_for::<Health>();
    let error = generator.subschema_for::<ErrorBody>();

    let operations = vec![
        Operation {
            method: "post",
            path: "/api/prompt",
            summary: "Start a prompt; it runs in the background (follow it on /api/events/stream)",
            public: false,
            body: Some(prompt_body),
            ok: (
                202,
                Some(prompt_accepted.clone()),
                "the prompt is stored and running",
            ),
            errors: &[
                (
                    400,
                    "malformed JSON, empty input, unknown mode or invalid id",
                ),
                (404, "no such conversation for this user"),
                (409, "the conversation already has a prompt running"),
                (413, "body over 1 MiB"),
                (415, "not JSON"),
                (422, "wrong field types or unknown fields"),
                (429, "too many running prompts for this user"),
            ],
        },
        Operation {
            method: "get",
            path: "/api/prompts/{id}",
            summary: "One prompt, with its timeline",
            public: false,
            body: None,
            ok: (200, Some(stored_prompt), "the prompt"),
            errors: &[(400, "invalid id"), (404, "no such prompt for this user")],
        },
        Operation {
            method: "post",
            path: "/api/prompts/{id}/approve",
            summary: "Approve a tool call that waits (all or some calls of a plan, or of calls that \
                      wait together, with `calls`), \
                      and with `scope` the tool's later calls of the prompt or the conversation; \
                      the prompt runs on in the background",
            public: false,
            body: Some(approve_body),
            ok: (202, Some(decision.clone()), "approved"),
            errors: &[
                (
                    400,
                    "invalid id or body, `calls` past the calls the request covers \
                     (`invalid_decision`), or a scope that cannot be made (`invalid_scope`)",
                ),
                (404, "no such prompt for this user"),
                (
                    409,
                    "`not_waiting`: the call does not wait for a decision (the message names \
                     those that do); `already_decided`: it was decided already",
                ),
            ],
        },
        Operation {
            method: "post",
            path: "/api/prompts/{id}/reject",
            summary: "Reject a tool call that waits; the model is told why",
            public: false,
            body: Some(reject_body),
            ok: (202, Some(decision), "rejected"),
            errors: &[
                (400, "invalid id or body"),
                (404, "no such prompt for this user"),
                (
                    409,
                    "`not_waiting`: the call does not wait for a decision (the message names \
                     those that do); `already_decided`: it was decided already",
                ),
            ],
        },
        Operation {
            method: "get",
            path: "/api/scopes",
            summary: "The user's approval scopes in force (`?conversation=<id>` for one conversation's)",
            public: false,
            body: None,
            ok: (200, Some(scopes), "the scopes"),
            errors: &[
                (400, "invalid conversation id or query"),
                (404, "no such conversation for this user"),
            ],
        },
        Operation {
            method: "delete",
            path: "/api/scopes/{id}",
            summary: "Revoke an approval scope: the calls it approved are asked about again",
            public: false,
            body: None,
            ok: (200, Some(scope), "the scope, revoked"),
            errors: &[(400, "invalid id"), (404, "no such scope for this user")],
        },
        Operation {
            method: "post",
            path: "/api/prompts/{id}/cancel",
            summary: "Stop a prompt that runs or waits for approval; what it produced is kept",
            public: false,
            body: None,
            ok: (200, Some(cancelled_prompt), "the prompt, now cancelled"),
            errors: &[
                (400, "invalid id"),
                (404, "no such prompt for this user"),
                (409, "the prompt has already finished"),
            ],
        },
        Operation {
            method: "post",
            path: "/api/prompts/{id}/continue",
            summary: "Continue an interrupted prompt where its process left it: the round in \
                      flight is redone, a code-mode script is replayed from its journal, and \
                      a tool call that was running is not run again unless its tool is \
                      idempotent",
            public: false,
            body: None,
            ok: (
                202,
                Some(prompt_accepted),
                "continued; follow it on the event stream",
            ),
            errors: &[
                (400, "invalid id"),
                (404, "no such prompt for this user"),
                (
                    409,
                    "the prompt is not interrupted, a later prompt ran, or its conversation is busy",
                ),
                (429, "too many prompts of this user are running"),
            ],
        },
        Operation {
            method: "get",
            path: "/api/prompts/{id}/export",
            summary: "The prompt as a test case (`?as=test`), in YAML: the model's replies as \
                      scripted turns, what every tool call returned, the approvals given and \
                      code mode's seeds, secrets masked; `agentic replay` and the test kit play \
                      it again without running a tool",
            public: false,
            body: None,
            ok: (200, None, "the case, as application/yaml"),
            errors: &[
                (400, "invalid id, or ?as= missing or not test"),
                (404, "no such prompt for this user"),
                (
                    409,
                    "the prompt has not ended, or ran before its model replies were kept",
                ),
            ],
        },
        Operation {
            method: "post",
            path: "/api/prompts/{id}/replay",
            summary: "Play the prompt again from its recording, on a runtime of its own: its \
                      model replies as they were, every tool call answered from what it \
                      returned then (nothing runs, nothing is stored); `code` runs an edited \
                      program in place of the `program`-th one",
            public: false,
            body: Some(replay_body),
            ok: (
                200,
                Some(replayed),
                "the replayed prompt, and the calls the recording lacks",
            ),
            errors: &[
                (400, "invalid id or body"),
                (404, "no such prompt for this user"),
                (
                    409,
                    "the prompt has not ended, ran before its model replies were kept, or has no such program",
                ),
                (429, "too many prompts of this user are running"),
            ],
        },
        Operation {
            method: "get",
            path: "/api/conversations",
            summary: "The caller's conversations, most recently updated first",
            public: false,
            body: None,
            ok: (200, Some(conversations), "conversations"),
            errors: &[],
        },
        Operation {
            method: "get",
            path: "/api/conversations/{id}",
            summary: "One conversation with its prompts",
            public: false,
            body: None,
            ok: (200, Some(conversation), "the conversation"),
            errors: &[
                (400, "invalid id"),
                (404, "no such conversation for this user"),
            ],
        },
        Operation {
            method: "delete",
            path: "/api/conversations/{id}",
            summary: "Delete a conversation and its prompts",
            public: false,
            body: None,
            ok: (204, None, "deleted"),
            errors: &[
                (400, "invalid id"),
                (404, "no such conversation for this user"),
                (409, "a prompt of it is running"),
            ],
        },
        Operation {
            method: "patch",
            path: "/api/conversations/{id}",
            summary: "Rename a conversation; its title is kept from then on",
            public: false,
            body: Some(rename_body),
            ok: (200, Some(renamed), "the conversation, renamed"),
            errors: &[
                (400, "invalid id, or a title empty or over 200 characters"),
                (404, "no such conversation for this user"),
                (422, "wrong field types or unknown fields"),
            ],
        },
        Operation {
            method: "get",
            path: "/api/tools",
            summary: "Every tool",
            public: false,
            body: None,
            ok: (200, Some(tools), "tools"),
            errors: &[],
        },
        Operation {
            method: "get",
            path: "/api/tools/{id}",
            summary: "One tool and its input and output schemas",
            public: false,
            body: None,
            ok: (200, Some(tool), "the tool"),
            errors: &[(404, "no such tool")],
        },
        Operation {
            method: "post",
            path: "/api/tools/{id}/invoke",
            summary: "Run a tool directly; the body is its input",
            public: false,
            body: Some(invoke_input),
            ok: (200, Some(invoke_result), "the tool's output"),
            errors: &[
                (400, "input does not match the tool's schema"),
                (403, "the tool needs approval; call it from a prompt"),
                (404, "no such tool"),
                (422, "the tool failed"),
            ],
        },
        Operation {
            method: "get",
            path: "/api/capabilities",
            summary: "Modes, models, provider and plugins",
            public: false,
            body: None,
            ok: (200, Some(capabilities), "capabilities"),
            errors: &[],
        },
        Operation {
            method: "get",
            path: "/api/events/stream",
            summary: "The caller's events as server-sent events (event name = type, id = seq); \
                      resumable with Last-Event-ID",
            public: false,
            body: None,
            ok: (200, None, "text/event-stream"),
            errors: &[(400, "invalid query or Last-Event-ID")],
        },
        Operation {
            method: "get",
            path: "/api/files",
            summary: "One of the caller's files, such as a file output's path, as bytes",
            public: false,
            body: None,
            ok: (200, None, "the file's bytes, typed by its extension"),
            errors: &[
                (400, "no path"),
                (404, "no such file among the caller's, or no fs plugin"),
            ],
        },
        Operation {
            method: "get",
            path: "/api/health",
            summary: "Health check (no authentication)",
            public: true,
            body: None,
            ok: (200, Some(health), "healthy"),
            errors: &[],
        },
    ];

    let mut paths = Map::new();
    for operation in operations {
        let mut parameters = Vec::new();
        if operation.path.contains("{id}") {
            parameters.push(json!({
                "name": "id", "in": "path", "required": true, "schema": { "type": "string" }
            }));
        }
        if operation.path == "/api/files" {
            parameters.push(json!({
                "name": "path", "in": "query", "required": true,
                "description": "the path among the caller's files", "schema": { "type": "string" }
            }));
        }
        if operation.path == "/api/events/stream" {
            for (name, description) in [
                ("promptId", "only events of this prompt"),
                (
                    "conversationId",
                    "only events of this conversation's prompts",
                ),
                (
                    "lastEventId",
                    "resume after this seq (same as the Last-Event-ID header)",
                ),
            ] {
                parameters.push(json!({
                    "name": name, "in": "query", "required": false,
                    "description": description, "schema": { "type": "string" }
                }));
            }
            parameters.push(json!({
                "name": "Last-Event-ID", "in": "header", "required": false,
                "description": "the seq of the last event received", "schema": { "type": "integer" }
            }));
        }
        if !operation.public {
            parameters.push(json!({
                "name": "X-User-Id", "in": "header", "required": true,
                "description": "the caller; trusted-proxy authentication",
                "schema": { "type": "string", "pattern": "^[A-Za-z0-9_.@:+-]{1,128}$" }
            }));
        }
        let mut responses = Map::new();
        let (status, ok_schema, description) = operation.ok;
        responses.insert(
            status.to_string(),
            match (ok_schema, operation.path) {
                (Some(schema), _) => json!({
                    "description": description,
                    "content": { "application/json": { "schema": schema } }
                }),
                (None, "/api/events/stream") => json!({
                    "description": description,
                    "content": { "text/event-stream": { "schema": { "type": "string" } } }
                }),
                (None, _) => json!({ "description": description }),
            },
        );
        if operation.path == "/api/prompts/{id}/cancel" {
            responses.insert(
                "202".to_owned(),
                json!({
                    "description": "the prompt runs on another server, which has not ended it \
                                    yet: the cancel is stored and applied there (or where the \
                                    prompt is taken over); prompt.cancelled follows",
                    "content": { "application/json": { "schema": cancel_sent.clone() } }
                }),
            );
        }
        let auth_errors: &[(u16, &str)] = if operation.public { &[] } else { &AUTH_ERRORS };
        for (code, description) in operation.errors.iter().chain(auth_errors) {
            responses.entry(code.to_string()).or_insert_with(|| {
                json!({
                    "description": description,
                    "content": { "application/json": { "schema": error.clone() } }
                })
            });
        }
        let mut entry = json!({
            "summary": operation.summary,
            "operationId": format!("{}{}", operation.method, operation.path.replace(['/', '{', '}'], "_")),
            "parameters": parameters,
            "responses": responses,
        });
        if let Some(body) = operation.body {
            entry["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": body } }
            });
        }
        if !operation.public {
            entry["security"] = json!([{ "bearer": [] }, {}]);
        }
        let item = paths
            .entry(operation.path.to_owned())
            .or_insert_with(|| json!({}));
        item[operation.method] = entry;
    }

    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "agentic",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Run LLM agents with pluggable execution modes. Every route but \
                /api/health and these docs needs X-User-Id (trusted-proxy authentication: \
                the server believes the header, so put it behind a proxy that sets it) and, \
                when the server has AGENTIC_API_TOKEN, Authorization: Bearer <token>. Errors \
                are {\"error\": {\"code\", \"message\"}}."
        },
        "paths": paths,
        "components": {
            "schemas": generator.take_definitions(true),
            "securitySchemes": {
                "bearer": { "type": "http", "scheme": "bearer" }
            }
        }
    })
}

/// Every `(method, path)` the document describes, for tests that compare it with the router.
pub fn described_routes() -> Vec<(String, String)> {
    let document = document();
    let mut routes = Vec::new();
    if let Some(paths) = document["paths"].as_object() {
        for (path, item) in paths {
            if let Some(item) = item.as_object() {
                for method in item.keys() {
                    routes.push((method.to_uppercase(), path.clone()));
                }
            }
        }
    }
    routes
}

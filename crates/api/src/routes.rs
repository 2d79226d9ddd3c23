//! The handlers of every `/api` route.

use agentic_conversation::{CancelOutcome, Conversation, PromptRequest, StoredPrompt};
use agentic_core::prompt::DEFAULT_MODE;
use agentic_core::{
    Approval, Capabilities, PromptState, State as PromptStateMap, ToolContext, ToolError,
};
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use axum::{Extension, Json, Router};
use serde_json::Value;

use crate::auth::UserId;
use crate::error::ApiError;
use crate::types::{
    ApproveBody, CancelSent, ConversationDetail, DecisionAccepted, DecisionBody, Health,
    InvokeResult, PromptAccepted, PromptBody, RejectBody, RenameBody, ToolDetail, ToolSummary,
};
use crate::{AppState, events};

/// `Json`, with our error shape for every way a body can be wrong. Every body is a JSON
/// object: serde would take `["x"]` for `{"input": "x"}`, which no client means. The body must
/// arrive within `api.bodyTimeoutSeconds`, so a client that sends less than its
/// `Content-Length` gets a 408 instead of holding the connection.
pub(crate) struct ApiJson<T>(pub T);

impl<T> FromRequest<AppState> for ApiJson<T>
where
    T: serde::de::DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let timeout = state.body_timeout();
        let Json(value) =
            tokio::time::timeout(timeout, Json::<Value>::from_request(request, state))
                .await
                .map_err(|_| {
                    ApiError::new(
                        StatusCode::REQUEST_TIMEOUT,
                        "body_timeout",
                        format!(
                            "the request body did not arrive within {} s",
                            timeout.as_secs()
                        ),
                    )
                })??;
        if !value.is_object() {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_body",
                "the request body must be a JSON object",
            ));
        }
        let value = serde_json::from_value(value).map_err(|error| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_body",
                format!("Failed to deserialize the JSON body into the target type: {error}"),
            )
        })?;
        Ok(Self(value))
    }
}

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/prompt", post(create_prompt))
        .route("/api/prompts/{id}", get(get_prompt))
        .route("/api/prompts/{id}/approve", post(decide::<ApproveBody>))
        .route("/api/prompts/{id}/reject", post(decide::<RejectBody>))
        .route("/api/prompts/{id}/cancel", post(cancel))
        .route("/api/prompts/{id}/continue", post(continue_prompt))
        .route("/api/prompts/{id}/export", get(export_prompt))
        .route("/api/prompts/{id}/replay", post(replay_prompt))
        .route("/api/conversations", get(list_conversations))
        .route(
            "/api/conversations/{id}",
            get(get_conversation).delete(delete_conversation),
        )
        .route("/api/scopes", get(list_scopes))
        .route("/api/scopes/{id}", axum::routing::delete(revoke_scope))
        .route("/api/tools", get(list_tools))
        .route("/api/tools/{id}", get(get_tool))
        .route("/api/tools/{id}/invoke", post(invoke_tool))
        .route("/api/capabilities", get(capabilities))
        .route("/api/files", get(get_file))
        .route("/api/events/stream", get(events::stream))
        .route("/api/health", get(health))
        .merge(title_routes())
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
}

async fn unknown_route() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method",
    )
}

/// Ids are UUIDs; anything else is a client error, not a lookup.
fn check_id(kind: &str, id: &str) -> Result<(), ApiError> {
    uuid::Uuid::parse_str(id).map(|_| ()).map_err(|_| {
        ApiError::bad_request("invalid_id", format!("\"{id}\" is not a valid {kind} id"))
    })
}

async fn create_prompt(
    State(state): State<AppState>,
    Extension(UserId(user)): Extension<UserId>,
    ApiJson(body): ApiJson<PromptBody>,
) -> Result<Response, ApiError> {
    if body.input.trim().is_empty() {
        return Err(ApiError::bad_request(
            "empty_input",
            "input must not be empty",
        ));
    }
    let service = state.service();
    let mode = body.mode.unwrap_or_else(|| DEFAULT_MODE.to_owned());
    service
        .runtime()
        .services()
        .modes
        .get(&mode)
        .map_err(|error| ApiError::bad_request("unknown_mode", error.to_string()))?;
    if let Some(id) = &body.conversation_id {
        check_id("conversation", id)?;
    }
    let state_extra = body
        .leave_out
        .as_deref()
        .map(|ids| service.runtime().services().leave_out_state(ids))
        .transpose()
        .map_err(|error| ApiError::bad_request("unknown_plugin", error.to_string()))?;
    let slot = state.take_slot(&user).await?;
    // In its own task: a client that hangs up must not cancel this halfway, with the
    // conversation taken and the prompt stored but never run.
    let starting = {
        let (service, user) = (service.clone(), user.clone());
        tokio::spawn(tracing::Instrument::in_current_span(async move {
            let mut conversation = service
                .get_or_create(&user, body.conversation_id.as_deref())
                .await?;
            conversation
                .start(PromptRequest {
                    input: Some(body.input),
                    mode: Some(mode),
                    model: body.model,
                    state: state_extra,
                    ..PromptRequest::default()
                })
                .await
        }))
    };
    let started = starting.await.map_err(|error| {
        ApiError::internal(&anyhow::anyhow!("starting the prompt failed: {error}"))
    })??;
    let accepted = PromptAccepted {
        prompt_id: started.prompt_id().to_owned(),
        conversation_id: started.conversation_id().to_owned(),
    };
    state.spawn(slot, async move {
        let prompt_id = started.prompt_id().to_owned();
        match started.run().await {
            Err(error) => {
                tracing::warn!(prompt = %prompt_id, %user, error = %format!("{error:#}"), "prompt ended with an error");
            }
            Ok(prompt) if prompt.state == PromptState::Failed => {
                let error = prompt.error.as_deref().unwrap_or("no error recorded");
                tracing::warn!(prompt = %prompt_id, %user, error, "prompt failed");
            }
            Ok(_) => {}
        }
    });
    Ok((StatusCode::ACCEPTED, Json(accepted)).into_response())
}

async fn get_prompt(
    State(state): State<AppState>,
    Extension(UserId(user)): Extension<UserId>,
    Path(id): Path<String>,
) -> Result<Json<StoredPrompt>, ApiError> {
    check_id("prompt", &id)?;
    Ok(Json(state.service().prompt(&user, &id).await?))
}

/// `?as=` of `GET /api/prompts/{id}/export`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ExportQuery {
    /// `test`: a timeline case in YAML (the only form so far).
    #[serde(rename = "as")]
    form: String,
}

/// `GET /api/prompts/{id}/export?as=test`: the prompt as a test case that replays it, in YAML.
async fn export_prompt(
    State(state): State<AppState>,
    Extension(UserId(user)): Extension<UserId>,
    Path(id): Path<String>,
    query: Result<axum::extract::Query<ExportQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    check_id("prompt", &id)?;
    let form = query
        .map(|query| query.0.form)
        .map_err(|_| ApiError::bad_request("invalid_query", "say what to export as: ?as=test"))?;
    if form != "test" {
        return Err(ApiError::bad_request(
            "invalid_query",
            format!("cannot export as \"{form}\"; the one form is ?as=test"),
        ));
    }
    let case = crate::export::export_case(state.service(), &user, &id)
        .await
        .map_err(export_error)?;
    let yaml = crate::export::case_yaml(&case).map_err(|error| ApiError::internal(&error))?;
    Ok((
        [
            (
                axum::http::header::CONTENT_TYPE,
                "application/yaml; charset=utf-8",
            ),
            (
                axum::http::header::CONTENT_DISPOSITION,
                "attachment; filename=\"case.yaml\"",
            ),
        ],
        yaml,
    )
        .into_response())
}

fn export_error(error: crate::export::ExportError) -> ApiError {
    match error {
        crate::export::ExportError::Conversation(error) => ApiError::from(error),
        crate::export::ExportError::Refused(why) => {
            ApiError::new(StatusCode::CONFLICT, "not_exportable", why)
        }
        crate::export::ExportError::Failed(why) => ApiError::internal(&anyhow::anyhow!(why)),
    }
}

/// `POST /api/prompts/{id}/replay`: the prompt played again from its recording, perhaps with
/// an edited program; nothing is stored and no tool runs.
async fn replay_prompt(
    State(state): State<AppState>,
    Extension(UserId(user)): Extension<UserId>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<crate::types::ReplayBody>,
) -> Result<Json<crate::export::Replayed>, ApiError> {
    check_id("prompt", &id)?;
    if (body.program.is_some() || body.execution.is_some()) && body.code.is_none() {
        return Err(ApiError::bad_request(
            "invalid_body",
            "program and execution say which program code replaces; give code too",
        ));
    }
    if body.program.is_some() && body.execution.is_some() {
        return Err(ApiError::bad_request(
            "invalid_body",
            "give program or execution, not both",
        ));
    }
    if body
        .code
        .as_ref()
        .is_some_and(|code| code.len() > MAX_REPLAY_CODE)
    {
        return Err(ApiError::bad_request(
            "invalid_body",
            format!("code is over {MAX_REPLAY_CODE} bytes"),
        ));
    }
    // A replay runs a prompt: it takes one of the user's slots while it does.
    let _slot = state.take_slot(&user).await?;
    let edit = body.code.map(|code| crate::export::Edit {
        code,
        program: body.program,
        execution: body.execution,
    });
    let replayed = crate::export::replay_prompt(state.service(), &user, &id, edit)
        .await
        .map_err(export_error)?;
    Ok(Json(replayed))
}

/// The longest program a replay takes.
const MAX_REPLAY_CODE: usize = 256 * 1024;

/// Stores a decision before answering 202 (refused at once when the call does not wait for
/// one, naming the calls that do), then applies it in the background, here or on the server
/// that holds the prompt: once answered, it is not lost.
/// `POST /api/prompts/{id}/approve` and `/reject`: each URL has its body ([`ApproveBody`],
/// [`RejectBody`]), which says the call and the [`agentic_core::Verdict`].
async fn decide<Body: DecisionBody>(
    State(state): State<AppState>,
    Extension(UserId(user)): Extension<UserId>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Body>,
) -> Result<Response, ApiError> {
    let scope = body.scope();
    let (tool_call_id, verdict) = body.decision();
    check_id("prompt", &id)?;
    let slot = state.take_slot(&user).await?;
    let word = verdict.word();
    // Not dropped halfway when the client hangs up: stored, or refused.
    let submitting = {
        let (service, user, id, call) = (
            state.service().clone(),
            user.clone(),
            id.clone(),
            tool_call_id.clone(),
        );
        tokio::spawn(async move {
            service
                .submit_decision_with_scope(&user, &id, &call, verdict, scope)
                .await
        })
    };
    submitting.await.map_err(|error| {
        ApiError::internal(&anyhow::anyhow!("storing the decision failed: {error}"))
    })??;
    let service = state.service().clone();
    let prompt_id = id.clone();
    state.spawn(slot, async move {
        if let Err(error) = service.apply_decisions(&prompt_id).await {
            tracing::warn!(prompt = %prompt_id, error = %format!("{error:#}"), "applying a decision failed; it stays stored and is retried");
        }
    });
    Ok((
        StatusCode::ACCEPTED,
        Json(DecisionAccepted {
            prompt_id: id,
            tool_call_id,
            decision: word.to_owned(),
        }),
    )
        .into_response())
}

/// Stops a prompt where it stands. Not in the background: the answer is the prompt as it
/// ended, and a client that hangs up does not stop the cancel halfway. A prompt running on
/// another server is stopped there: 200 with the prompt when it ends within a few seconds,
/// else 202 (the cancel is stored; `prompt.cancelled` follows on the event stream).
async fn cancel(
    State(state): State<AppState>,
    Extension(UserId(user)): Extension<UserId>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    check_id("prompt", &id)?;
    let service = state.service().clone();
    let prompt_id = id.clone();
    let cancelling = tokio::spawn(async move { service.cancel(&user, &prompt_id).await });
    let outcome = cancelling.await.map_err(|error| {
        ApiError::internal(&anyhow::anyhow!("cancelling the prompt failed: {error}"))
    })??;
    Ok(match outcome {
        CancelOutcome::Ended(stored) => Json(*stored).into_response(),
        CancelOutcome::Sent => (
            StatusCode::ACCEPTED,
            Json(CancelSent {
                prompt_id: id,
                decision: "cancel".to_owned(),
            }),
        )
            .into_response(),
    })
}

/// Continues an interrupted prompt here: 202 with its ids, and it runs on in the background
/// (follow it on the event stream), like a new prompt.
async fn continue_prompt(
    State(state): State<AppState>,
    Extension(UserId(user)): Extension<UserId>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    check_id("prompt", &id)?;
    let slot = state.take_slot(&user).await?;
    let starting = {
        let (service, user, id) = (state.service().clone(), user.clone(), id.clone());
        tokio::spawn(tracing::Instrument::in_current_span(async move {
            service.continue_prompt(&user, &id).await
        }))
    };
    let started = starting.await.map_err(|error| {
        ApiError::internal(&anyhow::anyhow!("continuing the prompt failed: {error}"))
    })??;
    let accepted = PromptAccepted {
        prompt_id: started.prompt_id().to_owned(),
        conversation_id: started.conversation_id().to_owned(),
    };
    state.spawn(slot, async move {
        let prompt_id = started.prompt_id().to_owned();
        if let Err(error) = started.run().await {
            tracing::warn!(prompt = %prompt_id, %user, error = %format!("{error:#}"), "a continued prompt ended with an error");
        }
    });
    Ok((StatusCode::ACCEPTED, Json(accepted)).into_response())
}

async fn list_conversations(
    State(state): State<AppState>,
    Extension(UserId(user)): Extension<UserId>,
) -> Result<Json<Vec<Conversation>>, ApiError> {
    Ok(Json(state.service().list(&user).await?))
}

async fn get_conversation(
    State(state): State<AppState>,
    Extension(UserId(user)): Extension<UserId>,
    Path(id): Path<String>,
) -> Result<Json<ConversationDetail>, ApiError> {
    check_id("conversation", &id)?;
    let instance = state.service().get(&user, &id).await?;
    let prompts = instance.prompts().await?;
    let mut conversation = instance.conversation().clone();
    for stored in &prompts {
        conversation.usage.add(&stored.prompt.usage);
    }
    Ok(Json(ConversationDetail {
        conversation,
        prompts,
    }))
}

/// Which scopes to list.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ScopesQuery {
    /// Only those of this conversation (with its prompts' own).
    conversation: Option<String>,
}

/// `GET /api/scopes[?conversation=<id>]`: the user's scopes in force.
async fn list_scopes(
    State(state): State<AppState>,
    Extension(UserId(user)): Extension<UserId>,
    axum::extract::Query(query): axum::extract::Query<ScopesQuery>,
) -> Result<Json<Vec<agentic_core::scope::ScopeGrant>>, ApiError> {
    if let Some(id) = &query.conversation {
        check_id("conversation", id)?;
    }
    Ok(Json(
        state
            .service()
            .scopes(&user, query.conversation.as_deref())
            .await?,
    ))
}

/// `DELETE /api/scopes/{id}`: revokes a scope; the calls it approved are asked about again.
/// The answer is the scope as revoked.
async fn revoke_scope(
    State(state): State<AppState>,
    Extension(UserId(user)): Extension<UserId>,
    Path(id): Path<String>,
) -> Result<Json<agentic_core::scope::ScopeGrant>, ApiError> {
    check_id("scope", &id)?;
    Ok(Json(state.service().revoke_scope(&user, &id).await?))
}

async fn delete_conversation(
    State(state): State<AppState>,
    Extension(UserId(user)): Extension<UserId>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    check_id("conversation", &id)?;
    state.service().delete(&user, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn prepared(state: &AppState, user: &str) -> Result<agentic_core::Prepared, ApiError> {
    Ok(state
        .service()
        .runtime()
        .services()
        .prepare(user, "api", DEFAULT_MODE, &PromptStateMap::default())
        .await?)
}

async fn list_tools(
    State(state): State<AppState>,
    Extension(UserId(user)): Extension<UserId>,
) -> Result<Json<Vec<ToolSummary>>, ApiError> {
    let prepared = prepared(&state, &user).await?;
    Ok(Json(ToolSummary::all(&prepared)))
}

async fn get_tool(
    State(state): State<AppState>,
    Extension(UserId(user)): Extension<UserId>,
    Path(id): Path<String>,
) -> Result<Json<ToolDetail>, ApiError> {
    let prepared = prepared(&state, &user).await?;
    ToolDetail::of(&prepared, &id)
        .map(Json)
        .ok_or_else(|| ApiError::not_found("tool", &id))
}

async fn invoke_tool(
    State(state): State<AppState>,
    Extension(UserId(user)): Extension<UserId>,
    Path(id): Path<String>,
    ApiJson(input): ApiJson<Value>,
) -> Result<Json<InvokeResult>, ApiError> {
    let prepared = prepared(&state, &user).await?;
    // A direct call has no prompt to wait in: a tool that needs approval is refused here.
    if let Approval::Required { reason } = prepared.tools.approval(&id, &input) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "approval_required",
            format!(
                "{id} needs approval ({reason}); call it from a prompt, where it can be approved"
            ),
        ));
    }
    let _slot = state.take_slot(&user).await?;
    let services = state.service().runtime().services().clone();
    let context = ToolContext::new(&user, "api", PromptStateMap::default(), services);
    match prepared.tools.invoke(context, &id, input).await {
        Ok(output) => Ok(Json(InvokeResult { output })),
        Err(ToolError::UnknownTool(_)) => Err(ApiError::not_found("tool", &id)),
        Err(error @ ToolError::InvalidInput { .. }) => {
            Err(ApiError::bad_request("invalid_input", error.to_string()))
        }
        Err(error @ (ToolError::Failed(_) | ToolError::NotRecorded(_))) => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "tool_failed",
            error.to_string(),
        )),
        Err(error @ ToolError::Panicked { .. }) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "tool_panicked",
            error.to_string(),
        )),
    }
}

/// The largest file `GET /api/files` serves.
pub(crate) const FILE_LIMIT: u64 = 32 * 1024 * 1024;

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileQuery {
    /// The file's path among the caller's files, as a file output names it.
    pub path: String,
}

/// One of the caller's files (a file output's `path`), read through the same confinement as
/// the fs tools: another user's files, or anything outside the caller's, are not found.
async fn get_file(
    State(state): State<AppState>,
    Extension(UserId(user)): Extension<UserId>,
    query: Result<axum::extract::Query<FileQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let axum::extract::Query(query) = query?;
    let Some(files) = state
        .service()
        .runtime()
        .services()
        .extensions
        .get::<agentic_core::UserFiles>()
    else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "no_files",
            "this server keeps no user files (the fs plugin is not loaded)",
        ));
    };
    let bytes = files
        .0
        .read(&user, &query.path, FILE_LIMIT)
        .await
        .map_err(|error| {
            ApiError::new(StatusCode::NOT_FOUND, "file_not_found", error.to_string())
        })?;
    let content_type = content_type_of(&query.path);
    let mut response = ([(axum::http::header::CONTENT_TYPE, content_type)], bytes).into_response();
    let headers = response.headers_mut();
    headers.insert(
        axum::http::header::X_CONTENT_TYPE_OPTIONS,
        axum::http::HeaderValue::from_static("nosniff"),
    );
    // Opened directly, nothing in it runs in this origin.
    headers.insert(
        axum::http::header::CONTENT_SECURITY_POLICY,
        axum::http::HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    headers.insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("private, no-store"),
    );
    Ok(response)
}

/// The type a browser may show inline: images and plain text; anything else is bytes.
fn content_type_of(path: &str) -> &'static str {
    let extension = path
        .rsplit_once('.')
        .map(|(_, extension)| extension.to_ascii_lowercase())
        .unwrap_or_default();
    match extension.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "txt" | "md" | "csv" | "log" => "text/plain; charset=utf-8",
        "json" => "application/json",
        "wav" => "audio/wav",
        "mp3" => "audio/mpeg",
        "pdf" => "application/pdf",
        _ => "application/octet-stream",
    }
}

async fn capabilities(State(state): State<AppState>) -> Json<Capabilities> {
    Json(state.service().runtime().services().capabilities())
}

async fn health() -> Json<Health> {
    Json(Health {
        status: "ok".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
    })
}

// ----- Conversation titles: the rename route, a router of its own merged into `routes()`. -----

/// The longest title a conversation takes, in characters.
const TITLE_LIMIT: usize = 200;

fn title_routes() -> Router<AppState> {
    Router::new().route("/api/conversations/{id}", patch(rename_conversation))
}

/// Sets a conversation's title; a title set here is kept, not replaced by one made from the
/// first input.
async fn rename_conversation(
    State(state): State<AppState>,
    Extension(UserId(user)): Extension<UserId>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<RenameBody>,
) -> Result<Json<Conversation>, ApiError> {
    check_id("conversation", &id)?;
    let title = body.title.trim();
    if title.is_empty() {
        return Err(ApiError::bad_request(
            "invalid_title",
            "title must not be empty",
        ));
    }
    let length = title.chars().count();
    if length > TITLE_LIMIT {
        return Err(ApiError::bad_request(
            "invalid_title",
            format!("title has {length} characters, over the limit of {TITLE_LIMIT}"),
        ));
    }
    let mut instance = state.service().get(&user, &id).await?;
    instance.set_title(title).await?;
    Ok(Json(instance.conversation().clone()))
}

//! Approvals asked of the MCP client: now, by elicitation, when it can answer; else later,
//! by pausing the run and handing back a token the client calls again with.

use super::*;

/// How a client can be asked to approve a call.
pub(super) enum Elicitation {
    /// A stateless client (2026-07-28) whose request offers elicitation: the answer to the
    /// call is "input required", and the client sends the call again with its answer.
    InputRequired,
    /// A client of a session (2025) that declared elicitation: a request to it, mid-call.
    Request,
    /// It cannot be asked.
    None,
}

/// How `context`'s client can be asked: stateless clients say what they can in each request's
/// `_meta`, session clients once, in `initialize`.
pub(super) fn elicitation(context: &RequestContext<RoleServer>) -> Elicitation {
    let stateless = context
        .meta
        .protocol_version()
        .is_some_and(|version| !version.has_initialize());
    if stateless {
        let offers = context
            .meta
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.elicitation.is_some());
        return if offers {
            Elicitation::InputRequired
        } else {
            Elicitation::None
        };
    }
    if context.peer.supported_elicitation_modes().is_empty() {
        Elicitation::None
    } else {
        Elicitation::Request
    }
}

/// What asking for a direct call's approval came to.
pub(super) enum Asked {
    Approved,
    Refused(String),
    /// The question, for a stateless client to answer with its next request.
    InputRequired(InputRequiredResult),
}

/// Why a call that needs approval is refused to a client that cannot be asked.
pub(super) fn cannot_ask(id: &str, reason: &str) -> String {
    format!(
        "{id} needs a person's approval ({reason}), and this MCP client cannot ask one (it \
         offers no elicitation). Run it from agentic's CLI or API, or let it run without \
         approval in agentic's config."
    )
}

/// The form that asks a person to approve a call.
pub(super) fn approval_form(
    id: &str,
    reason: &str,
    input: &Value,
) -> Result<ElicitRequestParams, String> {
    let schema = serde_json::from_value(json!({
        "type": "object",
        "properties": {
            "approve": { "type": "boolean", "title": "Run this call?" }
        },
        "required": ["approve"]
    }))
    .map_err(|error| format!("building the approval form failed: {error}"))?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!("agentic wants to run {id} ({reason}) with input {input}"),
        requested_schema: schema,
    })
}

/// Whether an elicitation answer (`ElicitResult` as JSON) approves: accepted, with
/// `approve: true`.
pub(super) fn approves(answer: &Value) -> bool {
    answer.get("action").and_then(Value::as_str) == Some("accept")
        && answer
            .get("content")
            .and_then(|content| content.get("approve"))
            .and_then(Value::as_bool)
            == Some(true)
}

/// Asks a session client's user through an elicitation request; `Err(why)` when they said
/// no or asking failed.
pub(super) async fn ask_now(
    peer: &Peer<RoleServer>,
    id: &str,
    reason: &str,
    input: &Value,
) -> Result<(), String> {
    let params = approval_form(id, reason, input)?;
    match peer.create_elicitation(params).await {
        Ok(answer)
            if answer.action == ElicitationAction::Accept
                && answer
                    .content
                    .as_ref()
                    .and_then(|content| content.get("approve"))
                    .and_then(Value::as_bool)
                    == Some(true) =>
        {
            Ok(())
        }
        Ok(_) => Err(format!("{id} was not approved, so it did not run")),
        Err(error) => Err(format!(
            "{id} needs approval and asking for it failed: {error}"
        )),
    }
}

/// Approves a script's calls by asking a session client at once.
pub(super) struct AskedNow {
    pub(super) peer: Peer<RoleServer>,
}

#[async_trait::async_trait]
impl Approver for AskedNow {
    async fn approve(&self, tool: &str, reason: &str, input: &Value) -> Result<(), String> {
        ask_now(&self.peer, tool, reason, input).await
    }
}

/// A script's question, waiting for a stateless client's next request.
pub(super) struct Question {
    pub(super) tool: String,
    pub(super) reason: String,
    pub(super) input: Value,
    pub(super) reply: tokio::sync::oneshot::Sender<Result<(), String>>,
}

/// Approves a script's calls with the answers a stateless client sends with its next request.
pub(super) struct AskedLater {
    pub(super) questions: tokio::sync::mpsc::Sender<Question>,
}

#[async_trait::async_trait]
impl Approver for AskedLater {
    async fn approve(&self, tool: &str, reason: &str, input: &Value) -> Result<(), String> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let question = Question {
            tool: tool.to_owned(),
            reason: reason.to_owned(),
            input: input.clone(),
            reply,
        };
        let unanswered = || format!("{tool} needs approval and the client did not answer");
        self.questions
            .send(question)
            .await
            .map_err(|_| unanswered())?;
        answer.await.map_err(|_| unanswered())?
    }
}

/// An `agentic.execute` script running apart from the request that started it.
pub(super) struct Run {
    pub(super) task: AbortOnDropHandle<Result<CallToolResult, ErrorData>>,
    pub(super) asked: tokio::sync::mpsc::Receiver<Question>,
    pub(super) _stop: tokio_util::sync::DropGuard,
}

/// A run paused on a question, until the client answers.
pub(super) struct PausedRun {
    pub(super) run: Run,
    pub(super) reply: tokio::sync::oneshot::Sender<Result<(), String>>,
    pub(super) tool: String,
    /// Whose script it is.
    pub(super) user: String,
}

/// Progress being passed on to a client; stopped when dropped.
pub(super) struct Forwarder {
    pub(super) finished: tokio_util::sync::CancellationToken,
    pub(super) task: AbortOnDropHandle<()>,
}

impl Forwarder {
    /// Passes on what the call published before it ended, then stops: the last tick (N of
    /// N) comes right before the result.
    pub(super) async fn finish(self) {
        self.finished.cancel();
        let _ = self.task.await;
    }
}

//! Approvals asked of the MCP client: now, by elicitation, when it can answer; else later,
//! by pausing the run and handing back a token the client calls again with.

use agentic_core::ProposedCall;

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

/// The form that asks a person to approve a program's plan at once: `approve` says yes or
/// no to all of it, `only` (optional) picks some of its calls by number. A client that knows
/// only the single call's form (`approve`) still answers it.
pub(super) fn plan_form(
    summary: &str,
    calls: &[ProposedCall],
) -> Result<ElicitRequestParams, String> {
    let schema = serde_json::from_value(json!({
        "type": "object",
        "properties": {
            "approve": {
                "type": "boolean",
                "title": "Run the planned calls?",
                "description": "Yes runs the calls listed (or only those picked below); no runs none of them."
            },
            "only": {
                "type": "string",
                "title": "Only these calls (optional)",
                "description": format!("Numbers from 1 to {}, e.g. 1 3 5-7; empty for all of them.", calls.len())
            }
        },
        "required": ["approve"]
    }))
    .map_err(|error| format!("building the plan form failed: {error}"))?;
    let mut message =
        format!("agentic ran a program as a dry run: {summary}. Nothing of it has run yet.");
    for (index, call) in calls.iter().enumerate() {
        message.push_str(&format!("\n{}. {} {}", index + 1, call.tool, call.input));
        if let Some(line) = call.line {
            message.push_str(&format!(" (line {line})"));
        }
        message.push_str(&format!("\n   {}", call.reason));
        if let Some(preview) = &call.preview {
            for line in preview.lines().take(20) {
                message.push_str(&format!("\n   {line}"));
            }
        }
    }
    message.push_str(
        "\nThen the program runs for real: the calls approved run, and any other call that \
         needs approval is asked about on its own.",
    );
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    })
}

/// The planned calls an answer to [`plan_form`] approves, of `count`: all when it accepts
/// with `approve: true` and picks none, those `only` picks, and none otherwise. A pick that
/// does not read approves nothing: it is refused, with why.
pub(super) fn plan_choice(answer: Option<&Value>, count: usize) -> Result<Vec<usize>, String> {
    let Some(answer) = answer else {
        return Ok(Vec::new());
    };
    if !approves(answer) {
        return Ok(Vec::new());
    }
    let only = answer
        .get("content")
        .and_then(|content| content.get("only"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if only.trim().is_empty() {
        return Ok((0..count).collect());
    }
    agentic_core::chosen_places(only, count)
        .map_err(|error| format!("the plan was not approved: {error}"))
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

/// Asks a session client's user through an elicitation request: their answer
/// (`ElicitResult` as JSON), or why asking failed (`what` says what was asked about).
pub(super) async fn ask_now(
    peer: &Peer<RoleServer>,
    params: ElicitRequestParams,
    what: &str,
) -> Result<Value, String> {
    let answer = peer
        .create_elicitation(params)
        .await
        .map_err(|error| format!("{what} needs approval and asking for it failed: {error}"))?;
    serde_json::to_value(&answer).map_err(|error| error.to_string())
}

/// Whether `answer` approves the call of `tool`; `Err(why)` when it does not.
fn approved_call(tool: &str, answer: Option<&Value>) -> Result<(), String> {
    if answer.is_some_and(approves) {
        Ok(())
    } else {
        Err(format!("{tool} was not approved, so it did not run"))
    }
}

/// Approves a script's calls by asking a session client at once.
pub(super) struct AskedNow {
    pub(super) peer: Peer<RoleServer>,
}

#[async_trait::async_trait]
impl Approver for AskedNow {
    async fn approve(&self, tool: &str, reason: &str, input: &Value) -> Result<(), String> {
        let answer = ask_now(&self.peer, approval_form(tool, reason, input)?, tool).await?;
        approved_call(tool, Some(&answer))
    }

    async fn approve_plan(
        &self,
        summary: &str,
        calls: &[ProposedCall],
    ) -> Result<Vec<usize>, String> {
        let answer = ask_now(&self.peer, plan_form(summary, calls)?, "the plan").await?;
        plan_choice(Some(&answer), calls.len())
    }
}

/// A script's question, waiting for a stateless client's next request.
pub(super) struct Question {
    pub(super) form: ElicitRequestParams,
    /// The client's answer (`ElicitResult` as JSON), `None` when it sent none.
    pub(super) reply: tokio::sync::oneshot::Sender<Option<Value>>,
}

/// Approves a script's calls with the answers a stateless client sends with its next request.
pub(super) struct AskedLater {
    pub(super) questions: tokio::sync::mpsc::Sender<Question>,
}

impl AskedLater {
    async fn ask(&self, what: &str, form: ElicitRequestParams) -> Result<Option<Value>, String> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let question = Question { form, reply };
        let unanswered = || format!("{what} needs approval and the client did not answer");
        self.questions
            .send(question)
            .await
            .map_err(|_| unanswered())?;
        answer.await.map_err(|_| unanswered())
    }
}

#[async_trait::async_trait]
impl Approver for AskedLater {
    async fn approve(&self, tool: &str, reason: &str, input: &Value) -> Result<(), String> {
        let answer = self.ask(tool, approval_form(tool, reason, input)?).await?;
        approved_call(tool, answer.as_ref())
    }

    async fn approve_plan(
        &self,
        summary: &str,
        calls: &[ProposedCall],
    ) -> Result<Vec<usize>, String> {
        let answer = self.ask("the plan", plan_form(summary, calls)?).await?;
        plan_choice(answer.as_ref(), calls.len())
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
    pub(super) reply: tokio::sync::oneshot::Sender<Option<Value>>,
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

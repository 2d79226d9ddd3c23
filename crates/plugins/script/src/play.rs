//! Playing a [`TimelineCase`]: its earlier prompts, then its own, on a runtime whose model is
//! the case's scripted turns. A recorded case answers its tool calls from its recording and
//! decides approvals as the person did; a hand-written one runs the tools and takes its
//! `decisions`. The test kit snapshots what this returns; `agentic replay` prints it.

use std::sync::Arc;

use agentic_core::replay::{Divergence, Replay};
use agentic_core::{
    EventPayload, ModelRequest, Prompt, PromptOptions, PromptState, Received, Runtime, State,
    ToolOutput,
};
use anyhow::{Context as _, bail};

use crate::{CaseDecision, ScriptedProvider, TimelineCase};

/// What a case's prompt came to.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Played {
    /// The prompt as it ended (or waits).
    pub prompt: Prompt,
    /// Every event published while it ran, in order (the earlier prompts' left out).
    pub events: Vec<EventPayload>,
    /// Every request the model received for it.
    pub requests: Vec<ModelRequest>,
    /// Calls the run made that its recording does not have; each failed without running.
    pub divergences: Vec<Divergence>,
    /// Recorded calls the run did not make.
    pub unused_calls: usize,
}

/// The scripted model that plays `case`'s turns; give it to the runtime that plays the case.
pub fn provider_of(case: &TimelineCase) -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::new(case.turns.clone()).sampling(case.samples))
}

/// Plays `case` on `runtime`, whose model is `provider` ([`provider_of`]), as `user_id`.
pub async fn play(
    case: &TimelineCase,
    runtime: &Runtime,
    provider: &ScriptedProvider,
    user_id: &str,
) -> anyhow::Result<Played> {
    let prompts = runtime.prompts();
    let replay = case.replay().map(Arc::new);
    // Lossless: a long prompt publishes more events than a subscriber's buffer holds.
    let mut subscription = runtime.services().events.subscribe_lossless(user_id);
    let state = State::default();

    // The decisions of the earlier prompts come first, as they were taken.
    let mut decisions = case.decisions.iter();
    let from_recording = case.decisions.is_empty();
    let mut history = Vec::new();
    for earlier in &case.history {
        let mut prompt = prompts
            .create_and_run(PromptOptions {
                user_id: user_id.to_owned(),
                input: Some(earlier.input.clone()),
                mode: earlier.mode.clone(),
                model: case.model,
                history: history.clone(),
                state: state.clone(),
                replay: replay.clone(),
                ..PromptOptions::default()
            })
            .await?;
        loop {
            let calls: Vec<ToolOutput> = prompt
                .calls_awaiting_approval()
                .into_iter()
                .cloned()
                .collect();
            let Some(first) = calls.first().map(|call| call.id.clone()) else {
                break;
            };
            let plan_tool = runtime.services().modes.plan_tool(&prompt.mode);
            let Some(verdict) = verdict_for(
                &calls,
                &mut decisions,
                replay.as_deref(),
                from_recording,
                plan_tool,
            ) else {
                break;
            };
            prompt = decide(runtime, &prompt, &first, &verdict).await?;
        }
        history.push(prompt);
    }
    // Only the case's own prompt is reported.
    while subscription.try_next().is_some() {}
    let requests_before = provider.requests().len();

    let handle = prompts.create(PromptOptions {
        user_id: user_id.to_owned(),
        input: Some(case.input.clone()),
        mode: case.mode.clone(),
        model: case.model,
        history,
        state,
        max_rounds: case.max_rounds,
        replay: replay.clone(),
        ..PromptOptions::default()
    })?;
    let mut prompt = prompts.run(&handle).await?;
    let mut events = Vec::new();
    loop {
        let mut waiting = None;
        while let Some(received) = subscription.try_next() {
            match received {
                Received::Event(event) => {
                    if let EventPayload::ApprovalRequested { tool_call_id, .. } = &event.payload {
                        waiting = Some(tool_call_id.clone());
                    }
                    events.push(event.payload.clone());
                }
                Received::Lagged(missed) => bail!("the timeline lost {missed} events"),
            }
        }
        if prompt.state != PromptState::WaitingForApproval {
            break;
        }
        let waiting = waiting.context("prompt waits for approval but no approval was requested")?;
        // The calls one decision covers: the one asked about, and any asked with it.
        let calls: Vec<ToolOutput> = prompt
            .calls_awaiting_approval()
            .into_iter()
            .filter(|tool| tool.result.is_awaiting_approval())
            .cloned()
            .collect();
        if !calls.iter().any(|call| call.id == waiting) {
            bail!("the call waiting for approval is not in the timeline");
        }
        let plan_tool = runtime.services().modes.plan_tool(&prompt.mode);
        let Some(verdict) = verdict_for(
            &calls,
            &mut decisions,
            replay.as_deref(),
            from_recording,
            plan_tool,
        ) else {
            break;
        };
        prompt = decide(runtime, &prompt, &waiting, &verdict).await?;
    }
    if decisions.next().is_some() {
        bail!("the case has more decisions than the prompt asked for");
    }
    let requests = provider.requests()[requests_before..].to_vec();
    Ok(Played {
        prompt,
        events,
        requests,
        divergences: replay
            .as_ref()
            .map(|replay| replay.divergences())
            .unwrap_or_default(),
        unused_calls: replay.as_ref().map_or(0, |replay| replay.unused().len()),
    })
}

/// The verdict on `call`, which waits for approval: the case's next decision, or, for a
/// recorded case without its own decisions, the one the recording holds. `None` when there is
/// none (the prompt is left waiting).
fn verdict_for<'a>(
    calls: &[ToolOutput],
    decisions: &mut impl Iterator<Item = &'a CaseDecision>,
    replay: Option<&Replay>,
    from_recording: bool,
    plan_tool: Option<&str>,
) -> Option<CaseDecision> {
    match (decisions.next(), replay) {
        (Some(decision), replay) => {
            // A rejection the recording holds is used up by the case's own decision.
            if let Some(replay) = replay {
                for (index, call) in calls.iter().enumerate() {
                    if decision.verdict.rejection_at(index).is_some() {
                        replay.rejected(&call.function, &call.input);
                    }
                }
            }
            Some(decision.clone())
        }
        // A recorded case decides as the person did then.
        (None, Some(replay)) if from_recording => match calls {
            [call] => recorded_verdict(call, replay, plan_tool).map(CaseDecision::from),
            calls => Some(CaseDecision::from(together(
                calls
                    .iter()
                    .map(|call| (call.function.as_str(), call.input.clone())),
                replay,
            ))),
        },
        (None, _) => None,
    }
}

/// The verdict a recording holds for `call`. A request that holds several calls (its input
/// lists them as `calls: [{tool, input}]`: the mode's `plan_tool`, as a code-mode plan)
/// approves those the recording has as run, and none it lacks; any other request is one call.
fn recorded_verdict(
    call: &ToolOutput,
    replay: &Replay,
    plan_tool: Option<&str>,
) -> Option<agentic_core::Verdict> {
    let Some(calls) = call
        .input
        .get("calls")
        .and_then(serde_json::Value::as_array)
        .filter(|_| plan_tool == Some(call.function.as_str()))
    else {
        return replay.verdict(&call.function, &call.input);
    };
    Some(together(
        calls.iter().map(|planned| {
            let tool = planned
                .get("tool")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default();
            (tool, planned.get("input").cloned().unwrap_or_default())
        }),
        replay,
    ))
}

/// One verdict on calls decided together: those the recording has as run are approved, the
/// others are not.
fn together<'a>(
    calls: impl ExactSizeIterator<Item = (&'a str, serde_json::Value)>,
    replay: &Replay,
) -> agentic_core::Verdict {
    let count = calls.len();
    let mut approved = Vec::new();
    let mut reason = None;
    for (index, (tool, input)) in calls.enumerate() {
        match replay.verdict(tool, &input) {
            Some(agentic_core::Verdict::Reject { reason: given }) => reason = reason.or(given),
            Some(_) => approved.push(index),
            None => {}
        }
    }
    if approved.len() == count {
        agentic_core::Verdict::Approve
    } else {
        agentic_core::Verdict::ApproveOnly {
            calls: approved,
            reason,
        }
    }
}

/// Takes a case's decision on the call `tool_call_id` of `prompt`: its scope is kept first,
/// as the conversation service does, and a timeout decides as `[approval] timeout`.
async fn decide(
    runtime: &Runtime,
    prompt: &agentic_core::Prompt,
    tool_call_id: &str,
    decision: &CaseDecision,
) -> anyhow::Result<agentic_core::Prompt> {
    if let Some(scope) = &decision.scope {
        let grants = agentic_core::scope::grants_of(
            prompt,
            None,
            tool_call_id,
            &decision.verdict,
            scope,
            chrono::Utc::now(),
            runtime.services().modes.plan_tool(&prompt.mode),
        )?;
        let slot = runtime
            .services()
            .extensions
            .get::<agentic_core::scope::ScopeSlot>()
            .context("the runtime keeps no scopes")?;
        slot.store().grant(grants).await?;
    }
    let prompts = runtime.prompts();
    Ok(match decision.timeout {
        Some(_) => {
            let by = agentic_core::DecidedBy::Policy {
                name: agentic_core::mode::TIMEOUT_POLICY.to_owned(),
            };
            prompts
                .decide_as(&prompt.id, tool_call_id, &decision.verdict, by)
                .await?
        }
        None => {
            prompts
                .decide(&prompt.id, tool_call_id, &decision.verdict)
                .await?
        }
    })
}

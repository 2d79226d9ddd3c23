//! The dry run of a program, shared by code mode (`mode/plan.rs`) and `interpreter.run-code`
//! (`plugin.rs`): read-only and idempotent tools that need no approval run; every other call
//! is answered with a placeholder of its declared output, and those needing approval are
//! gathered as the plan. What the caller owns (`llm()`, scopes a person granted) it lends
//! through a [`DryHost`].

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use agentic_core::{Approval, Prepared, ToolContext};
use async_trait::async_trait;
use serde_json::Value;

use crate::host::calls_reply;
use crate::plan::{Guess, PlanInput, PlannedCall};
use crate::protocol::{
    ExecuteRequest, HostReply, HostRequest, ParallelCall, ScriptError, ScriptErrorKind, ToolBinding,
};
use crate::sandbox::{Sandbox, SandboxEvent};

/// What the caller of a dry run answers for it.
#[async_trait]
pub(crate) trait DryHost: Send {
    /// The answer to the program's `llm()` request.
    async fn llm(&mut self, prompt: &str, json: bool) -> HostReply;
    /// Whether a scope a person granted earlier approves a call of `tool` (needing approval
    /// because of `reason`): such a call is not part of the plan.
    async fn scoped(&self, tool: &str, reason: &str) -> bool;
}

/// What a dry run found: the plan, and what its reads answered (tool, input, fingerprint),
/// in order, for the real run to compare with.
pub(crate) struct DryRun {
    pub(crate) input: PlanInput,
    pub(crate) reads: VecDeque<(String, Value, u64)>,
    /// How the program failed, when it did.
    pub(crate) failure: Option<ScriptError>,
    /// How it ended otherwise.
    pub(crate) ending: Ending,
    /// The words it gave the user: each text shown with `output()`, then its answer when that
    /// was text.
    pub(crate) said: Vec<String>,
    /// The calls it made that were answered with a placeholder (tool and input): what the
    /// real run may change.
    pub(crate) changes: Vec<(String, Value)>,
    /// Whether the real run could end otherwise than this one for a reason of the dry run's
    /// own: the program looked inside a placeholder, a read met a failure that may pass when
    /// tried again or had no answer in the recording a replay plays, or the pass was cut
    /// short.
    pub(crate) uncertain: bool,
    /// The first few distinct reads that gave data, with what they gave (tool, input,
    /// result): what a review shows the model before its answer stands (`mode/review.rs`).
    pub(crate) data: Vec<(String, Value, Value)>,
}

/// How many reads that gave data a dry run keeps with their results ([`DryRun::data`]).
const DATA_KEPT: usize = 3;

/// How a dry run's program ended, besides failing: what the real run's rules look at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Ending {
    /// It called `done()` or `complete()`.
    pub(crate) done: bool,
    /// Its `done()` or `complete()` gave an answer that is not empty.
    pub(crate) answered: bool,
    /// It showed text with `output()`.
    pub(crate) shown: bool,
    /// It logged something.
    pub(crate) logged: bool,
    /// It returned a value (its last expression or `return`) other than `null`.
    pub(crate) returned: bool,
    /// The tool calls and `llm()` requests it made.
    pub(crate) calls: usize,
    /// It read with tools, and no read gave data: each failed or gave only empty lists
    /// ([`holds_data`]).
    pub(crate) found_nothing: bool,
    /// The distinct reads (tool and input) that gave data.
    pub(crate) data_reads: usize,
    /// A string search of it missed what it looked for in another case or place
    /// (`ExecutionOutcome::misread`).
    pub(crate) misread: bool,
    /// A string search of it was given several texts and matched none of them
    /// (`ExecutionOutcome::searched_in_vain`).
    pub(crate) in_vain: bool,
}

/// Whether a read's result holds data: a value with lists does when one of them is not empty
/// (`{ "blocks": [] }` does not); a value without lists (a file's text, the time) always does.
pub(crate) fn holds_data(value: &Value) -> bool {
    fn walk(value: &Value, lists: &mut usize) -> bool {
        match value {
            Value::Array(items) => {
                *lists += 1;
                !items.is_empty()
            }
            Value::Object(fields) => fields.values().any(|field| walk(field, lists)),
            _ => false,
        }
    }
    let mut lists = 0;
    walk(value, &mut lists) || lists == 0
}

/// What a dry run works with.
pub(crate) struct DryProgram<'a> {
    /// The program's source, for the line each planned call is made on.
    pub(crate) code: &'a str,
    /// The output the plan is of (`code.execute`'s id; empty outside code mode).
    pub(crate) execution: String,
    pub(crate) prepared: &'a Prepared,
    pub(crate) bindings: &'a [ToolBinding],
    pub(crate) context: ToolContext,
    /// Starts the program in the sandbox, once per pass.
    pub(crate) sandbox: &'a Arc<Sandbox>,
    pub(crate) owner: &'a str,
    pub(crate) request: &'a ExecuteRequest,
    pub(crate) wall_time: Option<Duration>,
    /// Only read-only tools run: a check of a program (`mode/candidates.rs`) that may not
    /// run at all, where an idempotent tool would still change something.
    pub(crate) reads_only: bool,
}

/// Dry-runs the program and gathers the calls it would make that need approval as a plan.
///
/// A program that looks inside a placeholder (the sandbox watches them) and calls tools after
/// it got one may call other tools for another answer. So once the first pass makes a call
/// after a placeholder, a second pass starts beside it with other placeholders ([`Guess::Second`]),
/// its reads and `llm()` answered as the first pass's were, as they come: the two run on
/// together, and the second is dropped unless the first turns out to need it. Where the
/// passes part, the program branches on what a call not run yet returns: the dry run cannot
/// know which way the real run goes, so the calls planned from there on are left out of the
/// plan, and a caveat says so. The real run asks about them one by one.
pub(crate) async fn plan_program(program: &DryProgram<'_>, host: &mut impl DryHost) -> DryRun {
    let (feed, fed) = tokio::sync::mpsc::unbounded_channel();
    let (start, started) = tokio::sync::oneshot::channel();
    let lead = Feed::Lead {
        answers: feed,
        start: Some(start),
        armed: false,
    };
    let seed = program
        .request
        .determinism
        .seed
        .unwrap_or_else(|| fastrand::u64(..));
    let first = pass(program, host, Guess::First, lead, seed);
    let second = async move {
        // Not started: the first pass made no call after a placeholder.
        started.await.ok()?;
        let follow = Feed::Follow {
            answers: fed,
            early: Vec::new(),
        };
        Some(pass(program, &mut Unasked, Guess::Second, follow, seed).await)
    };
    let mut first = std::pin::pin!(first);
    let mut second = std::pin::pin!(second);
    let mut second_done = None;
    let first = loop {
        tokio::select! {
            done = &mut first => break done,
            done = &mut second, if second_done.is_none() => second_done = Some(done),
        }
    };
    let mut plan = first.plan();
    // Only a program that looked inside a guess, and called tools after it got one, can call
    // other tools for another answer.
    let goes_on = first
        .guessed
        .first()
        .is_some_and(|at| first.trace.len() > at + 1);
    if !goes_on || !first.read_guess {
        return plan;
    }
    let second = match second_done {
        Some(done) => done,
        None => second.await,
    };
    let Some(second) = second else {
        return plan;
    };
    if second.cut_short && !first.cut_short {
        // It could not say; the plan stands as the first pass made it.
        return plan;
    }
    let parted = first
        .trace
        .iter()
        .zip(&second.trace)
        .position(|((tool, input), (other_tool, other_input))| {
            tool != other_tool || !alike(input, other_input)
        })
        .unwrap_or_else(|| first.trace.len().min(second.trace.len()));
    if parted == first.trace.len() && parted == second.trace.len() {
        // The same calls for both guesses. A branch on a value neither guess takes goes
        // unseen here; the real run's calls outside the plan are still asked about.
        return plan;
    }
    // The call whose guessed answer the program branched on: the last one answered with a
    // placeholder before the passes parted.
    let branched_on = first
        .guessed
        .iter()
        .rev()
        .find(|at| **at < parted)
        .and_then(|at| first.trace.get(*at))
        .map(|(tool, input)| crate::plan::describe(tool, input))
        .unwrap_or_else(|| "a call that has not run".to_owned());
    let kept = first.planned_at.iter().filter(|at| **at < parted).count();
    let left_out = plan.input.calls.len() - kept;
    plan.input.calls.truncate(kept);
    plan.input
        .caveats
        .retain(|caveat| !caveat.starts_with("call ") || planned_place(caveat) <= kept);
    plan.input.caveats.push(if left_out == 0 {
        format!(
            "the program does different things depending on what {branched_on} returns, which \
             the dry run cannot know: any call it makes after that which needs approval will \
             be asked about on its own"
        )
    } else {
        format!(
            "the program does different things depending on what {branched_on} returns, which \
             the dry run cannot know: the {left_out} call(s) needing approval it planned after \
             that are left out of the plan and will be asked about one by one"
        )
    });
    plan
}

/// Whether two passes' inputs are the same call: the same shape, with the same strings (those
/// built from a placeholder are masked already). Numbers and booleans may differ: they are
/// the guesses' own values carried into the input, not another way through the program.
fn alike(one: &Value, other: &Value) -> bool {
    match (one, other) {
        (Value::Number(_), Value::Number(_)) | (Value::Bool(_), Value::Bool(_)) => true,
        (Value::Array(ones), Value::Array(others)) => {
            ones.len() == others.len() && ones.iter().zip(others).all(|(a, b)| alike(a, b))
        }
        (Value::Object(ones), Value::Object(others)) => {
            ones.len() == others.len()
                && ones
                    .iter()
                    .all(|(key, a)| others.get(key).is_some_and(|b| alike(a, b)))
        }
        _ => one == other,
    }
}

/// The number a caveat about one call starts with (`call 3 is …`).
fn planned_place(caveat: &str) -> usize {
    caveat
        .trim_start_matches("call ")
        .split(' ')
        .next()
        .and_then(|number| number.parse().ok())
        .unwrap_or(usize::MAX)
}

/// One pass of a dry run.
struct Pass {
    plan: PlanInput,
    reads: VecDeque<(String, Value, u64)>,
    /// Every call (its tool and input) and `llm()` request (`llm()` and its prompt) the program
    /// made, as compared between passes.
    trace: Vec<(String, Value)>,
    /// The pass could not run to its end for a reason of its own (a limit, no worker).
    cut_short: bool,
    /// The places in `trace` of the calls answered with a placeholder.
    guessed: Vec<usize>,
    /// The places in `trace` of the planned calls.
    planned_at: Vec<usize>,
    /// The program looked inside a placeholder (or got one that cannot be watched).
    read_guess: bool,
    /// A read met a failure that may pass when tried again.
    transient: bool,
    /// A replayed read had no recorded answer.
    unrecorded: bool,
    /// How many reads ran.
    reads_run: usize,
    /// The distinct reads that gave data ([`holds_data`]), by tool and input as JSON text
    /// (a loop of reads stays linear).
    found: std::collections::HashSet<(String, String)>,
    /// The first [`DATA_KEPT`] of them with their results.
    data: Vec<(String, Value, Value)>,
    /// How the program failed, when it did.
    failure: Option<ScriptError>,
    ending: Ending,
    said: Vec<String>,
}

impl Pass {
    fn plan(&self) -> DryRun {
        DryRun {
            input: self.plan.clone(),
            reads: self.reads.clone(),
            failure: self.failure.clone(),
            ending: Ending {
                calls: self.trace.len(),
                found_nothing: self.reads_run > 0 && self.found.is_empty(),
                data_reads: self.found.len(),
                ..self.ending
            },
            said: self.said.clone(),
            changes: self
                .guessed
                .iter()
                .filter_map(|&at| self.trace.get(at).cloned())
                .collect(),
            uncertain: self.read_guess || self.transient || self.unrecorded || self.cut_short,
            data: self.data.clone(),
        }
    }
}

/// The host of a second pass: its `llm()` answers come from the first, and no scope is
/// asked about (which calls need approval does not change what it calls).
struct Unasked;

#[async_trait]
impl DryHost for Unasked {
    async fn llm(&mut self, _prompt: &str, _json: bool) -> HostReply {
        HostReply::Error {
            message: "not asked in the dry run".to_owned(),
        }
    }

    async fn scoped(&self, _tool: &str, _reason: &str) -> bool {
        false
    }
}

/// What the first pass answered, as it answers it.
enum Answer {
    Read(String, Value, Result<Value, String>),
    Llm(String, bool, HostReply),
}

/// How a pass shares answers: the first hands out what its reads and `llm()` answered (and
/// says when it gave its first placeholder); the second takes them, waiting for the first
/// where it is behind.
enum Feed {
    Lead {
        answers: tokio::sync::mpsc::UnboundedSender<Answer>,
        start: Option<tokio::sync::oneshot::Sender<()>>,
        /// A placeholder was handed out: the next call starts the second pass.
        armed: bool,
    },
    Follow {
        answers: tokio::sync::mpsc::UnboundedReceiver<Answer>,
        /// Answers taken from the first pass that no request matched yet.
        early: Vec<Answer>,
    },
}

impl Feed {
    fn hand_out(&mut self, answer: impl FnOnce() -> Answer) {
        if let Self::Lead { answers, .. } = self {
            let _ = answers.send(answer());
        }
    }

    /// A placeholder was handed out.
    fn guessed(&mut self) {
        if let Self::Lead { armed, .. } = self {
            *armed = true;
        }
    }

    /// The program makes a call: after a placeholder, the second pass starts (a program that
    /// makes none after its placeholders never needs one).
    fn calling(&mut self) {
        if let Self::Lead { start, armed, .. } = self
            && *armed
            && let Some(start) = start.take()
        {
            let _ = start.send(());
        }
    }

    /// What the first pass answered to the same read, if it made it.
    async fn read(&mut self, tool: &str, input: &Value) -> Option<Result<Value, String>> {
        let found = self
            .take(|answer| matches!(answer, Answer::Read(t, i, _) if t == tool && i == input))
            .await?;
        match found {
            Answer::Read(_, _, result) => Some(result),
            Answer::Llm(..) => None,
        }
    }

    /// What the first pass's `llm()` answered to the same request, if it made it.
    async fn llm(&mut self, prompt: &str, json: bool) -> Option<HostReply> {
        let found = self
            .take(|answer| matches!(answer, Answer::Llm(p, j, _) if p == prompt && *j == json))
            .await?;
        match found {
            Answer::Llm(_, _, reply) => Some(reply),
            Answer::Read(..) => None,
        }
    }

    async fn take(&mut self, wanted: impl Fn(&Answer) -> bool) -> Option<Answer> {
        let Self::Follow { answers, early } = self else {
            return None;
        };
        if let Some(at) = early.iter().position(&wanted) {
            return Some(early.remove(at));
        }
        // Behind the first pass: wait for its answers, until it has none left.
        while let Some(answer) = answers.recv().await {
            if wanted(&answer) {
                return Some(answer);
            }
            early.push(answer);
        }
        None
    }

    fn follows(&self) -> bool {
        matches!(self, Self::Follow { .. })
    }
}

async fn pass(
    program: &DryProgram<'_>,
    host: &mut impl DryHost,
    guess: Guess,
    mut feed: Feed,
    seed: u64,
) -> Pass {
    // The second pass runs beside the first, of the same prompt, and only as long: it takes
    // a shared slot, not another of the user's (they have one by default, which the first
    // holds).
    let owner = if feed.follows() {
        None
    } else {
        Some(program.owner)
    };
    let mut request = program.request.clone();
    // Both passes draw the same `Math.random()` numbers.
    request.determinism.seed = Some(seed);
    let mut execution = program
        .sandbox
        .start_with_wall_time(owner, request, program.wall_time)
        .await;
    let mut pass = Pass {
        plan: PlanInput {
            execution: program.execution.clone(),
            calls: Vec::new(),
            caveats: Vec::new(),
        },
        reads: VecDeque::new(),
        trace: Vec::new(),
        guessed: Vec::new(),
        planned_at: Vec::new(),
        read_guess: false,
        cut_short: false,
        transient: false,
        unrecorded: false,
        reads_run: 0,
        found: std::collections::HashSet::new(),
        data: Vec::new(),
        failure: None,
        ending: Ending::default(),
        said: Vec::new(),
    };
    loop {
        match execution.next().await {
            SandboxEvent::Request { id, request, .. } => {
                // A second pass may wait for the first's answers: not its own time.
                if feed.follows() {
                    execution.pause_clock();
                }
                let reply = match request {
                    HostRequest::CallTool { tool, input } => {
                        let calls = vec![ParallelCall { tool, input }];
                        let mut results =
                            dry_calls(calls, program, host, guess, &mut feed, &mut pass).await;
                        match results.pop() {
                            // An object is watched for reads; anything else counts as read.
                            Some((Ok(value), true)) if value.is_object() => {
                                HostReply::Guess { value }
                            }
                            Some((result, guessed)) => {
                                pass.read_guess |= guessed;
                                calls_reply(false, vec![result])
                            }
                            None => calls_reply(false, Vec::new()),
                        }
                    }
                    HostRequest::Parallel { calls } => {
                        let results =
                            dry_calls(calls, program, host, guess, &mut feed, &mut pass).await;
                        // A batch's answers are not watched: a guess among them counts as read.
                        pass.read_guess |= results.iter().any(|(_, guessed)| *guessed);
                        calls_reply(
                            true,
                            results.into_iter().map(|(result, _)| result).collect(),
                        )
                    }
                    HostRequest::Llm { prompt, json } => {
                        feed.calling();
                        pass.trace.push((
                            "llm()".to_owned(),
                            crate::plan::without_guesses(&Value::String(prompt.clone())),
                        ));
                        let reply = if feed.follows() {
                            feed.llm(&prompt, json)
                                .await
                                .unwrap_or_else(|| HostReply::Error {
                                    message: "not asked in the dry run".to_owned(),
                                })
                        } else {
                            host.llm(&prompt, json).await
                        };
                        feed.hand_out(|| Answer::Llm(prompt.clone(), json, reply.clone()));
                        reply
                    }
                    HostRequest::ToolSchema { tool } => crate::prompt::describe_reply(
                        &program.prepared.tools,
                        program.bindings,
                        &tool,
                    ),
                };
                if feed.follows() {
                    execution.resume_clock().await;
                }
                execution.reply(id, reply).await;
            }
            SandboxEvent::Output(text) => {
                pass.ending.shown |= !text.trim().is_empty();
                pass.said.push(text);
            }
            SandboxEvent::Log(_) => pass.ending.logged = true,
            SandboxEvent::Finished(outcome) => {
                pass.ending.done = outcome.done;
                pass.ending.answered = outcome
                    .complete
                    .as_ref()
                    .and_then(|complete| complete.get("response"))
                    .is_some_and(|response| match response {
                        Value::Null => false,
                        Value::String(text) => !text.trim().is_empty(),
                        _ => true,
                    });
                if let Some(Value::String(answer)) = outcome
                    .complete
                    .as_ref()
                    .and_then(|complete| complete.get("response"))
                {
                    pass.said.push(answer.clone());
                }
                pass.ending.returned = matches!(&outcome.result, Ok(value) if !value.is_null());
                pass.read_guess |= outcome.guesses_read;
                pass.ending.misread = outcome.misread;
                pass.ending.in_vain = outcome.searched_in_vain;
                pass.cut_short = outcome.result.as_ref().is_err_and(|error| {
                    matches!(
                        error.kind,
                        ScriptErrorKind::Limit | ScriptErrorKind::Unavailable
                    )
                });
                if let Err(error) = &outcome.result {
                    pass.plan.caveats.push(format!(
                        "the dry run stopped with an error, so the plan may miss calls: {}",
                        error.message.lines().next().unwrap_or_default()
                    ));
                    pass.failure = Some(error.clone());
                }
                return pass;
            }
        }
    }
}

/// The answers of one request's calls in a dry run.
async fn dry_calls(
    calls: Vec<ParallelCall>,
    program: &DryProgram<'_>,
    host: &mut impl DryHost,
    guess: Guess,
    feed: &mut Feed,
    pass: &mut Pass,
) -> Vec<(Result<Value, String>, bool)> {
    let tools = &program.prepared.tools;
    let calls = crate::host::normalised_calls(tools, calls);
    let mut results = Vec::with_capacity(calls.len());
    for call in calls {
        feed.calling();
        pass.trace
            .push((call.tool.clone(), crate::plan::without_guesses(&call.input)));
        if let Err(error) = tools.validate(&call.tool, &call.input) {
            // The real run fails the same way; nothing to plan.
            results.push((Err(error.to_string()), false));
            continue;
        }
        let runs = tools.runs_in_dry_run(&call.tool, &call.input)
            && (!program.reads_only || tools.get(&call.tool).is_some_and(|tool| tool.read_only()));
        if runs {
            // A second pass reads what the first read, without asking the tool again.
            let result = match feed.read(&call.tool, &call.input).await {
                Some(result) => result,
                None => tools
                    .invoke_dry(program.context.clone(), &call.tool, call.input.clone())
                    .await
                    .map_err(|error| {
                        // A replay that has no answer to it: what the read would give is not known.
                        pass.unrecorded |= matches!(error, agentic_core::ToolError::NotRecorded(_));
                        error.to_string()
                    }),
            };
            pass.transient |= crate::rules::transient::transient_answer(&result);
            pass.reads_run += 1;
            if let Ok(output) = &result
                && holds_data(output)
                && pass
                    .found
                    .insert((call.tool.clone(), call.input.to_string()))
                && pass.data.len() < DATA_KEPT
            {
                pass.data
                    .push((call.tool.clone(), call.input.clone(), output.clone()));
            }
            pass.reads.push_back((
                call.tool.clone(),
                call.input.clone(),
                crate::plan::fingerprint(&result),
            ));
            feed.hand_out(|| Answer::Read(call.tool.clone(), call.input.clone(), result.clone()));
            results.push((result, false));
            continue;
        }
        let schema = tools
            .get(&call.tool)
            .and_then(|tool| tool.output_schema().cloned());
        let placeholder = crate::plan::placeholder(schema.as_ref(), &call.tool, guess);
        pass.guessed.push(pass.trace.len() - 1);
        feed.guessed();
        if let Approval::Required { reason } = tools.approval(&call.tool, &call.input)
            && !host.scoped(&call.tool, &reason).await
        {
            let plan = &mut pass.plan;
            if crate::plan::holds_placeholder(&call.input) {
                plan.caveats.push(format!(
                    "call {} is built from the result of a call that has not run yet, so the \
                     real run will make it with other input and it will be asked about again",
                    plan.calls.len() + 1
                ));
            }
            let names = program
                .bindings
                .iter()
                .find(|binding| binding.id == call.tool)
                .map(names_of)
                .unwrap_or_default();
            let preview = tools
                .preview(program.context.clone(), &call.tool, &call.input)
                .await;
            pass.planned_at.push(pass.trace.len() - 1);
            plan.calls.push(PlannedCall {
                line: crate::plan::line_of(program.code, &names),
                tool: call.tool,
                input: call.input,
                reason,
                preview,
            });
        }
        results.push((Ok(placeholder), true));
    }
    results
}

/// Whether `code` names a tool some of whose calls need approval: only such a program is
/// worth a dry run.
pub(crate) fn names_a_gated_tool(
    code: &str,
    prepared: &Prepared,
    bindings: &[ToolBinding],
) -> bool {
    bindings
        .iter()
        .any(|binding| prepared.tools.may_need_approval(&binding.id) && names_tool(code, binding))
}

/// Whether `code` names `binding`'s tool by any name it is bound as, each as a name of its own
/// (`fs.write` is not named by `fs.writeFile` nor by `myfs.write`): a mention counts, called
/// or not.
pub(crate) fn names_tool(code: &str, binding: &ToolBinding) -> bool {
    names_of(binding).iter().any(|name| stands_in(code, name))
}

/// Whether `name` stands in `code` as a name of its own: not part of a longer one.
fn stands_in(code: &str, name: &str) -> bool {
    let part = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    code.match_indices(name).any(|(start, _)| {
        let before = code[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !(part(c) || c == '.'));
        let after = code[start + name.len()..]
            .chars()
            .next()
            .is_none_or(|c| !part(c));
        before && after
    })
}

/// Every name code may call `binding`'s tool by.
pub(crate) fn names_of(binding: &ToolBinding) -> Vec<String> {
    let mut names: Vec<String> = binding
        .member
        .iter()
        .chain(binding.function.iter())
        .chain(binding.aliases.iter())
        .cloned()
        .collect();
    names.push(binding.id.clone());
    names
}

#[cfg(test)]
mod tests {
    use super::stands_in as names;

    #[test]
    fn a_name_counts_only_when_it_stands_alone() {
        assert!(names("todo.delete({ id })", "todo.delete"));
        assert!(names("await tools[\"todo.delete\"]({ id })", "todo.delete"));
        assert!(names("const f = todoDelete;", "todoDelete"));
        assert!(!names("fs.writeFile('a', 'b')", "fs.write"));
        assert!(!names("myfs.write({})", "fs.write"));
        assert!(!names("x.todo.delete()", "todo.delete"));
    }
}

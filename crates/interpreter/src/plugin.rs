//! The `interpreter` plugin: registers mode `code` and offers classic mode the
//! `interpreter.run-code` tool.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agentic_core::{
    Approval, DecidedBy, Plugin, PluginRegistration, PrepareContext, Services, SetupContext,
    ToolContext, ToolError, Verdict, define_tool,
};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::dry_run::{DryHost, DryProgram, plan_program};
use crate::host::{ScriptHost, calls_reply};
use crate::mode::CodeModeFactory;
use crate::plan::{DecidedPlan, Held};
use crate::protocol::{ExecuteRequest, HostReply, HostRequest, ParallelCall, ToolBinding};
use crate::sandbox::{Sandbox, SandboxConfig, SandboxEvent};

agentic_core::inventory::submit! {
    PluginRegistration { id: "interpreter", create: create_plugin }
}

/// The plugin, as the runtime creates it; the `agentic` crate links it by feature.
pub fn create_plugin() -> Arc<dyn Plugin> {
    Arc::new(InterpreterPlugin::default())
}

pub(crate) const RUN_CODE_TOOL: &str = "interpreter.run-code";

/// Settings under the `interpreter` config section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct InterpreterConfig {
    /// Model calls per code-mode prompt.
    pub max_iterations: u32,
    /// Run tools that need approval without asking. Only for trusted setups.
    pub auto_approve: bool,
    /// Plan first: a program that may make calls needing approval runs as a dry run, and the
    /// person approves its plan at once instead of call by call.
    pub plan: bool,
    /// Tokens the model reads at most (its context window), for sizing the system prompt.
    pub context_window: u64,
    /// The share of `contextWindow` the tool declarations may take in the code-mode system
    /// prompt; beyond it tools are listed by name, and scripts use `searchTools` and
    /// `describeTool`.
    pub declarations_share: f64,
    pub sandbox: SandboxConfig,
}

impl Default for InterpreterConfig {
    fn default() -> Self {
        Self {
            max_iterations: 10,
            auto_approve: false,
            plan: true,
            context_window: 16_384,
            declarations_share: 0.25,
            sandbox: SandboxConfig::default(),
        }
    }
}

/// What the mode and the tool share: settings and the worker pool.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: InterpreterConfig,
    pub sandbox: Arc<Sandbox>,
}

#[derive(Debug, Default)]
pub struct InterpreterPlugin {
    shared: OnceLock<Arc<Shared>>,
}

#[async_trait]
impl Plugin for InterpreterPlugin {
    fn id(&self) -> &str {
        "interpreter"
    }

    fn everyday(&self) -> bool {
        true
    }

    fn config_schema(&self) -> Value {
        agentic_core::schema_of::<InterpreterConfig>()
    }

    async fn setup(&self, context: &mut SetupContext<'_>) -> anyhow::Result<()> {
        let config: InterpreterConfig = context.config.plugin("interpreter")?;
        crate::sandbox_metrics::describe_metrics();
        let shared = Arc::new(Shared {
            sandbox: Sandbox::new(config.sandbox.clone()),
            config,
        });
        context.modes.register(Arc::new(CodeModeFactory {
            shared: shared.clone(),
        }))?;
        context
            .extensions
            .insert(Arc::new(agentic_core::ScriptNames(script_names)));
        let _ = self.shared.set(shared);
        Ok(())
    }

    async fn ready(&self, _services: &Arc<Services>) -> anyhow::Result<()> {
        if let Some(shared) = self.shared.get() {
            let sandbox = shared.sandbox.clone();
            // Start workers now so the first script does not wait for one.
            tokio::spawn(async move {
                if let Err(error) = sandbox.warm_up().await {
                    tracing::warn!(%error, "could not start sandbox workers");
                }
            });
        }
        Ok(())
    }

    async fn prepare(&self, context: &mut PrepareContext) -> anyhow::Result<()> {
        let Some(shared) = self.shared.get().cloned() else {
            return Ok(());
        };
        // Code mode already is code; a sandbox inside the sandbox helps nobody.
        if context.mode == crate::mode::CODE_MODE {
            return Ok(());
        }
        context.add_tool(
            define_tool(
                RUN_CODE_TOOL,
                "Runs JavaScript with the conversation's tools available as functions; returns \
                 the script's value, what it output and what it logged",
                move |tool_context, input: RunCodeInput| {
                    let shared = shared.clone();
                    async move { run_code(&shared, tool_context, input).await }
                },
            )
            .into_arc(),
        );
        Ok(())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RunCodeInput {
    /// JavaScript to run; its last expression or `return` is the result.
    pub code: String,
    /// Bound to the global `input` (`null` when not given).
    #[serde(default)]
    pub input: Option<Value>,
    /// Wall time for this run, at most the configured limit.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunCodeOutput {
    pub value: Value,
    pub output: Vec<String>,
    pub logs: Vec<String>,
}

/// The names `interpreter.run-code` scripts call the tools by (see [`agentic_core::ScriptNames`]).
fn script_names(tools: &agentic_core::ToolSet) -> std::collections::HashMap<String, String> {
    script_bindings(tools)
        .into_iter()
        .map(|binding| {
            let call = binding.call_name();
            (binding.id, call)
        })
        .collect()
}

/// The bindings of a run-code script: every tool but run-code itself.
fn script_bindings(tools: &agentic_core::ToolSet) -> Vec<ToolBinding> {
    let tools: Vec<_> = tools
        .iter()
        .filter(|tool| tool.id() != RUN_CODE_TOOL)
        .map(|tool| crate::names::ToolNames::of(tool.as_ref()))
        .collect();
    crate::names::bindings(tools)
}

/// Runs code for classic mode. Tools that need approval are refused inside (a tool call
/// cannot stop to ask a person, and running them unasked would bypass approval), unless the
/// call's context names someone to ask ([`ToolContext::approver`]).
async fn run_code(
    shared: &Shared,
    context: ToolContext,
    input: RunCodeInput,
) -> Result<RunCodeOutput, ToolError> {
    let mut prepared = context
        .services
        .prepare(
            &context.user_id,
            &context.prompt_id,
            "classic",
            &context.state,
        )
        .await?;
    prepared.tools = prepared
        .tools
        .with_input_advice(crate::rules::input_advice::advice);
    let bindings = script_bindings(&prepared.tools);
    let wall_time = input.timeout_ms.map(Duration::from_millis);
    let request = ExecuteRequest {
        code: input.code,
        tools: bindings.clone(),
        // The global `input`, `null` when the call gave none.
        input: Some(input.input.unwrap_or(Value::Null)),
        store: serde_json::Map::new(),
        limits: shared.sandbox.config().script_limits(),
        same_tools_as_before: false,
        determinism: Default::default(),
    };
    let plan = plan_first(shared, &context, &prepared, &bindings, &request, wall_time).await?;
    let mut execution = shared
        .sandbox
        .start_with_wall_time(Some(&context.user_id), request, wall_time)
        .await;
    let (mut output, mut logs) = (Vec::new(), Vec::new());
    loop {
        match execution.next().await {
            SandboxEvent::Output(text) => output.push(text),
            SandboxEvent::Log(text) => logs.push(text),
            SandboxEvent::Request { id, request, .. } => {
                // A person deciding is not the script's time.
                let asks = context.approver().is_some()
                    && !shared.config.auto_approve
                    && calls_of(&request).any(|(tool, input)| {
                        matches!(
                            prepared.tools.approval(tool, input),
                            Approval::Required { .. }
                        )
                    });
                if asks {
                    execution.pause_clock();
                }
                let mut host = RunCodeHost {
                    shared,
                    prepared: &prepared,
                    context: &context,
                    bindings: &bindings,
                    plan: &plan,
                };
                let reply = match crate::host::answer(&mut host, id, request).await {
                    Ok(Some(reply)) => reply,
                    // Calls are never held for a person here: they are refused instead.
                    Ok(None) => HostReply::Error {
                        message: "the call could not be answered".to_owned(),
                    },
                    Err(never) => match never {},
                };
                if asks {
                    execution.resume_clock().await;
                }
                execution.reply(id, reply).await;
            }
            SandboxEvent::Finished(outcome) => {
                return match outcome.result {
                    Ok(value) => Ok(RunCodeOutput {
                        value,
                        output,
                        logs,
                    }),
                    Err(error) => Err(ToolError::failed(error.describe())),
                };
            }
        }
    }
}

/// Plan first, when someone can be asked ([`ToolContext::approver`]) and the program names a
/// tool that may need approval: the program runs as a dry run, the calls it would make that
/// need approval are put to the approver at once, and the real run is held to what they
/// approved. `None` when there is no plan (nothing to approve, or nobody to ask).
async fn plan_first(
    shared: &Shared,
    context: &ToolContext,
    prepared: &agentic_core::Prepared,
    bindings: &[ToolBinding],
    request: &ExecuteRequest,
    wall_time: Option<Duration>,
) -> Result<Option<std::sync::Mutex<DecidedPlan>>, ToolError> {
    let Some(approver) = context.approver() else {
        return Ok(None);
    };
    if !shared.config.plan
        || shared.config.auto_approve
        || !crate::dry_run::names_a_gated_tool(&request.code, prepared, bindings)
    {
        return Ok(None);
    }
    let program = DryProgram {
        code: &request.code,
        execution: String::new(),
        prepared,
        bindings,
        context: context.clone(),
        sandbox: &shared.sandbox,
        owner: &context.user_id,
        request,
        wall_time,
        reads_only: false,
    };
    let dry = plan_program(&program, &mut RunCodeDry).await;
    if dry.input.calls.is_empty() {
        return Ok(None);
    }
    let mut summary = dry.input.reason();
    for caveat in &dry.input.caveats {
        summary.push_str(&format!("\nNote: {caveat}"));
    }
    let approved = approver
        .approve_plan(&summary, &dry.input.calls)
        .await
        .map_err(|error| ToolError::failed(format!("the program did not run: {error}")))?;
    let verdict = if approved.len() == dry.input.calls.len() {
        Verdict::Approve
    } else {
        Verdict::ApproveOnly {
            calls: approved,
            reason: None,
        }
    };
    let by = DecidedBy::User {
        user_id: context.user_id.clone(),
    };
    let plan = DecidedPlan::new(&dry.input, &verdict, by, chrono::Utc::now()).with_reads(dry.reads);
    Ok(Some(std::sync::Mutex::new(plan)))
}

/// `interpreter.run-code`'s dry run: there is no `llm()`, and no scopes.
struct RunCodeDry;

#[async_trait]
impl DryHost for RunCodeDry {
    async fn llm(&mut self, _prompt: &str, _json: bool) -> HostReply {
        no_llm()
    }

    async fn scoped(&self, _tool: &str, _reason: &str) -> bool {
        false
    }
}

fn no_llm() -> HostReply {
    HostReply::Error {
        message: "llm() is available in code mode, not in interpreter.run-code".to_owned(),
    }
}

/// The tool calls a script's request makes, with their inputs.
fn calls_of(request: &HostRequest) -> Box<dyn Iterator<Item = (&str, &Value)> + '_> {
    match request {
        HostRequest::CallTool { tool, input } => Box::new(std::iter::once((tool.as_str(), input))),
        HostRequest::Parallel { calls } => {
            Box::new(calls.iter().map(|call| (call.tool.as_str(), &call.input)))
        }
        HostRequest::Llm { .. } | HostRequest::ToolSchema { .. } => Box::new(std::iter::empty()),
    }
}

/// The host of a script run by `interpreter.run-code`: tools that need approval are refused,
/// and there is no `llm()`.
struct RunCodeHost<'a> {
    shared: &'a Shared,
    prepared: &'a agentic_core::Prepared,
    context: &'a ToolContext,
    bindings: &'a [ToolBinding],
    /// The plan the approver decided, which the script's calls are held to.
    plan: &'a Option<std::sync::Mutex<DecidedPlan>>,
}

#[async_trait]
impl ScriptHost for RunCodeHost<'_> {
    type Error = std::convert::Infallible;

    fn tools(&self) -> (&agentic_core::ToolSet, &[ToolBinding]) {
        (&self.prepared.tools, self.bindings)
    }

    async fn tool_calls(
        &mut self,
        _id: u64,
        parallel: bool,
        calls: Vec<ParallelCall>,
    ) -> Result<Option<HostReply>, Self::Error> {
        let this = &*self;
        let reads: Vec<Option<(String, Value)>> = calls
            .iter()
            .map(|call| {
                this.prepared
                    .tools
                    .runs_in_dry_run(&call.tool, &call.input)
                    .then(|| (call.tool.clone(), call.input.clone()))
            })
            .collect();
        let runs = calls
            .into_iter()
            .map(|call| async move { this.call(&call.tool, call.input).await });
        let results = futures::future::join_all(runs).await;
        if let Some(plan) = this.plan {
            // A read that answers otherwise than in the dry run: the plan stops standing.
            let mut plan = plan
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for (read, result) in reads.iter().zip(&results) {
                if let Some((tool, input)) = read {
                    plan.saw_read(tool, input, result);
                }
            }
        }
        Ok(Some(calls_reply(parallel, results)))
    }

    async fn llm(&mut self, _prompt: &str, _json: bool) -> HostReply {
        no_llm()
    }
}

impl RunCodeHost<'_> {
    async fn call(&self, tool: &str, input: Value) -> Result<Value, String> {
        if tool == RUN_CODE_TOOL {
            return Err("interpreter.run-code cannot call itself".to_owned());
        }
        if let Approval::Required { reason } = self.prepared.tools.approval(tool, &input)
            && !self.shared.config.auto_approve
        {
            let held = self.plan.as_ref().map(|plan| {
                plan.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .hold(tool, &input)
            });
            let reason = match held {
                Some(Held::Approved { .. }) => None,
                Some(Held::Rejected { reason, .. }) => {
                    return Err(Verdict::Reject { reason }.rejection().unwrap_or_default());
                }
                Some(Held::Ask(why)) => Some(format!("{reason} ({why})")),
                None => Some(reason),
            };
            if let Some(reason) = reason {
                self.ask(tool, &reason, &input).await?;
            }
        }
        self.prepared
            .tools
            .invoke(self.context.clone(), tool, input)
            .await
            .map_err(|error| error.to_string())
    }

    /// Puts a call that needs approval to the approver; refused when there is none.
    async fn ask(&self, tool: &str, reason: &str, input: &Value) -> Result<(), String> {
        match self.context.approver() {
            Some(approver) => approver.approve(tool, reason, input).await,
            None => Err(format!(
                "{tool} needs approval ({reason}), which code run through \
                 interpreter.run-code cannot ask for; call the tool directly"
            )),
        }
    }
}

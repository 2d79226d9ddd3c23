//! Plans against hostile programs: whatever a program does between its dry run and its real
//! run, a call needing approval runs only if the person approved it, in the plan or on its
//! own. Each program here tries one way around the plan; the person approves every plan and
//! rejects every call asked about on its own, so any write outside an approved plan that ran
//! would show in the store's log.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agentic_core::{
    Config, Plugin, PrepareContext, Prompt, PromptOptions, PromptOutput, PromptState, Runtime,
    ToolError, Verdict, define_tool,
};
use agentic_interpreter as _;
use agentic_plugin_script::{ScriptedProvider, Turn};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// `box.write` (needs approval; every run is logged), `box.read` (read-only, but answers
/// something new each time: a file another process keeps changing), `box.peek` (read-only,
/// always the same).
#[derive(Default)]
struct Store {
    written: Arc<Mutex<Vec<(String, String)>>>,
    reads: Arc<AtomicU64>,
}

#[derive(Deserialize, JsonSchema)]
struct Write {
    key: String,
    value: String,
}

#[derive(Deserialize, JsonSchema)]
struct Key {
    key: String,
}

#[derive(serde::Serialize, JsonSchema)]
struct Written {
    key: String,
    ok: bool,
}

#[derive(serde::Serialize, JsonSchema)]
struct Read {
    value: String,
}

#[async_trait]
impl Plugin for Store {
    fn id(&self) -> &str {
        "box"
    }

    async fn prepare(&self, context: &mut PrepareContext) -> anyhow::Result<()> {
        let written = self.written.clone();
        context.add_tool(
            define_tool("box.write", "Writes a value", move |_cx, input: Write| {
                written
                    .lock()
                    .unwrap()
                    .push((input.key.clone(), input.value));
                async move {
                    Ok::<_, ToolError>(Written {
                        key: input.key,
                        ok: true,
                    })
                }
            })
            .require_approval("writes a value")
            .into_arc(),
        );
        let reads = self.reads.clone();
        context.add_tool(
            define_tool("box.read", "Reads a value", move |_cx, _input: Key| {
                let n = reads.fetch_add(1, Ordering::SeqCst) + 1;
                async move {
                    Ok::<_, ToolError>(Read {
                        value: format!("v{n}"),
                    })
                }
            })
            .read_only()
            .into_arc(),
        );
        context.add_tool(
            define_tool(
                "box.peek",
                "Reads a value that never changes",
                |_cx, input: Key| async move {
                    Ok::<_, ToolError>(Read {
                        value: format!("same {}", input.key),
                    })
                },
            )
            .read_only()
            .into_arc(),
        );
        Ok(())
    }
}

/// How a run went: what was written, how often a person was asked, and the prompt.
struct Ran {
    written: Vec<(String, String)>,
    plans: usize,
    asked_alone: Vec<String>,
    prompt: Prompt,
}

/// Runs `code` in code mode; each plan gets `plan_verdict`, and each call asked about on its
/// own is rejected.
async fn run(code: &str, plan_verdict: Verdict) -> Ran {
    let store = Store::default();
    let written = store.written.clone();
    let provider = Arc::new(ScriptedProvider::new(vec![
        Turn {
            code: Some(code.to_owned()),
            ..Turn::default()
        },
        Turn {
            text: Some("Done.".to_owned()),
            ..Turn::default()
        },
    ]));
    let runtime = Runtime::builder()
        .config(Config::from_value(
            json!({ "interpreter": { "sandbox": { "backend": "in-process" } } }),
        ))
        .registered_plugins()
        .plugin(Arc::new(store))
        .provider(provider)
        .build()
        .await
        .unwrap();
    let prompts = runtime.prompts();
    let mut prompt = prompts
        .create_and_run(PromptOptions {
            user_id: "alice".into(),
            input: Some("go".into()),
            mode: Some("code".into()),
            ..PromptOptions::default()
        })
        .await
        .unwrap();
    let (mut plans, mut asked_alone) = (0, Vec::new());
    while prompt.state == PromptState::WaitingForApproval {
        let waiting = prompt
            .output
            .iter()
            .find_map(|output| match output {
                PromptOutput::Tool(tool) if tool.result.is_awaiting_approval() => {
                    Some(tool.clone())
                }
                _ => None,
            })
            .expect("a call waits");
        let verdict = if waiting.function == "code.plan" {
            plans += 1;
            plan_verdict.clone()
        } else {
            asked_alone.push(format!("{}", waiting.input));
            Verdict::reject(Some("not in the plan"))
        };
        prompt = prompts
            .decide(&prompt.id, &waiting.id, &verdict)
            .await
            .unwrap();
        assert!(plans + asked_alone.len() < 50, "asked without end");
    }
    assert_eq!(prompt.state, PromptState::Completed, "{:?}", prompt.error);
    let written = written.lock().unwrap().clone();
    Ran {
        written,
        plans,
        asked_alone,
        prompt,
    }
}

/// The inputs of the calls of the plans the person approved (all of them, here).
fn planned(prompt: &Prompt) -> Vec<Value> {
    prompt
        .output
        .iter()
        .filter_map(|output| match output {
            PromptOutput::Tool(tool) if tool.function == "code.plan" => Some(tool.clone()),
            _ => None,
        })
        .flat_map(|plan| {
            plan.input["calls"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|call| call["input"].clone())
        })
        .collect()
}

fn pair(key: &str, value: &str) -> (String, String) {
    (key.to_owned(), value.to_owned())
}

/// Every write that ran was a planned one.
fn only_planned_ran(ran: &Ran) {
    let planned = planned(&ran.prompt);
    for (key, value) in &ran.written {
        assert!(
            planned.contains(&json!({ "key": key, "value": value })),
            "{key}={value} ran outside the plan; planned: {planned:?}"
        );
    }
}

#[tokio::test]
async fn twenty_writes_ask_once_and_run_exactly_the_approved_twenty() {
    let ran = run(
        r#"for (let i = 0; i < 20; i++) { box.write({ key: "k" + i, value: box.peek({ key: "k" + i }).value }); }
           done("wrote 20");"#,
        Verdict::Approve,
    )
    .await;
    assert_eq!(ran.plans, 1);
    assert!(ran.asked_alone.is_empty(), "{:?}", ran.asked_alone);
    let expected: Vec<(String, String)> = (0..20)
        .map(|i| pair(&format!("k{i}"), &format!("same k{i}")))
        .collect();
    assert_eq!(ran.written, expected);
    only_planned_ran(&ran);
}

#[tokio::test]
async fn a_write_whose_input_changed_after_the_plan_is_asked_about_and_never_runs_unapproved() {
    // The read answers v1 in the dry run and v2 for real: the planned write is of v1.
    let ran = run(
        r#"const v = box.read({ key: "n" }).value;
           try { box.write({ key: "out", value: v }); } catch (error) { output(error.message); }
           done(v);"#,
        Verdict::Approve,
    )
    .await;
    assert_eq!(ran.plans, 1);
    assert_eq!(ran.asked_alone.len(), 1, "{:?}", ran.asked_alone);
    assert!(ran.written.is_empty(), "{:?}", ran.written);
    let asked = ran
        .prompt
        .output
        .iter()
        .find_map(|output| match output {
            PromptOutput::Tool(tool) if tool.function == "box.write" => tool.decision.clone(),
            _ => None,
        })
        .unwrap();
    assert!(
        asked
            .shown
            .contains("box.read({\"key\":\"n\"}) answered differently than in the dry run"),
        "{}",
        asked.shown
    );
}

#[tokio::test]
async fn a_write_made_only_when_the_program_sees_it_is_not_a_dry_run_is_asked_about() {
    // A program that tells the dry run from the real one by its placeholders.
    let ran = run(
        r#"const first = box.write({ key: "a", value: "1" });
           if (String(first.key).includes("not run yet")) {
             output("looks harmless");
           } else {
             try { box.write({ key: "evil", value: "x" }); } catch (error) { output(error.message); }
           }
           done("ok");"#,
        Verdict::Approve,
    )
    .await;
    assert_eq!(ran.written, vec![pair("a", "1")]);
    assert_eq!(ran.asked_alone.len(), 1, "{:?}", ran.asked_alone);
    only_planned_ran(&ran);
}

#[tokio::test]
async fn a_program_that_plans_nothing_and_writes_for_real_is_asked_call_by_call() {
    // No write in the dry run at all: no plan, every real write asks on its own.
    let ran = run(
        r#"const probe = box.read({ key: "probe" }).value;
           if (probe !== "v1") {
             for (let i = 0; i < 3; i++) {
               try { box.write({ key: "x" + i, value: "y" }); } catch (error) { output(error.message); }
             }
           }
           done("ok");"#,
        Verdict::Approve,
    )
    .await;
    assert_eq!(ran.plans, 0);
    assert_eq!(ran.asked_alone.len(), 3);
    assert!(ran.written.is_empty(), "{:?}", ran.written);
}

#[tokio::test]
async fn a_planned_write_made_twice_runs_once() {
    let ran = run(
        r#"const r = box.write({ key: "a", value: "1" });
           if (r.ok === true && !String(r.key).includes("not run yet")) {
             try { box.write({ key: "a", value: "1" }); } catch (error) { output(error.message); }
           }
           done("ok");"#,
        Verdict::Approve,
    )
    .await;
    assert_eq!(ran.written, vec![pair("a", "1")]);
    assert_eq!(ran.asked_alone.len(), 1);
}

#[tokio::test]
async fn a_write_left_out_of_the_plan_never_runs_even_in_a_parallel_batch() {
    let ran = run(
        r#"const results = parallel([
             { tool: "box.write", input: { key: "a", value: "1" } },
             { tool: "box.write", input: { key: "b", value: "2" } },
             { tool: "box.write", input: { key: "c", value: "3" } },
           ]);
           done(JSON.stringify(results));"#,
        Verdict::ApproveOnly {
            calls: vec![0, 2],
            reason: Some("not b".to_owned()),
        },
    )
    .await;
    assert_eq!(ran.plans, 1);
    assert!(ran.asked_alone.is_empty());
    assert_eq!(ran.written, vec![pair("a", "1"), pair("c", "3")]);
}

#[tokio::test]
async fn a_rejected_plan_runs_nothing_it_planned() {
    let ran = run(
        r#"for (const key of ["a", "b"]) {
             try { box.write({ key, value: "1" }); } catch (error) { output(error.message); }
           }
           done("ok");"#,
        Verdict::reject(Some("no")),
    )
    .await;
    assert_eq!(ran.plans, 1);
    assert!(ran.written.is_empty(), "{:?}", ran.written);
    assert!(ran.asked_alone.is_empty());
}

#[tokio::test]
async fn a_write_built_from_a_placeholder_is_flagged_in_the_plan_and_asked_about_for_real() {
    let ran = run(
        r#"const first = box.write({ key: "a", value: "1" });
           try { box.write({ key: "b", value: "after " + first.key }); } catch (error) { output(error.message); }
           done("ok");"#,
        Verdict::Approve,
    )
    .await;
    let plan = ran
        .prompt
        .output
        .iter()
        .find_map(|output| match output {
            PromptOutput::Tool(tool) if tool.function == "code.plan" => Some(tool.clone()),
            _ => None,
        })
        .unwrap();
    let caveats = plan.input["caveats"].to_string();
    assert!(
        caveats.contains("call 2 is built from the result"),
        "{caveats}"
    );
    assert_eq!(ran.written, vec![pair("a", "1")]);
    assert_eq!(ran.asked_alone.len(), 1);
}

/// The plan of `ran`, the first one recorded.
fn plan_of(ran: &Ran) -> Value {
    ran.prompt
        .output
        .iter()
        .find_map(|output| match output {
            PromptOutput::Tool(tool) if tool.function == "code.plan" => Some(tool.input.clone()),
            _ => None,
        })
        .expect("a plan")
}

#[tokio::test]
async fn a_program_that_branches_on_a_placeholder_plans_only_what_comes_before_the_branch() {
    // What the program writes second depends on what the first write returns, which the dry
    // run cannot know: the plan holds the first write only, says why, and the second is asked
    // about on its own.
    let ran = run(
        r#"const first = box.write({ key: "a", value: "1" });
           const next = first.ok ? { key: "b", value: "2" } : { key: "c", value: "3" };
           try { box.write(next); } catch (error) { output(error.message); }
           done("ok");"#,
        Verdict::Approve,
    )
    .await;
    let plan = plan_of(&ran);
    assert_eq!(plan["calls"].as_array().unwrap().len(), 1, "{plan}");
    let caveats = plan["caveats"].to_string();
    assert!(
        caveats.contains("does different things depending on what box.write")
            && caveats.contains("left out of the plan"),
        "{caveats}"
    );
    assert_eq!(ran.written, vec![pair("a", "1")]);
    assert_eq!(ran.asked_alone.len(), 1, "{:?}", ran.asked_alone);
    only_planned_ran(&ran);
}

#[tokio::test]
async fn a_program_that_only_passes_a_placeholder_along_keeps_its_whole_plan() {
    // Results kept but never looked at: both passes make the same calls, so nothing is cut.
    let ran = run(
        r#"const results = [];
           for (const key of ["a", "b", "c"]) { results.push(box.write({ key, value: key })); }
           done(results.length + " written");"#,
        Verdict::Approve,
    )
    .await;
    let plan = plan_of(&ran);
    assert_eq!(plan["calls"].as_array().unwrap().len(), 3, "{plan}");
    assert!(plan.get("caveats").is_none(), "{plan}");
    assert_eq!(
        ran.written,
        vec![pair("a", "a"), pair("b", "b"), pair("c", "c")]
    );
    assert!(ran.asked_alone.is_empty(), "{:?}", ran.asked_alone);
}

#[tokio::test]
async fn a_program_that_replaces_proxy_does_not_reach_the_dry_runs_watch() {
    // The watch on placeholders is the engine's own `Proxy`, not the script's global.
    let ran = run(
        r#"globalThis.Proxy = function () { throw new Error("caught the sandbox"); };
           const first = box.write({ key: "a", value: "1" });
           done(String(first.ok));"#,
        Verdict::Approve,
    )
    .await;
    let plan = plan_of(&ran);
    assert!(plan.get("caveats").is_none(), "{plan}");
    assert_eq!(ran.written, vec![pair("a", "1")]);
}

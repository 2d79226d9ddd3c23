//! `cargo xtask bench tokens`: the same tasks in classic and code mode, with the scripted
//! model playing a fixed, sensible policy for each, counting model calls and prompt tokens.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentic_core::tokens::estimate_tokens;
use agentic_core::{
    Plugin, PrepareContext, PromptOptions, PromptOutput, PromptState, Runtime, ToolError,
    define_tool,
};
use agentic_interpreter as _;
use agentic_plugin_script::{ScriptToolCall, ScriptedProvider, Turn};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

/// Deterministic data: 50 records, 200 customers, 500 orders.
fn record(id: u64) -> Value {
    json!({ "id": id, "name": format!("Record {id}"), "amount": (id * 37) % 101,
            "notes": "Imported from the legacy ledger; verified by the finance team." })
}

fn customers() -> Value {
    let cities = ["Oslo", "Bergen", "Trondheim", "Stavanger"];
    Value::Array(
        (1..=200u64)
            .map(|id| json!({ "id": id, "name": format!("Customer {id}"), "city": cities[(id % 4) as usize],
                              "email": format!("customer{id}@example.com") }))
            .collect(),
    )
}

fn orders() -> Value {
    Value::Array(
        (1..=500u64)
            .map(|id| {
                json!({ "id": id, "customerId": (id * 7) % 200 + 1, "amount": (id * 53) % 900 + 20,
                              "status": "delivered" })
            })
            .collect(),
    )
}

struct Data;

#[derive(Deserialize, schemars::JsonSchema)]
struct ById {
    id: u64,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Nothing {}

#[async_trait]
impl Plugin for Data {
    fn id(&self) -> &str {
        "data"
    }
    async fn prepare(&self, context: &mut PrepareContext) -> anyhow::Result<()> {
        context.add_tool(
            define_tool(
                "records.get",
                "One ledger record by id",
                |_cx, input: ById| async move { Ok::<_, ToolError>(record(input.id)) },
            )
            .into_arc(),
        );
        context.add_tool(
            define_tool(
                "crm.customers",
                "Every customer",
                |_cx, _input: Nothing| async move { Ok::<_, ToolError>(customers()) },
            )
            .into_arc(),
        );
        context.add_tool(
            define_tool(
                "crm.orders",
                "Every order",
                |_cx, _input: Nothing| async move { Ok::<_, ToolError>(orders()) },
            )
            .into_arc(),
        );
        context.add_tool(
            define_tool(
                "clock.now",
                "The current time",
                |_cx, _input: Nothing| async move { Ok::<_, ToolError>("2026-11-21T22:30:00Z") },
            )
            .into_arc(),
        );
        Ok(())
    }
}

fn call(name: &str, input: Value) -> ScriptToolCall {
    ScriptToolCall {
        name: name.to_owned(),
        input: Some(input),
        ..ScriptToolCall::default()
    }
}

fn text(text: &str) -> Turn {
    Turn {
        text: Some(text.to_owned()),
        ..Turn::default()
    }
}

fn code(code: &str) -> Turn {
    Turn {
        code: Some(code.to_owned()),
        ..Turn::default()
    }
}

fn tools(calls: Vec<ScriptToolCall>) -> Turn {
    Turn {
        tool_calls: calls,
        ..Turn::default()
    }
}

struct Task {
    name: &'static str,
    input: &'static str,
    classic: Vec<Turn>,
    code: Vec<Turn>,
    expected: &'static str,
}

fn tasks() -> Vec<Task> {
    let total: u64 = (1..=50).map(|id| (id * 37) % 101).sum();
    let sum_answer: &'static str = Box::leak(format!("The total is {total}").into_boxed_str());
    vec![
        Task {
            name: "one tool call (current time)",
            input: "What time is it?",
            classic: vec![
                tools(vec![call("clock.now", json!({}))]),
                text("It is 22:30 UTC."),
            ],
            code: vec![code(
                "output(\"It is \" + clockNow({}).slice(11, 16) + \" UTC.\"); done();",
            )],
            expected: "22:30",
        },
        Task {
            name: "fetch 50 records, report the sum",
            input: "What is the total amount of records 1 to 50?",
            classic: vec![
                tools(
                    (1..=50)
                        .map(|id| call("records.get", json!({ "id": id })))
                        .collect(),
                ),
                text(sum_answer),
            ],
            code: vec![code(
                "let total = 0;\nfor (let id = 1; id <= 50; id++) total += recordsGet({ id }).amount;\noutput(\"The total is \" + total);\ndone();",
            )],
            expected: sum_answer,
        },
        Task {
            name: "filter and join two tool results",
            input: "Which customers in Oslo have spent more than 1500 in total?",
            classic: vec![
                tools(vec![
                    call("crm.customers", json!({})),
                    call("crm.orders", json!({})),
                ]),
                text("Customers in Oslo over 1500: see the list."),
            ],
            code: vec![code(
                "const oslo = crmCustomers({}).filter(c => c.city === \"Oslo\");\nconst spent = {};\nfor (const o of crmOrders({})) spent[o.customerId] = (spent[o.customerId] || 0) + o.amount;\nconst big = oslo.filter(c => (spent[c.id] || 0) > 1500).map(c => c.name);\noutput(\"Customers in Oslo over 1500: \" + big.join(\", \"));\ndone();",
            )],
            expected: "Customers in Oslo over 1500",
        },
    ]
}

struct Measured {
    model_calls: usize,
    prompt_tokens: u64,
}

async fn measure(mode: &str, input: &str, turns: Vec<Turn>, expected: &str) -> Measured {
    let provider = Arc::new(ScriptedProvider::new(turns));
    let runtime = Runtime::builder()
        .registered_plugins()
        .plugin(Arc::new(Data))
        .provider(provider.clone())
        .build()
        .await
        .unwrap();
    let prompt = runtime
        .prompts()
        .create_and_run(PromptOptions {
            user_id: "bench".to_owned(),
            input: Some(input.to_owned()),
            mode: Some(mode.to_owned()),
            ..PromptOptions::default()
        })
        .await
        .unwrap();
    assert_eq!(
        prompt.state,
        PromptState::Completed,
        "{mode}: {:?}",
        prompt.error
    );
    let answer: String = prompt
        .output
        .iter()
        .filter_map(|output| match output {
            PromptOutput::Text(text) => Some(text.content.clone()),
            _ => None,
        })
        .collect();
    assert!(answer.contains(expected), "{mode}: {answer}");
    let requests = provider.requests();
    // One estimator for both modes: everything the model is sent, messages and tool schemas.
    let prompt_tokens = requests
        .iter()
        .map(|request| {
            let sent = json!({ "messages": request.messages, "tools": request.tools });
            estimate_tokens(&sent.to_string())
        })
        .sum();
    Measured {
        model_calls: requests.len(),
        prompt_tokens,
    }
}

#[tokio::main]
async fn main() {
    println!(
        "| task | classic: model calls | classic: prompt tokens | code: model calls | code: prompt tokens | code / classic tokens |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for task in tasks() {
        let classic = measure("classic", task.input, task.classic, task.expected).await;
        let code = measure("code", task.input, task.code, task.expected).await;
        println!(
            "| {} | {} | {} | {} | {} | {:.2} |",
            task.name,
            classic.model_calls,
            classic.prompt_tokens,
            code.model_calls,
            code.prompt_tokens,
            code.prompt_tokens as f64 / classic.prompt_tokens as f64
        );
    }
}

//! `cargo xtask bench tokens` (its MCP part): one task over an MCP server with 120 tools
//! (`tests/servers/backoffice.py`, on the official Python SDK), in classic mode and in code
//! mode, with the scripted model playing a fixed, sensible policy in each, counting model calls
//! and prompt tokens.
//!
//! Classic mode sends every tool's schema with every model call. Code mode declares the
//! tools while they fit its share of the context window; 120 do not, so it declares the ten
//! that share the most words with the message and names the rest (discovery), and the model
//! writes the program at once. Both modes call the same two tools of the same server and give
//! the same answer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use agentic_plugin_mcp as _;

use std::sync::Arc;

use agentic_core::tokens::estimate_tokens;
use agentic_core::{PromptOptions, PromptOutput, PromptState, Runtime};
use agentic_plugin_script::{ScriptToolCall, ScriptedProvider, Turn};
use serde_json::{Value, json};

const SERVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/servers/backoffice.py");

const QUESTION: &str =
    "Which customers in Oslo have open deals worth more than 30,000 NOK in total? Name them.";

/// The answer, worked out from the server's data (and checked against what code mode's
/// program computes from the same calls).
const ANSWER: &str = "Oslo customers with open deals over 30,000 NOK: Customer 20, Customer 25, \
                      Customer 30, Customer 130, Customer 135, Customer 175, Customer 180, \
                      Customer 185";

fn classic_turns() -> Vec<Turn> {
    let call = |name: &str, input: Value| ScriptToolCall {
        name: name.to_owned(),
        input: Some(input),
        ..ScriptToolCall::default()
    };
    vec![
        Turn {
            tool_calls: vec![
                call("backoffice.customers_list", json!({ "city": "Oslo" })),
                call("backoffice.deals_list", json!({ "status": "open" })),
            ],
            ..Turn::default()
        },
        Turn {
            text: Some(ANSWER.to_owned()),
            ..Turn::default()
        },
    ]
}

fn code_turns() -> Vec<Turn> {
    let code = |code: &str| Turn {
        code: Some(code.to_owned()),
        ..Turn::default()
    };
    vec![code(
        "const oslo = backoffice.customers_list({ city: \"Oslo\" }).items;\n\
         const open = backoffice.deals_list({ status: \"open\" }).items;\n\
         const total = {};\n\
         for (const deal of open) total[deal.customerId] = (total[deal.customerId] || 0) + deal.amount;\n\
         const names = oslo.filter(c => (total[c.id] || 0) > 30000).map(c => c.name);\n\
         done(\"Oslo customers with open deals over 30,000 NOK: \" + names.join(\", \"));",
    )]
}

struct Measured {
    model_calls: usize,
    prompt_tokens: u64,
    first_call_tokens: u64,
}

async fn measure(mode: &str, turns: Vec<Turn>) -> Measured {
    let provider = Arc::new(ScriptedProvider::new(turns));
    let config = json!({ "mcp": { "servers": { "backoffice": {
        "command": "python3", "args": [SERVER], "startupTimeoutMs": 30000
    } } } });
    let runtime = Runtime::builder()
        .config(agentic_core::Config::from_value(config))
        .registered_plugins()
        .provider(provider.clone())
        .build()
        .await
        .unwrap();
    let prompt = runtime
        .prompts()
        .create_and_run(PromptOptions {
            user_id: "bench".to_owned(),
            input: Some(QUESTION.to_owned()),
            mode: Some(mode.to_owned()),
            ..PromptOptions::default()
        })
        .await
        .unwrap();
    assert_eq!(
        prompt.state,
        PromptState::Completed,
        "{mode}: {:?}\n{}",
        prompt.error,
        serde_json::to_string_pretty(&prompt.output).unwrap_or_default()
    );
    let answer: String = prompt
        .output
        .iter()
        .filter_map(|output| match output {
            PromptOutput::Text(text) => Some(text.content.clone()),
            _ => None,
        })
        .collect();
    assert!(answer.contains(ANSWER), "{mode} answered: {answer}");
    let requests = provider.requests();
    if std::env::var_os("BENCH_DUMP").is_some() {
        for request in &requests {
            println!(
                "----- {mode}\n{}",
                serde_json::to_string_pretty(&request.messages).unwrap()
            );
        }
    }
    // One estimator for both modes: everything the model is sent, messages and tool schemas.
    let tokens: Vec<u64> = requests
        .iter()
        .map(|request| {
            let sent = json!({ "messages": request.messages, "tools": request.tools });
            estimate_tokens(&sent.to_string())
        })
        .collect();
    Measured {
        model_calls: requests.len(),
        prompt_tokens: tokens.iter().sum(),
        first_call_tokens: tokens.first().copied().unwrap_or(0),
    }
}

fn main() {
    // Code mode's sandbox workers are this very program, started again.
    agentic_interpreter::run_worker_if_requested();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(run());
}

async fn run() {
    let python = std::process::Command::new("python3")
        .args(["-c", "import mcp.server.lowlevel"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !python {
        println!("bench tokens (MCP): needs the Python MCP SDK: pip install 'mcp==2.3.0'");
        std::process::exit(1);
    }
    let classic = measure("classic", classic_turns()).await;
    let code = measure("code", code_turns()).await;
    println!("\nOne task over an MCP server with 120 tools (tests/servers/backoffice.py):\n");
    println!(
        "| mode | model calls | prompt tokens | of which the first call | prompt tokens vs classic |"
    );
    println!("| --- | --- | --- | --- | --- |");
    for (mode, measured) in [("classic", &classic), ("code, with discovery", &code)] {
        println!(
            "| {mode} | {} | {} | {} | {:.0}% |",
            measured.model_calls,
            measured.prompt_tokens,
            measured.first_call_tokens,
            100.0 * measured.prompt_tokens as f64 / classic.prompt_tokens as f64
        );
    }
    println!(
        "\nCode mode sends {:.0}% fewer prompt tokens.",
        100.0 * (1.0 - code.prompt_tokens as f64 / classic.prompt_tokens as f64)
    );
}

//! Constrained against free decoding, side by side: the same greedy answers, each run once
//! with the request's grammar and once without, alternating so both see the same machine.

use std::sync::Arc;
use std::time::Instant;

use agentic_core::{ChatMessage, ModelKind, ModelRequest, ToolSpec};
use agentic_plugin_local::provider::{sample, sample_allowed};
use agentic_plugin_local::{Engine, Sampling};
use serde_json::json;

/// One greedy answer's measures.
struct Measured {
    /// Tokens per second, the grammar's building and checking included.
    rate: f64,
    tokens: usize,
    /// Building the request's grammar.
    grammar_ms: f64,
    /// Picking a token (sampling, and for a constrained answer the grammar's check, mask and
    /// second pick), per token: the part of a step the grammar adds to.
    pick_us: f64,
}

/// One greedy answer of at most `limit` tokens (the prompt is in the cache after the first).
fn generate(
    engine: &mut Engine,
    request: &ModelRequest,
    constrain: bool,
    limit: usize,
) -> Measured {
    let sampling = Sampling {
        temperature: 0.0,
        top_p: 1.0,
        seed: 0,
        repeat_penalty: 1.1,
        repeat_last_n: 64,
        constrain,
    };
    let rendered = engine
        .tokenizer
        .render(&request.messages, &request.tools)
        .unwrap();
    let prompt = engine.tokenizer.encode(&rendered).unwrap();
    let mut logits = engine
        .model
        .prefill(&prompt, &mut || true)
        .unwrap()
        .unwrap();
    let mut context = prompt;
    let mut rng = fastrand::Rng::with_seed(0);
    let started = Instant::now();
    let mut constraint = if constrain {
        engine.constraint_for(request)
    } else {
        None
    };
    let grammar_ms = started.elapsed().as_secs_f64() * 1000.0;
    let mut written = 0;
    let mut picking = std::time::Duration::ZERO;
    while written < limit {
        let pick = Instant::now();
        let token = match constraint.as_mut() {
            Some(grammar) => {
                sample_allowed(grammar, &mut logits, &context, &sampling, &mut rng).unwrap()
            }
            None => sample(&mut logits, &context, &sampling, &mut rng),
        };
        picking += pick.elapsed();
        if engine.tokenizer.is_stop(token) {
            break;
        }
        written += 1;
        context.push(token);
        logits = engine.model.step(token).unwrap();
    }
    Measured {
        rate: written as f64 / started.elapsed().as_secs_f64(),
        tokens: written,
        grammar_ms,
        pick_us: picking.as_secs_f64() * 1e6 / (written + 1) as f64,
    }
}

fn tool(name: &str, description: &str, parameters: serde_json::Value) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        parameters: Arc::new(parameters),
    }
}

/// Classic mode's tools for the comparison: a few of the shipped ones' shapes.
fn classic_tools() -> Vec<ToolSpec> {
    vec![
        tool(
            "time.now",
            "The current date and time in a time zone.",
            json!({"type": "object", "properties": {"timezone": {"type": "string", "description": "IANA time zone, e.g. Europe/Oslo"}}}),
        ),
        tool(
            "fs.read",
            "Reads a text file.",
            json!({"type": "object", "properties": {"path": {"type": "string"}, "maxBytes": {"type": "integer"}}, "required": ["path"]}),
        ),
        tool(
            "fs.list",
            "Lists a directory.",
            json!({"type": "object", "properties": {"path": {"type": "string"}, "sort": {"enum": ["name", "size", "modified"]}}, "required": ["path"]}),
        ),
        tool(
            "shell.exec",
            "Runs a shell command.",
            json!({"type": "object", "properties": {"command": {"type": "string"}, "timeoutSeconds": {"type": "number"}}, "required": ["command"]}),
        ),
    ]
}

/// A code-mode request under the grammar of the tools `code_mode_system` declares
/// (`benches/code-mode-tools.json`, their schemas as `agentic tool-schema` prints them).
fn code_mode(code_mode_system: &str, question: &str) -> ModelRequest {
    let tools: Vec<serde_json::Value> =
        serde_json::from_str(include_str!("../code-mode-tools.json")).unwrap();
    let grammar =
        agentic_interpreter::grammar::program_grammar_for_schemas(tools.iter().map(|tool| {
            (
                tool["id"].as_str().unwrap_or_default(),
                &tool["input"],
                tool.get("output").filter(|output| !output.is_null()),
            )
        }));
    let mut request = ModelRequest::new(
        ModelKind::Normal,
        vec![
            ChatMessage::system(code_mode_system),
            ChatMessage::user(question),
        ],
    );
    request.grammar = Some(grammar);
    request
}

/// Prints one table row per prompt: free and constrained tokens/s (medians of `runs`
/// alternating pairs), their ratio, the answer's length and the grammar's build time.
pub(crate) fn compare(engine: &mut Engine, runs: usize, code_mode_system: &str) {
    let classic = |question: &str| {
        let mut request = ModelRequest::new(ModelKind::Normal, vec![ChatMessage::user(question)]);
        request.tools = classic_tools();
        request
    };
    let prompts = [
        ("classic, a call", classic("What time is it in Tokyo?")),
        (
            "classic, prose",
            classic("Explain in two paragraphs what a time zone is."),
        ),
        ("code mode", code_mode(code_mode_system, "What time is it?")),
        (
            "code mode, files",
            code_mode(
                code_mode_system,
                "Which file under logs/ is the biggest, and how many lines has it?",
            ),
        ),
    ];
    // The vocabulary's trie and slices, built once per engine.
    let started = Instant::now();
    engine.constraint_for(&prompts[0].1);
    let setup_ms = started.elapsed().as_secs_f64() * 1000.0;
    println!("| constrained decoding, once per engine: the vocabulary's trie | {setup_ms:.0} ms |");
    for (label, request) in &prompts {
        let mut free = Vec::new();
        let mut constrained = Vec::new();
        for _ in 0..runs {
            free.push(generate(engine, request, false, 128));
            constrained.push(generate(engine, request, true, 128));
        }
        let median_of = |runs: &[Measured], value: fn(&Measured) -> f64| {
            crate::median(runs.iter().map(value).collect())
        };
        let (free_rate, constrained_rate) = (
            median_of(&free, |run| run.rate),
            median_of(&constrained, |run| run.rate),
        );
        println!(
            "| generation, {label}: free / constrained ({} / {} tokens) | {free_rate:.1} / {constrained_rate:.1} tokens/s ({:.3}×); picking a token {:.0} / {:.0} µs; grammar built in {:.1} ms |",
            free[0].tokens,
            constrained[0].tokens,
            constrained_rate / free_rate,
            median_of(&free, |run| run.pick_us),
            median_of(&constrained, |run| run.pick_us),
            median_of(&constrained, |run| run.grammar_ms),
        );
    }
}

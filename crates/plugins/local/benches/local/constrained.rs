//! Constrained against free decoding, side by side: the same greedy answers, each run once
//! with the request's grammar and once without, alternating so both see the same machine.

use std::sync::Arc;
use std::time::Instant;

use agentic_core::{ChatMessage, ModelKind, ModelRequest, ToolSpec};
use agentic_plugin_local::provider::{sample, sample_allowed};
use agentic_plugin_local::{Engine, Sampling};
use serde_json::json;

/// Tokens per second of one greedy answer (at most `limit` tokens, prompt already cached),
/// the number of tokens, and for a constrained one the milliseconds spent building the
/// request's grammar (counted in the rate too).
fn generate(
    engine: &mut Engine,
    request: &ModelRequest,
    constrain: bool,
    limit: usize,
) -> (f64, usize, f64) {
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
    let mut logits = engine.model.prefill(&prompt, &mut || true).unwrap().unwrap();
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
    while written < limit {
        let token = match constraint.as_mut() {
            Some(grammar) => {
                sample_allowed(grammar, &mut logits, &context, &sampling, &mut rng).unwrap()
            }
            None => sample(&mut logits, &context, &sampling, &mut rng),
        };
        if engine.tokenizer.is_stop(token) {
            break;
        }
        written += 1;
        context.push(token);
        logits = engine.model.step(token).unwrap();
    }
    let rate = written as f64 / started.elapsed().as_secs_f64();
    (rate, written, grammar_ms)
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

/// Prints one table row per prompt: free and constrained tokens/s (medians of `runs`
/// alternating pairs), their ratio, the answer's length and the grammar's build time.
pub fn compare(engine: &mut Engine, runs: usize, code_mode_system: &str) {
    let classic = |question: &str| {
        let mut request =
            ModelRequest::new(ModelKind::Normal, vec![ChatMessage::user(question)]);
        request.tools = classic_tools();
        request
    };
    let prompts = [
        ("classic, a call", classic("What time is it in Tokyo?")),
        (
            "classic, prose",
            classic("Explain in two paragraphs what a time zone is."),
        ),
        (
            "code mode (no grammar yet)",
            ModelRequest::new(
                ModelKind::Normal,
                vec![
                    ChatMessage::system(code_mode_system),
                    ChatMessage::user("What time is it?"),
                ],
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
        let mut grammar = Vec::new();
        let mut lengths = (0, 0);
        for _ in 0..runs {
            let (rate, length, _) = generate(engine, request, false, 128);
            free.push(rate);
            lengths.0 = length;
            let (rate, length, ms) = generate(engine, request, true, 128);
            constrained.push(rate);
            grammar.push(ms);
            lengths.1 = length;
        }
        let (free, constrained, grammar) = (
            crate::median(free),
            crate::median(constrained),
            crate::median(grammar),
        );
        println!(
            "| generation, {label}: free / constrained ({} / {} tokens) | {free:.1} / {constrained:.1} tokens/s ({:.3}×; grammar built in {grammar:.1} ms) |",
            lengths.0,
            lengths.1,
            constrained / free
        );
    }
}

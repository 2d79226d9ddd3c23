//! Constrained against free decoding, side by side: the same greedy answers, each run once
//! with the request's grammar and once without, alternating so both see the same machine.

use std::sync::Arc;
use std::time::Instant;

use agentic_core::{ChatMessage, FailedCall, ModelKind, ModelRequest, ToolSpec};
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

/// Names a code-mode program may call without declaring them, for the call guard's rows: the
/// sandbox's functions and the globals programs use most (the guard's cost is its scan of
/// the answer at each `(` and `)`, not the list's length).
const CALLABLE: &[&str] = &[
    "done",
    "output",
    "log",
    "parseInt",
    "parseFloat",
    "Number",
    "String",
    "Boolean",
    "Array",
    "Object",
    "JSON",
    "Math",
    "Date",
    "Map",
    "Set",
    "Error",
    "RegExp",
    "isNaN",
];

/// One greedy answer of at most `limit` tokens as the provider decodes it (`Engine::generate`:
/// the grammar and the call guard when `constrain`, each piece sent out as it settles), the
/// prompt already in the cache: tokens per second, tokens, and tokens decoded then taken back.
fn provider_answer(
    engine: &mut Engine,
    request: &ModelRequest,
    constrain: bool,
    limit: usize,
) -> (f64, usize, usize) {
    let sampling = Sampling {
        temperature: 0.0,
        top_p: 1.0,
        seed: 0,
        repeat_penalty: 1.1,
        repeat_last_n: 64,
        constrain,
    };
    let started = Instant::now();
    let generated = engine
        .generate(request, &sampling, limit, &mut |_| true, &|| false)
        .unwrap();
    let tokens = generated.tokens.len();
    (
        tokens as f64 / started.elapsed().as_secs_f64(),
        tokens,
        generated.taken_back_tokens,
    )
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

/// The tools `code_mode_system` declares (`benches/code-mode-tools.json`, their schemas as
/// `agentic tool-schema` prints them).
fn code_mode_tools() -> Vec<serde_json::Value> {
    serde_json::from_str(include_str!("../code-mode-tools.json")).unwrap()
}

/// Each of `tools` as its id, input schema and output schema, if it declares one.
fn schemas(
    tools: &[serde_json::Value],
) -> impl Iterator<Item = (&str, &serde_json::Value, Option<&serde_json::Value>)> {
    tools.iter().map(|tool| {
        (
            tool["id"].as_str().unwrap_or_default(),
            &tool["input"],
            tool.get("output").filter(|output| !output.is_null()),
        )
    })
}

/// A code-mode request under the grammar of `tools`, which `code_mode_system` declares.
fn code_mode(tools: &[serde_json::Value], code_mode_system: &str, question: &str) -> ModelRequest {
    let grammar = agentic_interpreter::grammar::program_grammar_for_schemas(schemas(tools));
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
    let tools = code_mode_tools();
    let prompts = [
        ("classic, a call", classic("What time is it in Tokyo?")),
        (
            "classic, prose",
            classic("Explain in two paragraphs what a time zone is."),
        ),
        (
            "code mode",
            code_mode(&tools, code_mode_system, "What time is it?"),
        ),
        (
            "code mode, files",
            code_mode(
                &tools,
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
    // The provider's own loop, with what code mode asks besides the grammar: the names a
    // program may call (undeclared calls are taken back), a failed call (not written
    // again), one the model does not write here, so both answers are the same program, and
    // what a read of each tool's result may name.
    let result_fields = agentic_interpreter::grammar::result_fields_for_schemas(schemas(&tools));
    for (label, request) in prompts
        .iter()
        .filter(|(label, _)| label.starts_with("code mode"))
    {
        let mut guarded = request.clone();
        guarded.callable = Some(CALLABLE.iter().map(|name| (*name).to_owned()).collect());
        guarded.failed_calls = vec![FailedCall {
            callee: "fs.read".to_owned(),
            input: json!({ "path": "missing.txt" }),
        }];
        guarded.result_fields = result_fields.clone();
        // Once for the prompt's cache.
        provider_answer(engine, &guarded, false, 1);
        let mut free = Vec::new();
        let mut constrained = Vec::new();
        for _ in 0..runs {
            free.push(provider_answer(engine, &guarded, false, 128));
            constrained.push(provider_answer(engine, &guarded, true, 128));
        }
        let free_rate = crate::median(free.iter().map(|run| run.0).collect());
        let constrained_rate = crate::median(constrained.iter().map(|run| run.0).collect());
        println!(
            "| generation as the provider decodes, {label}: free / grammar and call guard ({} / {} tokens, {} more decoded and taken back) | {free_rate:.1} / {constrained_rate:.1} tokens/s ({:.3}×) |",
            free[0].1,
            constrained[0].1,
            constrained[0].2,
            constrained_rate / free_rate,
        );
    }
}

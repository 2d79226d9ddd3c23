//! Constrained decoding on a real model (SmolLM2-135M, fetched first if it is missing, as in
//! `tests/local.rs`): a tiny model asked to call tools writes calls that classic mode parses,
//! each naming an offered tool with only that tool's fields.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentic_core::text_calls::text_tool_calls;
use agentic_core::{
    ChatMessage, ModelKind, ModelRequest, ToolContext, ToolError, ToolSet, ToolSpec, define_tool,
};
use agentic_plugin_local::provider::{sample, sample_allowed};
use agentic_plugin_local::pull::{Quiet, SMOLLM2, ensure};
use agentic_plugin_local::{Engine, Sampling};
use serde::{Deserialize, Serialize};

#[derive(Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct TimeInput {
    /// An IANA time zone, e.g. Asia/Tokyo.
    timezone: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct ReadInput {
    path: String,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Output {
    text: String,
}

fn tools() -> ToolSet {
    async fn nothing(_context: ToolContext) -> Result<Output, ToolError> {
        Ok(Output {
            text: String::new(),
        })
    }
    ToolSet::new(vec![
        Arc::new(define_tool(
            "time.now",
            "The current time in a time zone",
            |context, _input: TimeInput| nothing(context),
        )),
        Arc::new(define_tool(
            "fs.read",
            "Reads a file",
            |context, _input: ReadInput| nothing(context),
        )),
    ])
}

fn request(question: &str, tools: &ToolSet) -> ModelRequest {
    let system = "You can call tools. To call one, write <tool_call> then a JSON object \
                  {\"name\": <tool name>, \"arguments\": <its input>} then </tool_call>. \
                  Tools: time.now (arguments: timezone), fs.read (arguments: path).";
    let example = "<tool_call>\n{\"name\": \"time.now\", \"arguments\": {\"timezone\": \"Europe/Paris\"}}\n</tool_call>";
    let mut request = ModelRequest::new(
        ModelKind::Normal,
        vec![
            ChatMessage::system(system),
            ChatMessage::user("What time is it in Paris?"),
            ChatMessage::assistant(example),
            ChatMessage::user(question),
        ],
    );
    request.tools = tools
        .iter()
        .map(|tool| ToolSpec {
            name: tool.id().to_owned(),
            description: tool.description().to_owned(),
            parameters: tool.shared_input_schema(),
        })
        .collect();
    request
}

/// Greedy decoding without a repeat penalty, under the grammar or not.
fn greedy(constrain: bool) -> Sampling {
    Sampling {
        temperature: 0.0,
        top_p: 1.0,
        seed: 0,
        repeat_penalty: 1.0,
        repeat_last_n: 64,
        constrain,
    }
}

/// The answer to `request` when it starts with `start` (written into the answer as if the
/// model had, so a tiny model is made to call), decoded greedily with or without the grammar.
fn answer(engine: &mut Engine, request: &ModelRequest, start: &str, constrain: bool) -> String {
    let sampling = greedy(constrain);
    let rendered = engine
        .tokenizer
        .render(&request.messages, &request.tools)
        .unwrap();
    let forced = engine.tokenizer.encode(start).unwrap();
    let mut context = engine.tokenizer.encode(&rendered).unwrap();
    context.extend(&forced);
    let mut constraint = if constrain {
        Some(
            engine
                .constraint_for(request)
                .expect("a grammar for the tools"),
        )
    } else {
        None
    };
    for &token in &forced {
        let grammar = constraint.as_mut();
        if let Some(grammar) = grammar {
            assert!(grammar.allows(token).unwrap(), "{start:?} is allowed");
            grammar.accept(token).unwrap();
        }
    }
    engine.clear_cache().unwrap();
    let mut logits = engine
        .model
        .prefill(&context, &mut || true)
        .unwrap()
        .unwrap();
    let mut rng = fastrand::Rng::with_seed(0);
    let mut written = forced;
    for _ in 0..80 {
        let token = match constraint.as_mut() {
            Some(grammar) => {
                sample_allowed(grammar, &mut logits, &context, &sampling, &mut rng).unwrap()
            }
            None => sample(&mut logits, &context, &sampling, &mut rng),
        };
        if engine.tokenizer.is_stop(token) {
            break;
        }
        written.push(token);
        context.push(token);
        logits = engine.model.step(token).unwrap();
    }
    engine.tokenizer.decode(&written).unwrap()
}

/// The tools' own check of a call: an offered tool, and input it accepts.
fn valid(call: &agentic_core::ToolCallRequest, tools: &ToolSet) -> bool {
    let Some(tool) = tools.get(&call.name) else {
        return false;
    };
    let input: serde_json::Value = serde_json::from_str(&call.arguments).unwrap();
    let properties = tool.input_schema()["properties"].as_object().unwrap();
    let required = tool.input_schema()["required"].as_array().unwrap();
    input.as_object().is_some_and(|fields| {
        fields.keys().all(|key| properties.contains_key(key))
            && required
                .iter()
                .all(|key| fields.contains_key(key.as_str().unwrap()))
    })
}

#[test]
fn constrained_calls_parse_and_name_offered_tools() {
    let path = ensure(&SMOLLM2, &Quiet).expect("SmolLM2 is available");
    let mut engine = Engine::load(&path).unwrap();
    let tools = tools();
    let start = "<tool_call>\n";
    for question in [
        "What time is it in Tokyo?",
        "Read the file notes.txt.",
        "Send an email to Bob.",
    ] {
        let request = request(question, &tools);
        let constrained = answer(&mut engine, &request, start, true);
        let (calls, rest) = text_tool_calls(&constrained, &tools);
        assert_eq!(calls.len(), 1, "one call in {constrained:?}");
        assert!(valid(&calls[0], &tools), "{constrained:?}");
        assert_eq!(rest, "", "{constrained:?}");
    }
    // Unconstrained, the tiny model gives `time.now` a field it does not take: the grammar
    // is what kept the answers above valid.
    let free = answer(
        &mut engine,
        &request("Read the file notes.txt.", &tools),
        start,
        false,
    );
    let (calls, _) = text_tool_calls(&free, &tools);
    assert_eq!(calls.len(), 1, "{free:?}");
    assert!(!valid(&calls[0], &tools), "{free:?}");
}

/// Whether `request`'s grammar takes all of `text`, and, when `ended`, lets it end there.
fn accepted(engine: &mut Engine, request: &ModelRequest, text: &str, ended: bool) -> bool {
    let mut grammar = engine.constraint_for(request).expect("a program grammar");
    for token in engine.tokenizer.encode(text).unwrap() {
        if !grammar.allows(token).unwrap() {
            return false;
        }
        grammar.accept(token).unwrap();
    }
    !ended || grammar.is_finished() || grammar.may_end().unwrap()
}

/// The grammar code mode gives a program on `tools`.
fn code_mode_grammar(tools: &ToolSet) -> String {
    let schemas = schemas(tools);
    agentic_interpreter::grammar::program_grammar_for_schemas(
        schemas
            .iter()
            .map(|(id, input, output)| (id.as_str(), input.as_ref(), output.as_ref())),
    )
}

/// What code mode says a read of each tool's result on `tools` may name.
fn result_fields(tools: &ToolSet) -> Vec<agentic_core::ResultFields> {
    let schemas = schemas(tools);
    agentic_interpreter::grammar::result_fields_for_schemas(
        schemas
            .iter()
            .map(|(id, input, output)| (id.as_str(), input.as_ref(), output.as_ref())),
    )
}

fn schemas(tools: &ToolSet) -> Vec<(String, Arc<serde_json::Value>, Option<serde_json::Value>)> {
    tools
        .iter()
        .map(|tool| {
            (
                tool.id().to_owned(),
                tool.shared_input_schema(),
                tool.output_schema().cloned(),
            )
        })
        .collect()
}

/// The greedy, constrained answer to `request`, and what of it went out as it was written.
fn streamed(engine: &mut Engine, request: &ModelRequest) -> (String, String) {
    let mut streamed = String::new();
    let answer = engine
        .generate(
            request,
            &greedy(true),
            120,
            &mut |piece| {
                streamed.push_str(piece);
                true
            },
            &|| false,
        )
        .unwrap();
    (answer.text, streamed)
}

/// A code-mode request under `grammar`: `system`, then `turns`, the user's and the model's in
/// turn, the user's last.
fn program_request(grammar: String, system: &str, turns: &[&str]) -> ModelRequest {
    let mut messages = vec![ChatMessage::system(system)];
    for (index, turn) in turns.iter().enumerate() {
        messages.push(if index % 2 == 0 {
            ChatMessage::user(*turn)
        } else {
            ChatMessage::assistant(*turn)
        });
    }
    let mut request = ModelRequest::new(ModelKind::Normal, messages);
    request.grammar = Some(grammar);
    request
}

/// The greedy answer to `request` under its grammar alone, with no call guard.
fn unguarded(engine: &mut Engine, request: &ModelRequest) -> String {
    let mut request = request.clone();
    request.callable = None;
    request.failed_calls.clear();
    request.result_fields.clear();
    engine
        .generate(&request, &greedy(true), 120, &mut |_| true, &|| false)
        .unwrap()
        .text
}

/// The greedy answer to `request` as the provider streams it, with its call guard: one the
/// grammar accepts, and exactly what went out (nothing taken back was sent).
fn guarded(engine: &mut Engine, request: &ModelRequest) -> String {
    let (answer, sent) = streamed(engine, request);
    assert!(accepted(engine, request, &answer, false), "{answer:?}");
    assert_eq!(sent, answer);
    answer
}

#[test]
fn a_code_mode_answer_under_its_grammar_is_a_program_on_declared_tools() {
    let path = ensure(&SMOLLM2, &Quiet).expect("SmolLM2 is available");
    let mut engine = Engine::load(&path).unwrap();
    let grammar = code_mode_grammar(&tools());
    let sampling = greedy(true);
    for question in ["What time is it in Tokyo?", "What does notes.txt say?"] {
        let mut request = ModelRequest::new(
            ModelKind::Normal,
            vec![
                ChatMessage::system(
                    "Answer with a JavaScript program. Tools are functions: \
                     time.now({ timezone }) returns { text }; fs.read({ path }) returns { text }. \
                     End with done(answer).",
                ),
                ChatMessage::user(question),
            ],
        );
        request.grammar = Some(grammar.clone());
        let free = engine
            .generate(&request, &greedy(false), 200, &mut |_| true, &|| false)
            .unwrap();
        let constrained = engine
            .generate(&request, &sampling, 200, &mut |_| true, &|| false)
            .unwrap();
        // The tiny model's own answer is no program the grammar takes (prose, Python, a call
        // of something undeclared); under the grammar it is one, on declared tools only.
        assert!(
            !accepted(&mut engine, &request, &free.text, free.stopped),
            "{:?}",
            free.text
        );
        assert!(
            accepted(
                &mut engine,
                &request,
                &constrained.text,
                constrained.stopped
            ),
            "{:?}",
            constrained.text
        );
        for call in constrained.text.split(['(', ' ', '\n', ';']) {
            if let Some((namespace, method)) = call.rsplit_once('.')
                && ["time", "fs"].contains(&namespace.trim_start_matches('!'))
            {
                assert!(
                    ["now", "read"].contains(&method),
                    "{call} in {:?}",
                    constrained.text
                );
            }
        }
    }
}

#[test]
fn a_code_mode_answer_calls_no_name_it_has_not_declared() {
    let path = ensure(&SMOLLM2, &Quiet).expect("SmolLM2 is available");
    let mut engine = Engine::load(&path).unwrap();
    let grammar = code_mode_grammar(&tools());
    let callable: Vec<String> = ["done", "log", "output", "parseInt", "String", "JSON"]
        .map(str::to_owned)
        .to_vec();
    let known = |name: &str| callable.iter().any(|known| known == name);
    // A prompt that names helpers the sandbox does not have, as a model that imagines a
    // module writes them.
    let mut request = program_request(
        grammar,
        "Answer with a JavaScript program. Read files with loadFile(path) and format text \
         with formatText(text), then end with done(answer).",
        &[
            "What does a.txt say?",
            "const text = loadFile(\"a.txt\");\ndone(formatText(text));",
            "What does notes.txt say?",
        ],
    );
    let free = unguarded(&mut engine, &request);
    let called = agentic_jscalls::undeclared_call(&free, 0, &known);
    assert!(called.is_some(), "{free:?}");
    request.callable = Some(callable.clone());
    let guarded = guarded(&mut engine, &request);
    assert_eq!(
        agentic_jscalls::undeclared_call(&guarded, 0, &known),
        None,
        "{guarded:?}"
    );
}

#[test]
fn a_code_mode_answer_does_not_make_a_failed_call_again() {
    async fn nothing(_context: ToolContext) -> Result<Output, ToolError> {
        Ok(Output {
            text: String::new(),
        })
    }
    let tools = ToolSet::new(vec![
        Arc::new(define_tool(
            "fs.list",
            "Lists a folder",
            |context, _input: ReadInput| nothing(context),
        )),
        Arc::new(define_tool(
            "fs.read",
            "Reads a file",
            |context, _input: ReadInput| nothing(context),
        )),
    ]);
    let path = ensure(&SMOLLM2, &Quiet).expect("SmolLM2 is available");
    let mut engine = Engine::load(&path).unwrap();
    let failed = serde_json::json!({ "path": "notes.txt" });
    let again = |text: &str| {
        agentic_jscalls::literal_calls(text, "fs.list")
            .into_iter()
            .any(|call| match call.argument {
                agentic_jscalls::Argument::Literal { value, .. } => value == failed,
                _ => false,
            })
    };
    // The model's own program failed; asked again, it writes the same call.
    let mut request = program_request(
        code_mode_grammar(&tools),
        "Answer with a JavaScript program. Tools are functions: fs.list({ path }) lists a \
         folder; fs.read({ path }) returns { text }. End with done(answer).",
        &[
            "What is in notes.txt?",
            "const entries = fs.list({ path: \"notes.txt\" });\ndone(entries);",
            "Error: \"notes.txt\" is a file, not a folder (line 1). What is in notes.txt?",
        ],
    );
    let free = unguarded(&mut engine, &request);
    assert!(again(&free), "{free:?}");
    request.failed_calls = vec![agentic_core::FailedCall {
        callee: "fs.list".to_owned(),
        input: failed.clone(),
    }];
    let guarded = guarded(&mut engine, &request);
    assert!(!again(&guarded), "{guarded:?}");
}

#[test]
fn a_code_mode_answer_reads_only_fields_its_bound_result_has() {
    #[derive(Serialize, schemars::JsonSchema)]
    struct File {
        content: String,
        size: u64,
    }
    async fn empty(_context: ToolContext) -> Result<File, ToolError> {
        Ok(File {
            content: String::new(),
            size: 0,
        })
    }
    let tools = ToolSet::new(vec![Arc::new(define_tool(
        "fs.read",
        "Reads a file",
        |context, _input: ReadInput| empty(context),
    ))]);
    let path = ensure(&SMOLLM2, &Quiet).expect("SmolLM2 is available");
    let mut engine = Engine::load(&path).unwrap();
    let fields = result_fields(&tools);
    let has: Vec<String> = fields
        .iter()
        .find(|result| result.callee == "fs.read")
        .map(|result| result.fields.clone())
        .unwrap();
    assert!(has.contains(&"content".to_owned()) && !has.contains(&"text".to_owned()));
    let wrong = |text: &str| {
        agentic_jscalls::bound_reads(text, &|callee| callee == "fs.read")
            .into_iter()
            .any(|read| read.complete && !has.contains(&read.field))
    };
    // Told the result has `text` (a small model's guess), it reads `text`.
    let mut request = program_request(
        code_mode_grammar(&tools),
        "Answer with a JavaScript program. Tools are functions: fs.read({ path }) returns \
         { text }. End with done(answer).",
        &[
            "What does a.txt say?",
            "const file = fs.read({ path: \"a.txt\" });\ndone(file.text);",
            "What does notes.txt say?",
        ],
    );
    let free = unguarded(&mut engine, &request);
    assert!(wrong(&free), "{free:?}");
    // With what the result has, the field is taken back and another written (SmolLM2:
    // `file.toString()`).
    request.result_fields = fields;
    let guarded = guarded(&mut engine, &request);
    assert!(!wrong(&guarded), "{guarded:?}");
}

#[test]
fn an_llm_json_answer_under_its_grammar_is_one_json_value() {
    let path = ensure(&SMOLLM2, &Quiet).expect("SmolLM2 is available");
    let mut engine = Engine::load(&path).unwrap();
    // As a script's `llmJson("What is the capital of France?")` asks it.
    let mut request = ModelRequest::new(
        ModelKind::Normal,
        vec![
            ChatMessage::system("Answer with one JSON value only: no prose, no code fences."),
            ChatMessage::user("What is the capital of France?"),
        ],
    );
    let json = |text: &str| serde_json::from_str::<serde_json::Value>(text.trim()).is_ok();
    let free = unguarded(&mut engine, &request);
    assert!(!json(&free), "{free:?}");
    request.grammar = Some(agentic_interpreter::grammar::JSON_VALUE.to_owned());
    let constrained = unguarded(&mut engine, &request);
    assert!(json(&constrained), "{constrained:?}");
}

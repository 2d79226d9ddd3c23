//! The local model itself: tokenizer round trips, greedy decoding pinned by a snapshot, the
//! prompt cache (in memory and on disk), stop sequences, token limits and cancellation. They
//! run SmolLM2-135M (98 MB, quick), fetched first if it is missing (`.ci/run` pulls it before
//! the tests); the default model's k-quant loops are checked against candle's in the unit
//! tests.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Mutex, MutexGuard, OnceLock};

use agentic_core::{ChatMessage, ModelKind, ModelRequest};
use agentic_plugin_local::pull::Quiet;
use agentic_plugin_local::pull::{SMOLLM2, ensure};
use agentic_plugin_local::{Engine, Sampling};

/// One loaded model for every test here (they take turns: it is one piece of state).
fn engine() -> MutexGuard<'static, Engine> {
    static ENGINE: OnceLock<Mutex<Engine>> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            let path = ensure(&SMOLLM2, &Quiet).expect("SmolLM2 is available");
            Mutex::new(Engine::load(&path).expect("the default model loads"))
        })
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn greedy() -> Sampling {
    Sampling {
        temperature: 0.0,
        top_p: 1.0,
        seed: 0,
        repeat_penalty: 1.1,
        repeat_last_n: 64,
        constrain: true,
    }
}

fn ask(question: &str) -> ModelRequest {
    ModelRequest::new(ModelKind::Normal, vec![ChatMessage::user(question)])
}

fn generate(
    engine: &mut Engine,
    request: &ModelRequest,
    max: usize,
) -> agentic_plugin_local::Generated {
    let mut streamed = String::new();
    let generated = engine
        .generate(
            request,
            &greedy(),
            max,
            &mut |text| {
                streamed.push_str(text);
                true
            },
            &|| false,
        )
        .unwrap();
    assert_eq!(streamed, generated.text, "what streamed is the answer");
    generated
}

#[test]
fn tokenizer_round_trips() {
    let engine = engine();
    let samples = [
        "Hello, world!",
        "plain ASCII with punctuation: (a, b); [c] {d} <e> 'f' \"g\"",
        "Unicode: Ünïcödé, 日本語のテキスト, Ελληνικά, emoji 🎉👩‍💻",
        "fn main() {\n    println!(\"{}\", 1234567);\n}\n",
        "const total = items.reduce((sum, item) => sum + item.price * 2, 0);",
        "   leading spaces, \t tabs\t\tand\n\n\n  runs   of   whitespace   ",
        "digits 0123456789 and 3.14159e-10",
        "<|im_start|>user\nhi<|im_end|>\n",
    ];
    for sample in samples {
        let ids = engine.tokenizer.encode(sample).unwrap();
        assert!(!ids.is_empty());
        let back = engine.tokenizer.decode(&ids).unwrap();
        let expected = sample.replace("<|im_start|>", "").replace("<|im_end|>", "");
        assert_eq!(back, expected, "round trip of {sample:?} through {ids:?}");
    }
    // Special tokens are single tokens, never split into pieces.
    let ids = engine.tokenizer.encode("<|im_start|>").unwrap();
    assert_eq!(ids.len(), 1);
    // Digits are split one by one, as the model was trained.
    let ids = engine.tokenizer.encode("2026").unwrap();
    assert_eq!(ids.len(), 4);
}

#[test]
fn greedy_decoding_is_fixed() {
    let mut engine = engine();
    let request = ask("What is the capital of France? Answer in one sentence.");
    engine.clear_cache().unwrap();
    let first = generate(&mut engine, &request, 24);
    insta::assert_yaml_snapshot!(
        "greedy",
        serde_json::json!({ "tokens": first.tokens, "text": first.text })
    );
    // The same request again: the same tokens, and the whole prompt came from the cache
    // except the one token that has to run to give the first logits.
    let again = generate(&mut engine, &request, 24);
    assert_eq!(again.tokens, first.tokens);
    assert_eq!(again.processed_tokens, 1);
    assert!(first.text.contains("Paris"), "{}", first.text);
}

#[test]
fn a_cached_prefix_gives_the_same_answer_as_a_fresh_start() {
    let mut engine = engine();
    let system = ChatMessage::system("You are a terse assistant. Answer in a few words.");
    let warm = ModelRequest::new(
        ModelKind::Normal,
        vec![system.clone(), ChatMessage::user("Name a primary colour.")],
    );
    generate(&mut engine, &warm, 8);
    let next = ModelRequest::new(
        ModelKind::Normal,
        vec![system, ChatMessage::user("Name a large animal.")],
    );
    let cached = generate(&mut engine, &next, 16);
    assert!(
        cached.processed_tokens < cached.prompt_tokens,
        "the system prompt was reused"
    );
    // A different system message leaves only the first few tokens in the cache.
    generate(&mut engine, &ask("Say hi."), 2);
    let fresh = generate(&mut engine, &next, 16);
    assert!(fresh.processed_tokens > cached.processed_tokens + 10);
    assert_eq!(cached.tokens, fresh.tokens);
}

#[test]
fn stop_sequences_and_token_limits_end_the_answer() {
    let mut engine = engine();
    let request = ask("Count from 1 to 20, separated by commas.");
    engine.clear_cache().unwrap();
    let full = generate(&mut engine, &request, 40);
    // A stop sequence from the middle of the full answer (whatever the model says).
    let words: Vec<&str> = full.text.split_whitespace().collect();
    assert!(words.len() >= 4, "{}", full.text);
    let stop = words[words.len() / 2];
    let at = full.text.find(stop).unwrap();
    assert!(at > 0, "{}", full.text);
    let mut stopped = request.clone();
    stopped.stop = vec![stop.into()];
    engine.clear_cache().unwrap();
    let cut = generate(&mut engine, &stopped, 40);
    assert!(cut.stopped);
    assert!(!cut.text.contains(stop), "{stop:?} in {}", cut.text);
    assert_eq!(cut.text, full.text[..at]);
    assert!(
        full.text.starts_with(&cut.text),
        "{:?} then {:?}",
        full.text,
        cut.text
    );
    let short = generate(&mut engine, &request, 3);
    assert_eq!(short.tokens.len(), 3);
}

#[test]
fn a_listener_that_goes_away_stops_generation() {
    let mut engine = engine();
    let request = ask("Write a long story about a lighthouse keeper.");
    let mut pieces = 0;
    let generated = engine
        .generate(
            &request,
            &greedy(),
            200,
            &mut |_| {
                pieces += 1;
                pieces < 3
            },
            &|| false,
        )
        .unwrap();
    assert!(
        generated.tokens.len() < 10,
        "{} tokens",
        generated.tokens.len()
    );
    // Cancelled before any work: nothing is generated.
    let generated = engine
        .generate(&ask("Hello"), &greedy(), 50, &mut |_| true, &|| true)
        .unwrap();
    assert!(generated.tokens.is_empty());
}

#[test]
fn a_new_process_starts_from_the_prompt_cache_on_disk() {
    let path = ensure(&SMOLLM2, &Quiet).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cached = |engine: Engine| engine.with_prompt_cache(dir.path().into(), "model".into());
    let system =
        |topic: &str| {
            ChatMessage::system(format!(
            "You answer questions about {topic}. Tools are plain functions; filter and join \
             their results in code, and show the user only what they need. "
        ).repeat(12))
        };
    let request = |topic: &str, question: &str| {
        ModelRequest::new(
            ModelKind::Normal,
            vec![system(topic), ChatMessage::user(question)],
        )
    };
    let files = || std::fs::read_dir(dir.path()).unwrap().count();
    // The first engine reads the whole prompt and leaves its beginning on disk.
    let mut first = cached(Engine::load(&path).unwrap());
    let cold = generate(&mut first, &request("tools", "What is a tool?"), 16);
    assert_eq!(cold.processed_tokens, cold.prompt_tokens);
    assert!(cold.prompt_tokens > 256, "{}", cold.prompt_tokens);
    assert_eq!(files(), 1);
    // A prompt that begins differently (another mode, other tools) gets a file of its own.
    generate(&mut first, &request("files", "What is a file?"), 4);
    assert_eq!(files(), 2);
    drop(first);

    // A new engine (as in a new process) reads the prompt cache and only runs the last token,
    // with the same answer.
    let mut second = cached(Engine::load(&path).unwrap());
    let warm = generate(&mut second, &request("tools", "What is a tool?"), 16);
    assert_eq!(warm.processed_tokens, 1);
    assert_eq!(warm.tokens, cold.tokens);

    // Another question shares the system prompt: only the new turn runs, and the answer is
    // that of a fresh start.
    let mut third = cached(Engine::load(&path).unwrap());
    let shared = generate(&mut third, &request("tools", "Why write code?"), 16);
    assert!(shared.processed_tokens < 20, "{}", shared.processed_tokens);
    let mut fresh = Engine::load(&path).unwrap();
    let expected = generate(&mut fresh, &request("tools", "Why write code?"), 16);
    assert_eq!(shared.tokens, expected.tokens);

    // Broken or foreign files are no cache, and no failure.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        std::fs::write(entry.unwrap().path(), b"not a prompt cache").unwrap();
    }
    let mut fourth = cached(Engine::load(&path).unwrap());
    let broken = generate(&mut fourth, &request("tools", "Why write code?"), 16);
    assert_eq!(broken.processed_tokens, broken.prompt_tokens);
    assert_eq!(broken.tokens, expected.tokens);
}

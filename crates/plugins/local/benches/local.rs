//! `cargo xtask bench local`: the embedded model on this machine's CPU.
//!
//! - load time (reading the GGUF file and re-quantising to Q8_0);
//! - prompt processing (tokens per second) for a short and a long prompt, from an empty cache,
//!   and for the code-mode prompt of the README's main job (`benches/code-mode-prompt.txt`: the
//!   system prompt `agentic prompt "What time is it?" -m code` sent to a loopback server, with
//!   every shipped tool's declaration);
//! - generation (tokens per second) of 128 greedy tokens after a short and after a long prompt;
//! - a follow-up whose prompt shares a long prefix with the previous one (the prompt cache);
//! - peak resident memory of the process;
//! - generation with and without constrained decoding, side by side, on classic prompts (a
//!   call, prose) and the code-mode prompt (`AGENTIC_BENCH_ONLY=constrain` runs only that).
//!
//! Each timing is the median of five runs (`AGENTIC_BENCH_RUNS`); prints markdown table rows.
//! `AGENTIC_BENCH_MODEL=<file.gguf>` runs another model file than the embedded default.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

#[path = "local/constrained.rs"]
mod constrained;

use agentic_core::{ChatMessage, ModelKind, ModelRequest};
use agentic_plugin_local::provider::sample;
use agentic_plugin_local::pull::Quiet;
use agentic_plugin_local::{Engine, ensure_default};

/// Runs per timing; `AGENTIC_BENCH_RUNS` sets another number (large models take a while).
fn runs() -> usize {
    std::env::var("AGENTIC_BENCH_RUNS")
        .ok()
        .and_then(|runs| runs.parse().ok())
        .unwrap_or(5)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| {
            value
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

fn tokens_of(engine: &Engine, messages: Vec<ChatMessage>) -> Vec<u32> {
    let text = engine
        .tokenizer
        .render(
            &ModelRequest::new(ModelKind::Normal, messages).messages,
            &[],
        )
        .unwrap();
    engine.tokenizer.encode(&text).unwrap()
}

fn main() {
    // `AGENTIC_BENCH_MODEL=<file.gguf>` measures another model than the embedded default.
    let path = match std::env::var_os("AGENTIC_BENCH_MODEL") {
        Some(path) => std::path::PathBuf::from(path),
        None => ensure_default(&Quiet).unwrap(),
    };
    let runs = runs();
    let started = Instant::now();
    let mut engine = Engine::load(&path).unwrap();
    let load = started.elapsed().as_secs_f64();
    if std::env::var("AGENTIC_BENCH_ONLY").is_ok_and(|only| only == "constrain") {
        println!("model: {}", path.display());
        constrained::compare(&mut engine, runs, include_str!("code-mode-prompt.txt"));
        return;
    }
    if std::env::var("AGENTIC_BENCH_ONLY").is_ok_and(|only| only == "load") {
        println!("| load (read, lay out the blocks) | {load:.2} s |");
        return;
    }

    let short = tokens_of(
        &engine,
        vec![ChatMessage::user(
            "Write a short story about a robot who learns to paint.",
        )],
    );
    let filler = "Tools are plain functions; filter and join their results in code. ".repeat(70);
    let long = tokens_of(
        &engine,
        vec![
            ChatMessage::system(filler.clone()),
            ChatMessage::user("What time is it in Oslo?"),
        ],
    );

    let code_mode = tokens_of(
        &engine,
        vec![
            ChatMessage::system(include_str!("code-mode-prompt.txt")),
            ChatMessage::user("What time is it?"),
        ],
    );

    let mut prompt_rate = |tokens: &[u32]| {
        let rates: Vec<f64> = (0..runs)
            .map(|_| {
                engine.clear_cache().unwrap();
                let started = Instant::now();
                engine.model.prefill(tokens, &mut || true).unwrap();
                tokens.len() as f64 / started.elapsed().as_secs_f64()
            })
            .collect();
        median(rates)
    };
    // `AGENTIC_BENCH_ONLY=generation` (or `prompt`, `load`) measures only that (for profiling).
    let only_generation =
        std::env::var("AGENTIC_BENCH_ONLY").is_ok_and(|only| only == "generation");
    let (short_rate, long_rate, code_mode_rate) = if only_generation {
        (f64::NAN, f64::NAN, f64::NAN)
    } else {
        (
            prompt_rate(&short),
            prompt_rate(&long),
            prompt_rate(&code_mode),
        )
    };

    let sampling = agentic_plugin_local::Sampling {
        temperature: 0.0,
        top_p: 1.0,
        seed: 0,
        repeat_penalty: 1.1,
        repeat_last_n: 64,
        constrain: false,
    };
    let generated = 128;
    let mut generation_after = |prompt: &[u32]| {
        let rates: Vec<f64> = (0..runs)
            .map(|_| {
                engine.clear_cache().unwrap();
                let mut logits = engine.model.prefill(prompt, &mut || true).unwrap().unwrap();
                let mut context = prompt.to_vec();
                let mut rng = fastrand::Rng::with_seed(0);
                let started = Instant::now();
                for _ in 0..generated {
                    let token = sample(&mut logits, &context, &sampling, &mut rng);
                    context.push(token);
                    logits = engine.model.step(token).unwrap();
                }
                f64::from(generated) / started.elapsed().as_secs_f64()
            })
            .collect();
        median(rates)
    };
    if std::env::var("AGENTIC_BENCH_ONLY").is_ok_and(|only| only == "prompt") {
        println!(
            "| prompt processing, {} / {} / {} (code mode) tokens | {short_rate:.0} / {long_rate:.0} / {code_mode_rate:.0} tokens/s |",
            short.len(),
            long.len(),
            code_mode.len()
        );
        return;
    }
    let generation = generation_after(&short);
    let generation_long = generation_after(&long);
    if only_generation {
        println!("| generation, {generated} tokens (greedy) | {generation:.1} tokens/s |");
        println!(
            "| generation, {generated} tokens after the {}-token prompt | {generation_long:.1} tokens/s |",
            long.len()
        );
        return;
    }

    // A follow-up that shares the long system prompt: only the new turn is processed.
    let follow_up = tokens_of(
        &engine,
        vec![
            ChatMessage::system(filler),
            ChatMessage::user("And what time is it in Tokyo?"),
        ],
    );
    let cached: Vec<f64> = (0..runs)
        .map(|_| {
            engine.clear_cache().unwrap();
            engine.model.prefill(&long, &mut || true).unwrap();
            let started = Instant::now();
            engine.model.prefill(&follow_up, &mut || true).unwrap();
            started.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    let cached = median(cached);
    let uncached: Vec<f64> = (0..runs)
        .map(|_| {
            engine.clear_cache().unwrap();
            let started = Instant::now();
            engine.model.prefill(&follow_up, &mut || true).unwrap();
            started.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    let uncached = median(uncached);

    let threads = std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "all cores".into());
    println!("model: {} ({threads})", path.display());
    println!("| measurement | result |");
    println!("| --- | --- |");
    println!("| load (read, lay out the blocks) | {load:.2} s |");
    println!(
        "| prompt processing, {} tokens | {short_rate:.0} tokens/s |",
        short.len()
    );
    println!(
        "| prompt processing, {} tokens | {long_rate:.0} tokens/s |",
        long.len()
    );
    println!(
        "| prompt processing, the {}-token code-mode prompt | {code_mode_rate:.0} tokens/s |",
        code_mode.len()
    );
    println!("| generation, {generated} tokens (greedy) | {generation:.1} tokens/s |");
    println!(
        "| generation, {generated} tokens after the {}-token prompt | {generation_long:.1} tokens/s |",
        long.len()
    );
    println!(
        "| follow-up sharing a {}-token prefix: cached / from scratch | {cached:.0} ms / {uncached:.0} ms |",
        long.len() - 12
    );
    constrained::compare(&mut engine, runs, include_str!("code-mode-prompt.txt"));
    println!("| peak resident memory | {:.0} MiB |", peak_rss_mib());
}

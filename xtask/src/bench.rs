//! `cargo xtask bench …`: each benchmark run beside its anchor, in one process, so the two
//! figures are measured side by side.

use super::*;

/// The playground's browser test with its timing targets checked: the release binary, the
/// assets' weight, each redraw while 1,000 outputs arrive, and five loads of 100 prompts.
pub(crate) fn bench_playground(root: &Path) -> anyhow::Result<()> {
    web(root, true)?;
    run(
        root,
        "cargo",
        &[
            "test",
            "--release",
            "--package",
            "agentic-cli",
            "--test",
            "playground",
            "--",
            "--nocapture",
        ],
        &[
            ("AGENTIC_PLAYGROUND_TARGETS", "1"),
            ("AGENTIC_REQUIRE_BROWSER", "1"),
        ],
    )
}

/// Kills a server again and again in mixed modes, on PostgreSQL (the test server of
/// `.ci/postgres.sh` unless `AGENTIC_TEST_POSTGRES_URL` names one): the time to take its
/// prompts over by lease, and that nothing was lost or ran twice (`kills_in_mixed_modes`).
pub(crate) fn bench_takeover(root: &Path) -> anyhow::Result<()> {
    let url = postgres_url(root)?;
    run(
        root,
        "cargo",
        &[
            "test",
            "--release",
            "--package",
            "agentic-cli",
            "--test",
            "replicas",
            "kills_in_mixed_modes",
            "--",
            "--ignored",
            "--nocapture",
        ],
        &[("AGENTIC_TEST_POSTGRES_URL", &url)],
    )
}

/// `AGENTIC_TEST_POSTGRES_URL`, or the test server `.ci/postgres.sh` starts.
fn postgres_url(root: &Path) -> anyhow::Result<String> {
    if let Ok(url) = std::env::var("AGENTIC_TEST_POSTGRES_URL") {
        return Ok(url);
    }
    let output = Command::new("bash")
        .current_dir(root)
        .arg(".ci/postgres.sh")
        .output()
        .context("could not run .ci/postgres.sh")?;
    if !output.status.success() {
        bail!(
            ".ci/postgres.sh failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8(output.stdout)?.trim().to_owned())
}

/// Runs our sandbox benchmark and the seed's QuickJS anchor in the same run, and prints a
/// table with both and their ratio.
pub(crate) fn bench_sandbox(root: &Path) -> anyhow::Result<()> {
    let ours = cargo_bench_json(root, "sandbox")?;
    let anchor = root.join("../shared/anchors/quickjs-seed");
    // The seed's anchor lives beside the repository, not in it: a fresh clone has ours only.
    let seed = if anchor.join("bench.mjs").exists() {
        quickjs_anchor(&anchor)?
    } else {
        println!(
            "the seed's anchor is not at {}: its column is left empty (n/a)",
            anchor.display()
        );
        serde_json::Value::Null
    };
    let number = |value: &serde_json::Value, path: &[&str]| -> Option<f64> {
        path.iter()
            .try_fold(value, |value, key| value.get(key))
            .and_then(serde_json::Value::as_f64)
    };
    let seed_iteration_ms =
        number(&seed, &["iter_A_newAsyncContext_freshModule", "medianUs"]).map(|us| us / 1000.0);
    let rows: [(&str, &str, Option<f64>); 5] = [
        (
            "per-iteration overhead, 51 tools bound, `1+1` (ms)",
            "iterationMedianMs",
            seed_iteration_ms,
        ),
        (
            "10,000 tool calls from one script (ms)",
            "toolCalls10kMedianMs",
            number(&seed, &["asyncified_10k_calls", "medianMs"]),
        ),
        (
            "10,000 calls of a built-in returning an object, no host (ms)",
            "localCalls10kMedianMs",
            None,
        ),
        (
            "recursive fib(25) (ms)",
            "fib25MedianMs",
            number(&seed, &["fib25", "medianMs"]),
        ),
        (
            "100,000-object push/filter/map/reduce (ms)",
            "array100kMedianMs",
            number(&seed, &["array_100k_filter_map_reduce", "medianMs"]),
        ),
    ];
    println!(
        "| measure (median) | in-process | isolated (warm pool) | seed (QuickJS/WASM) | isolated / seed |"
    );
    println!("| --- | --- | --- | --- | --- |");
    for (label, key, seed_value) in rows {
        let in_process = number(&ours, &["inProcess", key]);
        let isolated = number(&ours, &["isolated", key]);
        let show =
            |value: Option<f64>| value.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.3}"));
        let ratio = match (isolated, seed_value) {
            (Some(ours), Some(seed)) if seed > 0.0 => format!("{:.2}", ours / seed),
            _ => "n/a".to_owned(),
        };
        println!(
            "| {label} | {} | {} | {} | {ratio} |",
            show(in_process),
            show(isolated),
            show(seed_value)
        );
    }
    if let Some(prompt) = number(&ours, &["codeMode", "codeModePrompt10kToolCallsMedianMs"]) {
        println!(
            "\na whole code-mode prompt making 10,000 recorded tool calls (isolated): {prompt:.1} ms"
        );
    }
    if !seed.is_null() {
        println!(
            "\nseed run: node {}, peak RSS {} MiB",
            seed["node"], seed["peakRssMiB"]
        );
    }
    Ok(())
}

/// `cargo bench --package <package> --bench <bench>`: benches that print their own tables.
pub(crate) fn cargo_bench(root: &Path, package: &str, bench: &str) -> anyhow::Result<()> {
    run(
        root,
        "cargo",
        &["bench", "--package", package, "--bench", bench],
        &[],
    )
}

/// `cargo xtask bench api [--baseline REV | --replicas]`: with a baseline, REV (a commit, tag or branch) is
/// checked out in a worktree, built in the same target directory (so only its own crates
/// compile) and run beside this build, round by round.
pub(crate) fn bench_api(root: &Path, arguments: &[String]) -> anyhow::Result<()> {
    let mut env: Vec<(&str, String)> = Vec::new();
    let baseline = match arguments {
        [] => None,
        [flag, rev] if flag == "--baseline" => Some(rev.as_str()),
        [flag] if flag == "--replicas" => {
            env.push(("AGENTIC_BENCH_REPLICAS_POSTGRES", postgres_url(root)?));
            None
        }
        _ => bail!("usage: cargo xtask bench api [--baseline REV | --replicas]"),
    };
    let target = root.join("target");
    if let Some(rev) = baseline {
        let worktree = target.join("bench-baseline");
        let _ = Command::new("git")
            .current_dir(root)
            .args(["worktree", "remove", "--force"])
            .arg(&worktree)
            .status();
        run(
            root,
            "git",
            &[
                "worktree",
                "add",
                "--detach",
                worktree.to_str().context("non-UTF-8 path")?,
                rev,
            ],
            &[],
        )?;
        run(
            &worktree,
            "cargo",
            &["build", "--release", "--package", "agentic-cli"],
            &[(
                "CARGO_TARGET_DIR",
                target.to_str().context("non-UTF-8 path")?,
            )],
        )?;
        let kept = target.join(format!("bench-baseline-agentic-{rev}"));
        std::fs::copy(target.join("release/agentic"), &kept)
            .context("could not keep the baseline binary")?;
        run(
            root,
            "git",
            &[
                "worktree",
                "remove",
                "--force",
                worktree.to_str().context("non-UTF-8 path")?,
            ],
            &[],
        )?;
        env.push((
            "AGENTIC_BASELINE_BIN",
            kept.to_str().context("non-UTF-8 path")?.to_owned(),
        ));
    }
    run(
        root,
        "cargo",
        &["build", "--release", "--package", "agentic-cli"],
        &[],
    )?;
    let binary = target.join("release/agentic");
    env.push((
        "AGENTIC_BIN",
        binary.to_str().context("non-UTF-8 path")?.to_owned(),
    ));
    let env: Vec<(&str, &str)> = env
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect();
    run(
        root,
        "cargo",
        &["bench", "--package", "agentic-api", "--bench", "load"],
        &env,
    )
}

pub(crate) fn cargo_bench_json(root: &Path, bench: &str) -> anyhow::Result<serde_json::Value> {
    println!("$ cargo bench --package agentic-interpreter --bench {bench}");
    let output = Command::new("cargo")
        .current_dir(root)
        .args([
            "bench",
            "--package",
            "agentic-interpreter",
            "--bench",
            bench,
        ])
        .output()
        .context("could not run cargo bench")?;
    if !output.status.success() {
        bail!(
            "cargo bench failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let start = stdout.find('{').context("the benchmark printed no JSON")?;
    serde_json::from_str(&stdout[start..]).context("the benchmark printed bad JSON")
}

/// The seed's sandbox measured by the anchor at `anchor`, in a scratch copy.
pub(crate) fn quickjs_anchor(anchor: &Path) -> anyhow::Result<serde_json::Value> {
    let scratch = std::env::temp_dir().join(format!("agentic-quickjs-seed-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    for name in ["package.json", "package-lock.json", "bench.mjs"] {
        std::fs::copy(anchor.join(name), scratch.join(name))
            .with_context(|| format!("could not copy {name} from {}", anchor.display()))?;
    }
    run(&scratch, "npm", &["ci", "--no-audit", "--no-fund"], &[])?;
    println!("$ node --stack-size=4000 bench.mjs");
    let output = Command::new("node")
        .current_dir(&scratch)
        .args(["--stack-size=4000", "bench.mjs"])
        .output()
        .context("could not run node")?;
    if !output.status.success() {
        bail!(
            "the seed benchmark failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&scratch);
    serde_json::from_slice(&output.stdout).context("the seed benchmark printed bad JSON")
}

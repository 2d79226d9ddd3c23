//! Project tasks: `cargo xtask ci` runs everything CI checks; `cargo xtask deps` checks the
//! dependency invariants from `docs/architecture.md`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

/// Crates `agentic-core` must never depend on (normal dependencies).
const FORBIDDEN_IN_CORE: &[&str] = &["reqwest", "axum", "hyper", "sea-orm", "sqlx", "boa_engine"];

fn main() -> anyhow::Result<()> {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    match arguments.first().map(String::as_str) {
        Some("ci") => ci(&root),
        Some("deps") => check_core_dependencies(&root),
        _ => {
            eprintln!(
                "usage: cargo xtask <task>\n\n\
                 tasks:\n  \
                 ci     format check, clippy -D warnings, dependency invariants, every test\n  \
                 deps   check that agentic-core depends on no HTTP, database or JS engine crate"
            );
            std::process::exit(2);
        }
    }
}

fn ci(root: &Path) -> anyhow::Result<()> {
    run(root, "cargo", &["fmt", "--all", "--check"], &[])?;
    run(
        root,
        "cargo",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    check_core_dependencies(root)?;
    // A missing or changed snapshot fails instead of being written.
    run(
        root,
        "cargo",
        &["test", "--workspace", "--locked"],
        &[("INSTA_UPDATE", "no"), ("CI", "true")],
    )?;
    println!("xtask ci: all checks passed");
    Ok(())
}

/// The invariant of `docs/architecture.md`: the contract crate stays free of HTTP clients and
/// servers, databases and the JS engine.
fn check_core_dependencies(root: &Path) -> anyhow::Result<()> {
    let output = Command::new("cargo")
        .current_dir(root)
        .args([
            "tree",
            "-p",
            "agentic-core",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .output()
        .context("could not run cargo tree")?;
    if !output.status.success() {
        bail!(
            "cargo tree failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let tree = String::from_utf8_lossy(&output.stdout);
    let found: Vec<&str> = FORBIDDEN_IN_CORE
        .iter()
        .copied()
        .filter(|name| {
            tree.lines()
                .any(|line| line.split_whitespace().next() == Some(*name))
        })
        .collect();
    if !found.is_empty() {
        bail!("agentic-core must not depend on {}", found.join(", "));
    }
    println!(
        "xtask deps: agentic-core depends on none of {}",
        FORBIDDEN_IN_CORE.join(", ")
    );
    Ok(())
}

fn run(root: &Path, program: &str, arguments: &[&str], env: &[(&str, &str)]) -> anyhow::Result<()> {
    println!("$ {program} {}", arguments.join(" "));
    let status = Command::new(program)
        .current_dir(root)
        .args(arguments)
        .envs(env.iter().copied())
        .status()
        .with_context(|| format!("could not start {program}"))?;
    if !status.success() {
        bail!("{program} {} failed ({status})", arguments.join(" "));
    }
    Ok(())
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

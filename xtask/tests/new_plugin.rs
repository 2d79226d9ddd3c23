//! `cargo xtask new-plugin` in a scratch copy of the workspace: the crate appears, is wired
//! into the workspace and the binary, and compiles with its tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Copies the files git knows (tracked, and new ones not ignored) into `to`.
fn copy_workspace(from: &Path, to: &Path) {
    let listing = Command::new("git")
        .current_dir(from)
        .args([
            "ls-files",
            "--cached",
            "--others",
            "--exclude-standard",
            "-z",
        ])
        .output()
        .unwrap();
    assert!(listing.status.success());
    for file in listing
        .stdout
        .split(|byte| *byte == 0)
        .filter(|name| !name.is_empty())
    {
        let relative = Path::new(std::str::from_utf8(file).unwrap());
        let source = from.join(relative);
        if !source.is_file() {
            continue; // deleted but not yet staged
        }
        let target = to.join(relative);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(&source, &target).unwrap();
    }
}

#[test]
fn new_plugin_creates_a_wired_crate_that_compiles() {
    let root = workspace();
    let scratch = tempfile::tempdir().unwrap();
    copy_workspace(&root, scratch.path());

    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["new-plugin", "demo"])
        .env("AGENTIC_WORKSPACE", scratch.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let read = |path: &str| std::fs::read_to_string(scratch.path().join(path)).unwrap();
    assert!(read("Cargo.toml").contains("\"crates/plugins/demo\""));
    assert!(read("Cargo.toml").contains(
        "agentic-plugin-demo = { version = \"=0.1.0\", path = \"crates/plugins/demo\" }"
    ));
    assert!(read("crates/cli/Cargo.toml").contains("agentic-plugin-demo.workspace = true"));
    assert!(read("crates/cli/src/main.rs").contains("use agentic_plugin_demo as _;"));
    assert!(read("crates/plugins/demo/src/lib.rs").contains("\"demo.hello\""));

    // A second time is refused: nothing is overwritten.
    let again = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["new-plugin", "demo"])
        .env("AGENTIC_WORKSPACE", scratch.path())
        .output()
        .unwrap();
    assert!(!again.status.success());
    let bad = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["new-plugin", "Bad-Name"])
        .env("AGENTIC_WORKSPACE", scratch.path())
        .output()
        .unwrap();
    assert!(!bad.status.success());

    // It compiles, tests included, and stays formatted. Its own target directory (the running
    // `cargo test` holds the main one), kept under target/ so later runs reuse it; offline,
    // from the registry cache the main build filled.
    let target = root.join("target").join("new-plugin-check");
    let check = Command::new("cargo")
        .current_dir(scratch.path())
        .args(["check", "--offline", "-p", "agentic-plugin-demo", "--tests"])
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let fmt = Command::new("cargo")
        .current_dir(scratch.path())
        .args(["fmt", "--all", "--check"])
        .output()
        .unwrap();
    assert!(
        fmt.status.success(),
        "{}",
        String::from_utf8_lossy(&fmt.stdout)
    );
}

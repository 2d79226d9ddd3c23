//! Runs every example of this crate, as `cargo test` built it, against the scripted model,
//! and checks what it printed (cases in `tests/examples.yaml`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    example: String,
    #[serde(default)]
    args: Vec<String>,
    /// Whether the example asks a model (then `examples/turns/<example>.yaml` plays it).
    #[serde(default = "yes")]
    script: bool,
    /// An example that is a test (`test = true` in Cargo.toml): `cargo test` runs it as one,
    /// and builds no program of it to run here.
    #[serde(default)]
    test: bool,
    #[serde(default)]
    expect: Vec<String>,
}

fn yes() -> bool {
    true
}

/// Where cargo put the examples: beside the directory of this test's binary.
fn examples_dir() -> PathBuf {
    let test = std::env::current_exe().unwrap();
    test.parent().unwrap().parent().unwrap().join("examples")
}

#[test]
fn every_example_runs_and_says_what_it_should() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cases: Vec<Case> = serde_yaml_ng::from_str(
        &std::fs::read_to_string(crate_dir.join("tests/examples.yaml")).unwrap(),
    )
    .unwrap();
    let listed: Vec<&str> = cases.iter().map(|case| case.example.as_str()).collect();
    for entry in std::fs::read_dir(crate_dir.join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|extension| extension == "rs") {
            let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
            assert!(
                listed.contains(&name.as_str()),
                "example {name} has no case in tests/examples.yaml"
            );
        }
    }
    for case in cases.into_iter().filter(|case| !case.test) {
        let binary = examples_dir().join(&case.example);
        assert!(
            binary.exists(),
            "{} is not built; `cargo test -p agentic` builds the examples before its tests",
            binary.display()
        );
        let dir = tempfile::tempdir().unwrap();
        let mut command = Command::new(&binary);
        command
            .current_dir(dir.path())
            .args(
                case.args
                    .iter()
                    .map(|arg| arg.replace("{dir}", dir.path().to_str().unwrap())),
            )
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .env("AGENTIC_LOG", "warn");
        if case.script {
            let turns = crate_dir.join(format!("examples/turns/{}.yaml", case.example));
            command.env("AGENTIC_PROVIDER", format!("script:{}", turns.display()));
        } else {
            command.env_remove("AGENTIC_PROVIDER");
        }
        let output = command.output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "example {} failed ({}):\n{stdout}\n{stderr}",
            case.example,
            output.status
        );
        for expected in &case.expect {
            assert!(
                stdout.contains(expected.as_str()),
                "example {} did not print {expected:?}:\n{stdout}\n{stderr}",
                case.example
            );
        }
    }
}

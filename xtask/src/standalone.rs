//! `cargo xtask new-plugin --standalone <dir>`: a tool plugin as a crate of its own, outside
//! this workspace, depending on `agentic` alone, with its unit tests, its timeline tests and
//! an example program that gives its tools to an agent. The files are
//! `xtask/templates/plugin/`, with `{{name}}`, `{{Title}}`, `{{camel}}` and the `agentic`
//! dependency filled in.
//!
//! `cargo xtask ci` (and `cargo xtask standalone-check` alone) makes one in a temporary
//! directory and runs its tests and its example program ([`check`]), so the template cannot
//! drift from the crate it depends on.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail, ensure};

/// The template: its path under `xtask/templates/plugin/` and its text.
const TEMPLATE: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        include_str!("../templates/plugin/Cargo.toml.in"),
    ),
    ("README.md", include_str!("../templates/plugin/README.md")),
    (".gitignore", include_str!("../templates/plugin/gitignore")),
    ("src/lib.rs", include_str!("../templates/plugin/src/lib.rs")),
    (
        "examples/agent.rs",
        include_str!("../templates/plugin/examples/agent.rs"),
    ),
    (
        "turns/hello.yaml",
        include_str!("../templates/plugin/turns/hello.yaml"),
    ),
    (
        "tests/timelines.rs",
        include_str!("../templates/plugin/tests/timelines.rs"),
    ),
    (
        "tests/timelines/hello.yaml",
        include_str!("../templates/plugin/tests/timelines/hello.yaml"),
    ),
    (
        "tests/timelines/empty_name.yaml",
        include_str!("../templates/plugin/tests/timelines/empty_name.yaml"),
    ),
    (
        "tests/snapshots/timelines__timelines@hello.yaml.snap",
        include_str!("../templates/plugin/tests/snapshots/timelines__timelines@hello.yaml.snap"),
    ),
    (
        "tests/snapshots/timelines__timelines@empty_name.yaml.snap",
        include_str!(
            "../templates/plugin/tests/snapshots/timelines__timelines@empty_name.yaml.snap"
        ),
    ),
];

/// Parses `--standalone <dir> [--name <name>] [--agentic <path to crates/agentic>]`.
pub(crate) fn command(root: &Path, arguments: &[String]) -> anyhow::Result<()> {
    let mut directory = None;
    let mut name = None;
    let mut agentic = root.join("crates/agentic");
    let mut rest = arguments.iter();
    while let Some(argument) = rest.next() {
        match argument.as_str() {
            "--name" => name = Some(rest.next().context("--name takes a plugin name")?.clone()),
            "--agentic" => {
                agentic = PathBuf::from(rest.next().context("--agentic takes a path")?);
            }
            other if other.starts_with("--") => bail!("unknown option {other}"),
            other if directory.is_none() => directory = Some(PathBuf::from(other)),
            other => bail!("one directory only, not also {other}"),
        }
    }
    let directory = directory.context(
        "usage: cargo xtask new-plugin --standalone <dir> [--name <name>] [--agentic <path>]",
    )?;
    let name = match name {
        Some(name) => name,
        None => directory
            .file_name()
            .and_then(|name| name.to_str())
            .map(|name| name.trim_start_matches("agentic-plugin-").to_owned())
            .context("name the plugin with --name")?,
    };
    create(&directory, &name, &agentic)?;
    println!(
        "created {dir}: the `{name}` plugin (agentic-plugin-{name}) with the tool `{name}.hello`.\n\
         cd {dir} && cargo test     its unit and timeline tests\n\
         cargo run --example agent -- \"Say hello to Ada\"   an agent with its tools (the embedded model)\n\
         Its README says what each file is for.",
        dir = directory.display()
    );
    Ok(())
}

/// Writes the template into `directory` (which must not exist or be empty) for the plugin
/// `name`, depending on the `agentic` crate at `agentic` by path.
pub(crate) fn create(directory: &Path, name: &str, agentic: &Path) -> anyhow::Result<()> {
    crate::new_plugin::check_name(name)?;
    if directory.exists() && std::fs::read_dir(directory)?.next().is_some() {
        bail!("{} exists and is not empty", directory.display());
    }
    ensure!(
        agentic.join("Cargo.toml").exists(),
        "no agentic crate at {} (--agentic names the folder holding its Cargo.toml)",
        agentic.display()
    );
    let agentic = std::path::absolute(agentic)?;
    let path = toml_edit::Value::from(agentic.display().to_string()).to_string();
    let title = crate::new_plugin::title(name);
    for (file, text) in TEMPLATE {
        let text = text
            .replace("{{agentic}}", &format!("{{ path = {} }}", path.trim()))
            .replace(
                "{{agentic_testing}}",
                &format!("{{ path = {}, features = [\"testing\"] }}", path.trim()),
            )
            .replace("{{name}}", name)
            .replace("{{Title}}", &title)
            .replace("{{camel}}", &format!("{name}Hello"));
        let target = directory.join(file);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, text)
            .with_context(|| format!("could not write {}", target.display()))?;
    }
    Ok(())
}

/// What `cargo xtask ci` runs: a standalone plugin made in a temporary directory, built
/// against this checkout, its tests run with snapshots that must match, its example program run with
/// scripted turns. It shares this workspace's lockfile (so no dependency is resolved anew) and
/// target folder (so what the workspace built is not built again).
pub(crate) fn check(root: &Path) -> anyhow::Result<()> {
    let scratch = tempfile::tempdir()?;
    let directory = scratch.path().join("weather");
    create(&directory, "weather", &root.join("crates/agentic"))?;
    std::fs::copy(root.join("Cargo.lock"), directory.join("Cargo.lock"))?;
    let target = root.join("target");
    let target = target
        .to_str()
        .context("the target folder's path is not UTF-8")?;
    let environment = [
        ("CARGO_TARGET_DIR", target),
        ("INSTA_UPDATE", "no"),
        ("CI", "true"),
    ];
    crate::run(&directory, "cargo", &["test"], &environment)?;
    let turns = directory.join("turns/hello.yaml");
    let provider = format!("script:{}", turns.display());
    let output = std::process::Command::new("cargo")
        .current_dir(&directory)
        .args(["run", "--quiet", "--example", "agent"])
        .envs(environment)
        .env("AGENTIC_PROVIDER", &provider)
        .env("AGENTIC_LOG", "warn")
        .output()
        .context("could not run cargo")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    ensure!(
        output.status.success() && stdout.trim() == "Hello, Ada!",
        "the standalone plugin's example said {stdout:?}:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    println!("xtask ci: a standalone plugin crate built, passed its tests and ran its agent");
    Ok(())
}

//! `cargo xtask ci` on a fresh machine: `.ci/setup` installs and starts what the tests need
//! (PostgreSQL, Chromium, the playground's and the MCP tests' npm packages, the models, the
//! Python MCP SDK, BFCL) and prints the environment they read; the checks then run in a child
//! `cargo xtask ci --no-setup` with that environment.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context as _, bail, ensure};

/// Runs `.ci/setup`, then every check with the environment it printed.
pub(crate) fn then_ci(root: &Path) -> anyhow::Result<()> {
    println!("xtask ci: setting up what the tests need (.ci/setup; --no-setup skips it)");
    // Taken now: `.ci/setup` builds the workspace's tests, this binary among them, and once
    // the file is replaced, the running process's own path names a deleted file.
    let checks = std::env::current_exe().context("could not find the xtask binary")?;
    let started = std::time::Instant::now();
    let output = Command::new("bash")
        .current_dir(root)
        .arg(".ci/setup")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context("could not run bash .ci/setup")?;
    ensure!(
        output.status.success(),
        ".ci/setup failed ({})",
        output.status
    );
    println!("xtask ci: set up in {} s", started.elapsed().as_secs());
    let printed = String::from_utf8(output.stdout).context(".ci/setup printed non-UTF-8")?;
    let mut environment = Vec::new();
    for line in printed.lines().filter(|line| !line.trim().is_empty()) {
        let Some((key, value)) = line.split_once('=') else {
            bail!(".ci/setup printed {line:?}, not KEY=VALUE");
        };
        environment.push((key.to_owned(), value.to_owned()));
    }
    let status = Command::new(&checks)
        .current_dir(root)
        .args(["ci", "--no-setup"])
        .envs(environment)
        .status()
        .context("could not run the checks")?;
    ensure!(status.success(), "xtask ci failed");
    Ok(())
}

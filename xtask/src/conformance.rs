//! `cargo xtask conformance`: the MCP conformance suite (`@modelcontextprotocol/conformance`)
//! against agentic's MCP server (`agentic mcp serve --http`) and its MCP client (the
//! `agentic` binary driven by `tests/conformance/client.sh`), at the scenarios protocol
//! revision 2026-07-28 requires. `known-failures.yml` names the scenarios that fail, each with
//! its reason; any other failure, or a listed scenario that passes, fails the run.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

/// The protocol revision whose required scenarios run.
const REVISION: &str = "2026-07-28";

/// Kills the server when the run ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn conformance(root: &Path, binary: &Path) -> anyhow::Result<()> {
    let suite = root.join("crates/plugins/mcp/tests/conformance");
    let bin = suite.join("node_modules/.bin");
    if !bin.join("conformance").exists() {
        bail!(
            "the MCP conformance suite is not installed: npm ci --prefix {} (it brings Node 22, \
             which the suite needs, from npm)",
            suite.display()
        );
    }
    let binary = std::fs::canonicalize(binary)
        .with_context(|| format!("no agentic binary at {}", binary.display()))?;
    let scratch = root.join("target/conformance");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(scratch.join("files"))?;
    std::fs::write(
        scratch.join("agentic.toml"),
        format!(
            "database = \"sqlite://{}\"\n[fs]\nroot = \"{}\"\n",
            scratch.join("agentic.db").display(),
            scratch.join("files").display()
        ),
    )?;
    // The suite calls no model; a scripted one keeps the server from loading the local model.
    std::fs::write(
        scratch.join("turns.yaml"),
        "- text: The conformance suite asks no questions.\n",
    )?;
    // Node 22 from the suite's own node_modules comes first.
    let path = match std::env::var_os("PATH") {
        Some(path) => {
            let mut paths = vec![bin.clone()];
            paths.extend(std::env::split_paths(&path));
            std::env::join_paths(paths)?
        }
        None => bin.clone().into_os_string(),
    };
    let expected = suite.join("known-failures.yml");

    let (server, url) = start_server(&binary, &scratch)?;
    println!("xtask conformance: agentic's MCP server at {url}");
    let server_run = suite_run(
        &suite,
        &path,
        &[
            "server",
            "--url",
            &url,
            "--requirements",
            REVISION,
            "--expected-failures",
            path_str(&expected)?,
            "--output-dir",
            path_str(&scratch.join("server"))?,
        ],
        &[],
    );
    drop(server);

    let client_run = suite_run(
        &suite,
        &path,
        &[
            "client",
            "--command",
            path_str(&suite.join("client.sh"))?,
            "--requirements",
            REVISION,
            "--expected-failures",
            path_str(&expected)?,
            "--output-dir",
            path_str(&scratch.join("client"))?,
        ],
        &[("AGENTIC_BIN", path_str(&binary)?)],
    );
    match (server_run, client_run) {
        (Ok(()), Ok(())) => {
            println!(
                "xtask conformance: server and client as expected (known failures in {})",
                expected.display()
            );
            Ok(())
        }
        (server, client) => bail!(
            "the MCP conformance suite failed: server {}, client {} (results under {})",
            outcome(&server),
            outcome(&client),
            scratch.display()
        ),
    }
}

fn outcome(result: &anyhow::Result<()>) -> String {
    match result {
        Ok(()) => "as expected".to_owned(),
        Err(error) => format!("{error:#}"),
    }
}

fn path_str(path: &Path) -> anyhow::Result<&str> {
    path.to_str()
        .with_context(|| format!("{} is not UTF-8", path.display()))
}

/// `agentic mcp serve --http` on a free loopback port; the URL it prints.
fn start_server(binary: &Path, scratch: &Path) -> anyhow::Result<(Server, String)> {
    let mut child = Command::new(binary)
        .args([
            "mcp",
            "serve",
            "--user",
            "conformance",
            "--http",
            "127.0.0.1:0",
        ])
        .current_dir(scratch)
        .env("AGENTIC_CONFIG", scratch.join("agentic.toml"))
        .env(
            "AGENTIC_PROVIDER",
            format!("script:{}", scratch.join("turns.yaml").display()),
        )
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("could not start agentic mcp serve --http")?;
    let stderr = child.stderr.take().context("no stderr")?;
    let server = Server(child);
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("  server: {line}");
            if let Some(url) = line
                .split_whitespace()
                .find(|word| word.starts_with("http://") && word.ends_with("/mcp"))
            {
                let _ = sender.send(url.to_owned());
            }
        }
    });
    let limit = Duration::from_secs(60);
    let start = Instant::now();
    match receiver.recv_timeout(limit) {
        Ok(url) => Ok((server, url)),
        Err(_) => bail!(
            "agentic mcp serve --http did not say where it listens within {:?}",
            start.elapsed()
        ),
    }
}

fn suite_run(
    suite: &Path,
    path: &std::ffi::OsStr,
    arguments: &[&str],
    env: &[(&str, &str)],
) -> anyhow::Result<()> {
    let program: PathBuf = suite.join("node_modules/.bin/conformance");
    println!("$ conformance {}", arguments.join(" "));
    let status = Command::new(&program)
        .current_dir(suite)
        .args(arguments)
        .env("PATH", path)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .status()
        .with_context(|| format!("could not start {}", program.display()))?;
    if !status.success() {
        bail!("{status}");
    }
    Ok(())
}

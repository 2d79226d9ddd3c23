//! What the tests of the `agentic` binary share: scripted models, the binary with the tests'
//! environment, a scratch directory, and `agentic serve` on a free port.

// Each test binary uses some of these.
#![allow(dead_code, unreachable_pub)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A turn script in a temporary file, removed when dropped.
pub struct Script(pub PathBuf);

impl Drop for Script {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub fn script(name: &str, turns: &str) -> Script {
    let path = scratch().join(format!("{name}.yaml"));
    std::fs::write(&path, turns).unwrap();
    Script(path)
}

pub fn agentic(arguments: &[&str], provider: Option<&Script>, stdin: Option<&str>) -> Output {
    let mut child = command(arguments, provider).spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

/// The `agentic` command with the tests' environment, its stdio piped.
pub fn command(arguments: &[&str], provider: Option<&Script>) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentic"));
    command
        .args(arguments)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("AGENTIC_PROVIDER")
        // Every test of this binary shares one database, as concurrent CLI runs of a user do.
        .env("AGENTIC_DATABASE_URL", database_url())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(Script(path)) = provider {
        command.env("AGENTIC_PROVIDER", format!("script:{}", path.display()));
    }
    command
}

pub fn database_url() -> String {
    format!("sqlite://{}", scratch().join("agentic.db").display())
}

/// This test process's directory for its database and files: `cli-<pid>` in Cargo's
/// temporary directory for integration tests (under `target/`), never `/tmp`. A test binary
/// has no hook at exit, so each run removes the directories of earlier runs whose process is
/// gone.
pub fn scratch() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        if let Ok(entries) = std::fs::read_dir(&base) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let Some(pid) = name.strip_prefix("cli-") else {
                    continue;
                };
                if !std::path::Path::new("/proc").join(pid).exists() {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        let dir = base.join(format!("cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `agentic serve` on a free port, with a scripted model; returns the child and its URL.
pub fn serve(turns: &Script) -> (std::process::Child, String) {
    serve_on(turns, &database_url(), &[])
}

/// [`serve`] over the database at `database`.
pub fn serve_on(turns: &Script, database: &str, options: &[&str]) -> (std::process::Child, String) {
    let (server, url, _) = serve_logged(turns, database, options);
    (server, url)
}

/// [`serve_on`], keeping what the server writes on stderr (its log) as it comes.
pub fn serve_logged(
    turns: &Script,
    database: &str,
    options: &[&str],
) -> (
    std::process::Child,
    String,
    std::sync::Arc<std::sync::Mutex<String>>,
) {
    serve_with(turns, database, options, &[])
}

/// [`serve_logged`] with more environment variables.
pub fn serve_with(
    turns: &Script,
    database: &str,
    options: &[&str],
    environment: &[(&str, &str)],
) -> (
    std::process::Child,
    String,
    std::sync::Arc<std::sync::Mutex<String>>,
) {
    let mut server = Command::new(env!("CARGO_BIN_EXE_agentic"))
        .args(options)
        .envs(environment.iter().copied())
        .args(["serve", "--addr", "127.0.0.1:0"])
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env("AGENTIC_PROVIDER", format!("script:{}", turns.0.display()))
        .env("AGENTIC_DATABASE_URL", database)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(server.stderr.take().unwrap());
    // Log lines (migrations applied) may come before the one that names the address.
    let url = loop {
        let mut line = String::new();
        let read = std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
        assert!(read > 0, "the server ended without naming its address");
        if let Some(word) = line
            .split_whitespace()
            .find(|word| word.starts_with("http://"))
        {
            break word.to_owned();
        }
    };
    // Keep reading, so the server's last words do not meet a closed pipe.
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let kept = log.clone();
    // Bytes that are not UTF-8 (a child process's stderr shares the pipe) must not stop it.
    std::thread::spawn(move || {
        let mut line = Vec::new();
        while std::io::BufRead::read_until(&mut stderr, b'\n', &mut line).is_ok_and(|n| n > 0) {
            kept.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&line));
            line.clear();
        }
    });
    (server, url, log)
}

/// The conversation id a prompt names on stderr.
pub fn conversation_id(stderr: &str) -> String {
    let line = stderr
        .lines()
        .find(|line| line.starts_with("agentic: conversation "))
        .unwrap_or_else(|| panic!("no conversation id in: {stderr}"));
    line.split_whitespace().nth(2).unwrap().to_owned()
}

/// Polls a prompt of alice's until it is in `state`.
pub async fn wait_for_state(
    client: &reqwest::Client,
    url: &str,
    prompt: &str,
    state: &str,
) -> Value {
    wait_until(client, url, prompt, &format!("never {state}"), |stored| {
        stored["state"] == state
    })
    .await
}

/// Polls a prompt of alice's until `done` says so; fails with `what` after 120 s. The limit
/// only catches a prompt that never gets there: speed is the benchmarks' to judge, and three
/// servers with their workers on a loaded 2-core machine took over 30 s once.
pub async fn wait_until(
    client: &reqwest::Client,
    url: &str,
    prompt: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let stored: Value = client
            .get(format!("{url}/api/prompts/{prompt}"))
            .header("x-user-id", "alice")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if done(&stored) {
            return stored;
        }
        assert!(Instant::now() < deadline, "{what}: {stored}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts a prompt of alice's on the server at `url`; returns its id.
pub async fn start_prompt(client: &reqwest::Client, url: &str, body: Value) -> String {
    let started: Value = client
        .post(format!("{url}/api/prompt"))
        .header("x-user-id", "alice")
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    started["promptId"].as_str().unwrap().to_owned()
}

//! `shell.exec` called the way a prompt calls it (through the runtime's tool set), trying to
//! break each of its rules: timeouts and cancellation leave no process behind, output is
//! capped and streamed live, approval cannot be skipped, commands stay under the base
//! directory and never see the runtime's secrets.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use agentic_core::{
    Approval, Config, EventPayload, Received, Runtime, Services, State, ToolContext, ToolError,
    ToolSet,
};
use agentic_plugin_shell::{ExecInput, Settings, ShellConfig};
use serde_json::{Value, json};

/// A runtime with the shell plugin configured by `config` (the `[shell]` section).
struct Shell {
    _runtime: Runtime,
    services: Arc<Services>,
    tools: ToolSet,
    base: tempfile::TempDir,
}

impl Shell {
    async fn new(mut config: Value) -> Self {
        let base = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(base.path().join("sub")).unwrap();
        if config.get("workingDirectory").is_none() {
            config["workingDirectory"] = json!(base.path());
        }
        let runtime = Runtime::builder()
            .config(Config::from_value(json!({ "shell": config })))
            .registered_plugins()
            .build()
            .await
            .unwrap();
        let services = runtime.services().clone();
        let tools = services
            .prepare("alice", "prompt-1", "classic", &State::default())
            .await
            .unwrap()
            .tools;
        Self {
            _runtime: runtime,
            services,
            tools,
            base,
        }
    }

    fn context(&self, call_id: &str) -> ToolContext {
        ToolContext::new("alice", "prompt-1", State::default(), self.services.clone())
            .for_call(call_id)
    }

    async fn exec(&self, input: Value) -> Result<Value, ToolError> {
        self.tools
            .invoke(self.context("call-1"), "shell.exec", input)
            .await
    }

    async fn run(&self, command: &str) -> Value {
        self.exec(json!({ "command": command })).await.unwrap()
    }

    fn needs_approval(&self, command: &str) -> bool {
        matches!(
            self.tools
                .approval("shell.exec", &json!({ "command": command })),
            Approval::Required { .. }
        )
    }
}

#[tokio::test]
async fn exit_codes_signals_and_terminal_output_are_reported() {
    let shell = Shell::new(json!({})).await;
    let ok = shell.run("echo out; echo err >&2").await;
    assert_eq!(ok["output"], "out\nerr\n");
    assert_eq!(ok["exitCode"], 0);
    assert_eq!(ok["timedOut"], false);
    assert_eq!(ok["truncated"], false);
    assert_eq!(ok["workingDirectory"], ".");
    assert!(ok.get("signal").is_none());

    let failed = shell.run("echo before; exit 3").await;
    assert_eq!(failed["output"], "before\n");
    assert_eq!(failed["exitCode"], 3);

    let missing = shell.run("no-such-command-here").await;
    assert_eq!(missing["exitCode"], 127);

    let killed = shell.run("kill -9 $$").await;
    assert_eq!(killed["signal"], "SIGKILL");
    assert!(killed.get("exitCode").is_none());
    assert_eq!(killed["timedOut"], false);

    // A real terminal, `\r\n` normalised, a lone `\r` kept; stdin is empty, so reading it ends.
    let terminal = shell
        .run("test -t 1 && echo on-a-terminal; printf 'a\\r\\nb\\rc\\n'; cat; echo read-nothing")
        .await;
    assert_eq!(terminal["output"], "on-a-terminal\na\nb\rc\nread-nothing\n");
}

// The commands below ignore SIGHUP: the kernel hangs up a terminal's processes when its
// session leader dies, and these tests are about the kill the plugin sends itself.

#[tokio::test]
async fn the_timeout_kills_the_whole_process_group() {
    let shell = Shell::new(json!({})).await;
    let token = unique_sleep_seconds();
    let result = shell
        .exec(json!({
            "command": format!("trap '' HUP; echo started; sleep {token} & sleep {token}; echo never"),
            "timeoutMs": 300,
        }))
        .await
        .unwrap();
    assert_eq!(result["timedOut"], true);
    assert_eq!(result["signal"], "SIGKILL");
    assert_eq!(result["output"], "started\n");
    assert_eq!(survivors_after_waiting(&token).await, 0);
}

#[tokio::test]
async fn the_configured_timeout_applies_and_calls_cannot_exceed_the_maximum() {
    let shell = Shell::new(json!({ "timeoutMs": 200, "maxTimeoutMs": 1000 })).await;
    let token = unique_sleep_seconds();
    let result = shell.run(&format!("trap '' HUP; sleep {token}")).await;
    assert_eq!(result["timedOut"], true);
    assert_eq!(survivors_after_waiting(&token).await, 0);
    let error = shell
        .exec(json!({ "command": "true", "timeoutMs": 1001 }))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "timeoutMs 1001 is above the maximum of 1000 ms"
    );
}

#[tokio::test]
async fn background_processes_end_with_the_command() {
    let shell = Shell::new(json!({})).await;
    let token = unique_sleep_seconds();
    // Even one that ignores the hangup a closing terminal sends.
    let result = shell
        .run(&format!("trap '' HUP; sleep {token} & echo left-running"))
        .await;
    assert_eq!(result["exitCode"], 0);
    assert_eq!(result["timedOut"], false);
    assert_eq!(result["output"], "left-running\n");
    assert_eq!(survivors_after_waiting(&token).await, 0);
}

#[tokio::test]
async fn dropping_the_call_kills_the_command() {
    let shell = Arc::new(Shell::new(json!({})).await);
    let token = unique_sleep_seconds();
    let running = {
        let shell = shell.clone();
        let command = format!("trap '' HUP; sleep {token} & sleep {token}");
        tokio::spawn(async move { shell.run(&command).await })
    };
    // Both sleeps and the shell running them.
    let mut started = 0;
    for _ in 0..100 {
        started = processes_with(&token);
        if started >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(started >= 2, "the command did not start: {started}");
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
    assert_eq!(survivors_after_waiting(&token).await, 0);
}

#[tokio::test]
async fn output_is_capped_with_a_truncated_flag() {
    let shell = Shell::new(json!({})).await;
    let long = shell
        .run("head -c 60000 /dev/zero | tr '\\0' x; printf END")
        .await;
    assert_eq!(long["truncated"], true);
    let output = long["output"].as_str().unwrap();
    let expected = format!(
        "{}\n[… 10003 characters cut …]\n{}END",
        "x".repeat(25_000),
        "x".repeat(24_997)
    );
    assert_eq!(output, expected);

    let exact = shell.run("head -c 50000 /dev/zero | tr '\\0' y").await;
    assert_eq!(exact["truncated"], false);
    assert_eq!(exact["output"], "y".repeat(50_000));

    let configured = Shell::new(json!({ "maxOutputChars": 100 })).await;
    let cut = configured.run("seq 1 100").await;
    assert_eq!(cut["truncated"], true);
    let output = cut["output"].as_str().unwrap();
    assert!(output.starts_with("1\n2\n3\n"), "{output}");
    assert!(output.contains("characters cut"), "{output}");
    assert!(output.ends_with("99\n100\n"), "{output}");
}

#[tokio::test]
async fn output_streams_live_with_the_call_id_before_the_call_returns() {
    let shell = Arc::new(Shell::new(json!({})).await);
    let mut events = shell.services.events.subscribe(Some("alice"));
    let go = shell.base.path().join("go");
    let running = {
        let shell = shell.clone();
        tokio::spawn(async move {
            shell
                .tools
                .invoke(
                    shell.context("call-live"),
                    "shell.exec",
                    json!({ "command": "echo first; while [ ! -e go ]; do sleep 0.02; done; echo second" }),
                )
                .await
        })
    };
    let mut streamed = String::new();
    while !streamed.contains("first\n") {
        let event = tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .expect("no live output came")
            .unwrap();
        let Received::Event(event) = event else {
            panic!("events were lost")
        };
        if let EventPayload::PromptStream {
            prompt_id,
            delta,
            tool_call_id,
            progress,
        } = &event.payload
        {
            assert_eq!(prompt_id, "prompt-1");
            assert_eq!(tool_call_id.as_deref(), Some("call-live"));
            // A command's output has no count of how far it is.
            assert_eq!(*progress, None);
            streamed.push_str(delta);
        }
    }
    // The command is still waiting for `go`: the output came while it ran.
    assert!(!running.is_finished());
    std::fs::write(&go, "").unwrap();
    let result = running.await.unwrap().unwrap();
    assert_eq!(result["output"], "first\nsecond\n");
    while let Some(Received::Event(event)) = events.try_next() {
        if let EventPayload::PromptStream { delta, .. } = &event.payload {
            streamed.push_str(delta);
        }
    }
    assert_eq!(streamed, "first\nsecond\n");
}

#[tokio::test]
async fn every_command_needs_approval_by_default() {
    let shell = Shell::new(json!({})).await;
    for command in ["ls", "true", "echo hi", "git status"] {
        assert!(shell.needs_approval(command), "{command}");
    }
    let reason = shell.tools.approval(
        "shell.exec",
        &json!({ "command": "rm -rf build", "workingDirectory": "sub" }),
    );
    assert_eq!(
        reason,
        Approval::Required {
            reason: "runs the shell command `rm -rf build` in sub".to_owned()
        }
    );
}

#[tokio::test]
async fn the_allowlist_cannot_be_bypassed() {
    let shell = Shell::new(json!({ "allow": ["ls", "git status", "echo"] })).await;
    for command in [
        "ls",
        "ls -la",
        "ls sub",
        "git status --short",
        "echo 'hello world'",
    ] {
        assert!(!shell.needs_approval(command), "{command}");
    }
    for command in [
        "lsblk",
        "git stash",
        "git",
        "ls; touch pwned",
        "ls && touch pwned",
        "ls || touch pwned",
        "ls & touch pwned",
        "ls | sh",
        "ls\ntouch pwned",
        "ls `touch pwned`",
        "ls $(touch pwned)",
        "echo \"$(touch pwned)\"",
        "ls > pwned",
        "ls >pwned",
        "echo x >> pwned",
        "ls < /etc/passwd",
        "ls *",
        "'ls' -la",
        "l\\s",
        "ls\\\n; touch pwned",
        "echo ${PATH:=pwned}",
    ] {
        assert!(
            shell.needs_approval(command),
            "{command:?} skipped approval"
        );
    }
    // The approval check is the tool's, not the runner's: the allowed command really runs.
    let listed = shell.run("ls").await;
    assert_eq!(listed["output"], "sub\n");
}

#[tokio::test]
async fn the_config_can_require_approval_even_for_allowed_commands() {
    let runtime = Runtime::builder()
        .config(Config::from_value(json!({
            "shell": { "allow": ["ls"] },
            "requireApproval": ["shell.*"]
        })))
        .registered_plugins()
        .build()
        .await
        .unwrap();
    let tools = runtime
        .services()
        .prepare("alice", "p", "classic", &State::default())
        .await
        .unwrap()
        .tools;
    assert!(matches!(
        tools.approval("shell.exec", &json!({ "command": "ls" })),
        Approval::Required { .. }
    ));
}

#[tokio::test]
async fn invalid_input_gets_a_clear_error() {
    let shell = Shell::new(json!({})).await;
    for (input, expected) in [
        (json!({}), "\"command\" is a required property"),
        (json!({ "command": 5 }), "5 is not of type \"string\""),
        (json!({ "command": "ls", "cwd": "sub" }), "cwd"),
        (json!({ "command": "ls", "timeoutMs": 0 }), "timeoutMs"),
        (json!({ "command": "ls", "timeoutMs": 1.5 }), "timeoutMs"),
        (json!({ "command": "ls", "timeoutMs": -1 }), "timeoutMs"),
        (json!({ "command": "" }), "command is empty"),
    ] {
        let error = shell.exec(input.clone()).await.unwrap_err().to_string();
        assert!(error.contains(expected), "{input}: {error}");
    }
}

#[tokio::test]
async fn commands_run_under_the_base_directory_only() {
    let shell = Shell::new(json!({})).await;
    let real_base = shell.base.path().canonicalize().unwrap();
    let inside = shell
        .exec(json!({ "command": "pwd", "workingDirectory": "sub" }))
        .await
        .unwrap();
    assert_eq!(
        inside["output"],
        format!("{}\n", real_base.join("sub").display())
    );
    assert_eq!(inside["workingDirectory"], "sub");
    let outside = shell
        .base
        .path()
        .parent()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    std::os::unix::fs::symlink("/", shell.base.path().join("root-link")).unwrap();
    for (directory, expected) in [
        ("..", "outside the base directory"),
        ("sub/../..", "outside the base directory"),
        ("/", "outside the base directory"),
        (outside.as_str(), "outside the base directory"),
        ("root-link", "symbolic link"),
        ("nowhere", "does not exist"),
    ] {
        let error = shell
            .exec(json!({ "command": "touch escaped", "workingDirectory": directory }))
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{directory}: {error}");
    }
    assert!(!real_base.parent().unwrap().join("escaped").exists());
}

#[tokio::test]
async fn commands_never_see_the_runtimes_secrets() {
    let base = tempfile::tempdir().unwrap();
    let parent = [
        ("PATH", std::env::var("PATH").unwrap_or_default().as_str()),
        ("HOME", "/home/ada"),
        ("OPENAI_API_KEY", "sk-leaked"),
        ("AGENTIC_API_TOKEN", "token-leaked"),
        ("GITHUB_TOKEN", "ghp-leaked"),
        ("TERM", "xterm-256color"),
        ("SSH_AUTH_SOCK", "/tmp/agent.sock"),
    ]
    .map(|(name, value)| (OsString::from(name), OsString::from(value)));
    let settings = Settings::new(
        &ShellConfig {
            working_directory: Some(base.path().to_path_buf()),
            pass_env: vec!["SSH_AUTH_SOCK".to_owned()],
            ..ShellConfig::default()
        },
        parent,
    )
    .unwrap();
    let mut live = String::new();
    let mut sink = |delta: &str| live.push_str(delta);
    let result = settings
        .exec(
            &ExecInput {
                command: "env".to_owned(),
                working_directory: None,
                timeout_ms: None,
            },
            &mut sink,
        )
        .await
        .unwrap();
    let environment: Vec<&str> = result.output.lines().collect();
    for expected in [
        "TERM=dumb",
        "NO_COLOR=1",
        "HOME=/home/ada",
        "SSH_AUTH_SOCK=/tmp/agent.sock",
    ] {
        assert!(
            environment.contains(&expected),
            "{expected}: {environment:?}"
        );
    }
    assert!(!result.output.contains("leaked"), "{}", result.output);
    assert_eq!(live, result.output);
}

/// Waits up to 2 s for every process whose command line holds `token` to be gone, and says
/// how many are left. Killing is immediate; the wait covers the kernel tidying up.
async fn survivors_after_waiting(token: &str) -> usize {
    let mut left = processes_with(token);
    for _ in 0..100 {
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        left = processes_with(token);
    }
    left
}

/// Live processes (zombies have an empty command line) whose command line holds `token`.
fn processes_with(token: &str) -> usize {
    let token = token.as_bytes();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter(|entry| {
            std::fs::read(entry.path().join("cmdline"))
                .is_ok_and(|cmdline| cmdline.windows(token.len()).any(|window| window == token))
        })
        .count()
}

/// A `sleep` duration no other process has on its command line, so survivors can be found.
fn unique_sleep_seconds() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "900.{}{:03}{nanos:09}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

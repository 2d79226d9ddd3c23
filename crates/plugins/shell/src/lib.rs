//! The shell plugin: `shell.exec` runs a command line with `sh -c` on a pseudo-terminal,
//! streams its output live (`prompt.stream` with the call's id) and returns it captured, with
//! the exit code.
//!
//! Every call needs approval unless the command is one plain command starting with an allowed
//! prefix (`allow`, see [`allow`]). A command is killed with its whole process group at its
//! timeout, when it ends (no background leftovers) and when the prompt stops waiting for it.
//! It runs in the base directory or a directory under it, with an environment that carries
//! none of the runtime's secrets. The base directory confines where a command starts, not
//! what it can reach: approval is the safety boundary.
//!
//! Config (`[shell]`): `workingDirectory` (the base; default the current directory), `allow`,
//! `timeoutMs` (default 60,000), `maxTimeoutMs` (default 600,000), `maxOutputChars` (default
//! 50,000), `passEnv` (more variable names to hand to commands).
#![forbid(unsafe_code)]

pub mod allow;
pub mod capture;
pub mod place;
pub mod run;

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use agentic_core::{
    Plugin, PluginRegistration, PrepareContext, SetupContext, ToolContext, ToolError, define_tool,
};
use anyhow::{Context as _, bail};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

agentic_core::inventory::submit! {
    PluginRegistration { id: "shell", create: create_plugin }
}

/// The plugin, as the runtime creates it; the `agentic` crate links it by feature.
pub fn create_plugin() -> Arc<dyn Plugin> {
    Arc::new(ShellPlugin::default())
}

/// Longest command line accepted, in bytes (Linux refuses one argument above 128 KiB).
pub const MAX_COMMAND_BYTES: usize = 100_000;
/// Characters of output shown live per call before live output stops; the result is capped
/// separately by `maxOutputChars`.
pub const MAX_LIVE_CHARS: usize = 1_000_000;
/// The smallest `maxOutputChars` accepted.
const MIN_OUTPUT_CHARS: usize = 100;

/// The `shell` config section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ShellConfig {
    /// The base directory: commands run here or in a directory under it. The current
    /// directory when absent; a relative path is relative to it.
    pub working_directory: Option<PathBuf>,
    /// Command prefixes that run without approval, e.g. `["ls", "git status"]`. A prefix
    /// matches whole words (`ls` allows `ls -la`, not `lsblk`), and never a command line with
    /// shell operators, redirections, substitutions or globs. Any arguments may follow, so
    /// allow only commands that are harmless with any arguments.
    pub allow: Vec<String>,
    /// Milliseconds a command may run when the call does not say.
    pub timeout_ms: u64,
    /// The largest `timeoutMs` a call may ask for.
    pub max_timeout_ms: u64,
    /// Characters of output a result keeps (the start and the end of longer output).
    pub max_output_chars: usize,
    /// More environment variables handed to commands, by name (e.g. `SSH_AUTH_SOCK`).
    pub pass_env: Vec<String>,
}

impl Default for ShellConfig {
    fn default() -> Self {
        Self {
            working_directory: None,
            allow: Vec::new(),
            timeout_ms: 60_000,
            max_timeout_ms: 600_000,
            max_output_chars: 50_000,
            pass_env: Vec::new(),
        }
    }
}

#[derive(Debug, Default)]
pub struct ShellPlugin {
    settings: OnceLock<Arc<Settings>>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecInput {
    /// The command line, run with `sh -c`, e.g. `ls -la` or `cargo test 2>&1 | tail -n 30`.
    /// Nobody can type into it: stdin is empty.
    pub command: String,
    /// Directory to run in, relative to the base directory; the base directory when absent.
    #[serde(default)]
    pub working_directory: Option<String>,
    /// Milliseconds before the command and everything it started are killed.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub timeout_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecOutput {
    /// What the command printed: stdout and stderr together, as on a terminal (there are no
    /// separate `stdout` and `stderr` fields), with `\r\n` turned into `\n`.
    pub output: String,
    /// True when the output was longer than the limit: its start and end are kept, with a
    /// line in between saying how many characters were cut.
    pub truncated: bool,
    /// The exit code (0 is success); absent when a signal ended the command.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended the command, e.g. `SIGKILL` after a timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// True when the command ran out of time and was killed with everything it started.
    pub timed_out: bool,
    /// Where the command ran, relative to the base directory.
    pub working_directory: String,
    /// How long the command ran, in milliseconds.
    pub duration_ms: u64,
}

/// The config, checked and ready for calls.
#[derive(Debug, Clone)]
pub struct Settings {
    base: PathBuf,
    allow: Vec<String>,
    timeout: Duration,
    max_timeout: Duration,
    max_output_chars: usize,
    environment: Vec<(OsString, OsString)>,
}

impl Settings {
    /// Checks the config; `parent_environment` is what the runtime runs with.
    pub fn new(
        config: &ShellConfig,
        parent_environment: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> anyhow::Result<Self> {
        let current = std::env::current_dir().context("cannot read the current directory")?;
        let base = match &config.working_directory {
            Some(directory) => current.join(directory),
            None => current,
        };
        for prefix in &config.allow {
            allow::check_allowed_prefix(prefix)
                .map_err(|error| anyhow::anyhow!("shell: {error}"))?;
        }
        for name in &config.pass_env {
            place::check_passed_variable(name)
                .map_err(|error| anyhow::anyhow!("shell: {error}"))?;
        }
        if config.timeout_ms == 0 {
            bail!("shell: timeoutMs must be at least 1");
        }
        if config.timeout_ms > config.max_timeout_ms {
            bail!(
                "shell: timeoutMs ({}) is above maxTimeoutMs ({})",
                config.timeout_ms,
                config.max_timeout_ms
            );
        }
        if config.max_output_chars < MIN_OUTPUT_CHARS {
            bail!(
                "shell: maxOutputChars ({}) is below the smallest useful value, {MIN_OUTPUT_CHARS}",
                config.max_output_chars
            );
        }
        Ok(Self {
            base,
            allow: config.allow.clone(),
            timeout: Duration::from_millis(config.timeout_ms),
            max_timeout: Duration::from_millis(config.max_timeout_ms),
            max_output_chars: config.max_output_chars,
            environment: place::child_environment(parent_environment, &config.pass_env),
        })
    }

    /// Why this call needs approval, or `None` when the allowlist lets it run.
    pub fn approval_reason(&self, input: &ExecInput) -> Option<String> {
        // A blank command runs nothing: it fails before anything starts.
        if input.command.trim().is_empty() || allow::command_is_allowed(&input.command, &self.allow)
        {
            return None;
        }
        let command: String = input.command.chars().take(200).collect();
        let ellipsis = if command.len() < input.command.len() {
            "…"
        } else {
            ""
        };
        Some(match input.working_directory.as_deref().map(str::trim) {
            Some(directory) if !directory.is_empty() => {
                format!("runs the shell command `{command}{ellipsis}` in {directory}")
            }
            _ => format!("runs the shell command `{command}{ellipsis}`"),
        })
    }

    /// Runs one call: checks the input, runs the command, reports how it went. Output is
    /// passed to `live` as it arrives.
    pub async fn exec(
        &self,
        input: &ExecInput,
        live: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ExecOutput, ToolError> {
        if input.command.trim().is_empty() {
            return Err(ToolError::failed(
                "command is empty; give a command line such as \"ls -la\"",
            ));
        }
        if input.command.contains('\0') {
            return Err(ToolError::failed("command contains a NUL character"));
        }
        if input.command.len() > MAX_COMMAND_BYTES {
            return Err(ToolError::failed(format!(
                "command is {} bytes long; the limit is {MAX_COMMAND_BYTES}, so write long scripts to a file first",
                input.command.len()
            )));
        }
        let timeout = match input.timeout_ms {
            None => self.timeout,
            Some(0) => return Err(ToolError::failed("timeoutMs must be at least 1")),
            Some(milliseconds) if Duration::from_millis(milliseconds) > self.max_timeout => {
                return Err(ToolError::failed(format!(
                    "timeoutMs {milliseconds} is above the maximum of {} ms",
                    self.max_timeout.as_millis()
                )));
            }
            Some(milliseconds) => Duration::from_millis(milliseconds),
        };
        let directory =
            place::resolve_working_directory(&self.base, input.working_directory.as_deref())?;
        let started = Instant::now();
        let outcome = run::run_on_pty(
            &run::RunRequest {
                command: &input.command,
                directory: &directory,
                environment: &self.environment,
                timeout,
                max_output_chars: self.max_output_chars,
                max_live_chars: MAX_LIVE_CHARS,
            },
            live,
        )
        .await?;
        Ok(ExecOutput {
            output: outcome.output.text,
            truncated: outcome.output.truncated,
            exit_code: outcome.exit_code,
            signal: outcome.signal.map(run::signal_name),
            timed_out: outcome.timed_out,
            working_directory: place::shown_relative_to_base(&self.base, &directory),
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        })
    }

    fn description(&self) -> String {
        format!(
            "Run a shell command line (`sh -c`) on a terminal and return its output (stdout and \
             stderr together), exit code and whether it timed out. It runs in the base directory \
             or workingDirectory under it, stdin is empty, and whatever it starts in the \
             background is ended when it exits. Timeout {} by default, at most {}. Output over \
             {} characters keeps its start and end. Most commands wait for the user's approval.",
            seconds(self.timeout),
            seconds(self.max_timeout),
            self.max_output_chars
        )
    }
}

#[async_trait]
impl Plugin for ShellPlugin {
    fn id(&self) -> &str {
        "shell"
    }

    fn everyday(&self) -> bool {
        true
    }

    fn config_schema(&self) -> serde_json::Value {
        agentic_core::schema_of::<ShellConfig>()
    }

    async fn setup(&self, context: &mut SetupContext<'_>) -> anyhow::Result<()> {
        let config: ShellConfig = if context.config.section("shell").is_null() {
            ShellConfig::default()
        } else {
            context
                .config
                .plugin("shell")
                .context("invalid [shell] config")?
        };
        let settings = Settings::new(&config, std::env::vars_os())?;
        let _ = self.settings.set(Arc::new(settings));
        Ok(())
    }

    async fn prepare(&self, context: &mut PrepareContext) -> anyhow::Result<()> {
        let settings = match self.settings.get() {
            Some(settings) => settings.clone(),
            None => Arc::new(Settings::new(&ShellConfig::default(), std::env::vars_os())?),
        };
        let for_approval = settings.clone();
        let description = settings.description();
        context.add_tool(
            define_tool(
                "shell.exec",
                &description,
                move |context: ToolContext, input: ExecInput| {
                    let settings = settings.clone();
                    async move {
                        let mut live = |delta: &str| context.stream(delta);
                        settings.exec(&input, &mut live).await
                    }
                },
            )
            .approval_when(move |input: &ExecInput| for_approval.approval_reason(input))
            .into_arc(),
        );
        Ok(())
    }
}

fn seconds(duration: Duration) -> String {
    let milliseconds = duration.as_millis();
    if milliseconds.is_multiple_of(1000) {
        format!("{} s", milliseconds / 1000)
    } else {
        format!("{milliseconds} ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(config: ShellConfig) -> anyhow::Result<Settings> {
        Settings::new(&config, Vec::new())
    }

    fn input(command: &str) -> ExecInput {
        ExecInput {
            command: command.to_owned(),
            working_directory: None,
            timeout_ms: None,
        }
    }

    #[test]
    fn bad_config_is_refused_with_a_reason() {
        let cases = [
            (
                ShellConfig {
                    allow: vec!["ls; rm".into()],
                    ..ShellConfig::default()
                },
                "allow entry",
            ),
            (
                ShellConfig {
                    pass_env: vec!["OPENAI_API_KEY".into()],
                    ..ShellConfig::default()
                },
                "passEnv",
            ),
            (
                ShellConfig {
                    timeout_ms: 0,
                    ..ShellConfig::default()
                },
                "at least 1",
            ),
            (
                ShellConfig {
                    timeout_ms: 10_000,
                    max_timeout_ms: 5_000,
                    ..ShellConfig::default()
                },
                "above maxTimeoutMs",
            ),
            (
                ShellConfig {
                    max_output_chars: 5,
                    ..ShellConfig::default()
                },
                "maxOutputChars",
            ),
        ];
        for (config, expected) in cases {
            let error = settings(config).unwrap_err().to_string();
            assert!(error.contains(expected), "{error}");
        }
        assert!(settings(ShellConfig::default()).is_ok());
    }

    #[test]
    fn the_config_reads_camel_case_and_refuses_unknown_keys() {
        let config: ShellConfig = serde_json::from_value(serde_json::json!({
            "workingDirectory": "/srv",
            "allow": ["ls"],
            "timeoutMs": 5000,
            "passEnv": ["SSH_AUTH_SOCK"]
        }))
        .unwrap();
        assert_eq!(config.working_directory, Some(PathBuf::from("/srv")));
        assert_eq!(config.timeout_ms, 5000);
        assert_eq!(config.max_output_chars, 50_000);
        assert!(
            serde_json::from_value::<ShellConfig>(serde_json::json!({ "alow": ["ls"] })).is_err()
        );
    }

    #[test]
    fn approval_is_needed_unless_the_allowlist_says_otherwise() {
        let open = settings(ShellConfig::default()).unwrap();
        assert_eq!(
            open.approval_reason(&input("ls")).as_deref(),
            Some("runs the shell command `ls`")
        );
        let listed = settings(ShellConfig {
            allow: vec!["ls".into()],
            ..ShellConfig::default()
        })
        .unwrap();
        assert_eq!(listed.approval_reason(&input("ls -la")), None);
        assert!(listed.approval_reason(&input("lsblk")).is_some());
        assert!(listed.approval_reason(&input("ls && rm -rf x")).is_some());
        let mut elsewhere = input("rm x");
        elsewhere.working_directory = Some("src".into());
        assert_eq!(
            listed.approval_reason(&elsewhere).as_deref(),
            Some("runs the shell command `rm x` in src")
        );
        let long = "x".repeat(500);
        let reason = open.approval_reason(&input(&long)).unwrap();
        assert!(reason.ends_with("…`"), "{reason}");
        assert!(reason.len() < 300);
    }

    #[tokio::test]
    async fn invalid_input_fails_before_anything_runs() {
        let dir = tempfile::tempdir().unwrap();
        let shell = settings(ShellConfig {
            working_directory: Some(dir.path().to_path_buf()),
            max_timeout_ms: 60_000,
            timeout_ms: 1_000,
            ..ShellConfig::default()
        })
        .unwrap();
        let mut ignore = |_: &str| {};
        let cases = [
            (input("   "), "command is empty"),
            (input("touch made\0"), "NUL"),
            (input(&"x".repeat(MAX_COMMAND_BYTES + 1)), "bytes long"),
            (
                ExecInput {
                    timeout_ms: Some(60_001),
                    ..input("touch made")
                },
                "above the maximum of 60000 ms",
            ),
            (
                ExecInput {
                    timeout_ms: Some(0),
                    ..input("touch made")
                },
                "at least 1",
            ),
            (
                ExecInput {
                    working_directory: Some("..".into()),
                    ..input("touch made")
                },
                "outside the base directory",
            ),
        ];
        for (input, expected) in cases {
            let error = shell
                .exec(&input, &mut ignore)
                .await
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{error}");
        }
        assert!(!dir.path().join("made").exists());
        assert!(!dir.path().parent().unwrap().join("made").exists());
    }

    #[test]
    fn the_description_states_the_limits() {
        let shell = settings(ShellConfig {
            timeout_ms: 1_500,
            ..ShellConfig::default()
        })
        .unwrap();
        let description = shell.description();
        assert!(
            description.contains("Timeout 1500 ms by default, at most 600 s"),
            "{description}"
        );
        assert!(description.contains("50000 characters"), "{description}");
    }
}

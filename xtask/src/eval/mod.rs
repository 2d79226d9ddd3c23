//! `cargo xtask eval`: the real-model eval of `eval/README.md`. Every task of `eval/tasks`
//! runs through the real `agentic` binary against whatever model it is configured for (the
//! embedded one, or the provider the environment names or turns on: `OPENAI_BASE_URL`,
//! `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`, `AGENTIC_PROVIDER`), in a fresh directory per run, and is judged by its
//! checks on the answer, the files and the stored state.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod checks;
mod fixtures;
mod report;

pub(crate) use checks::check_answer;
use checks::check_state;
use fixtures::{FileServer, fixture_port};
pub(crate) use report::summary;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Kind {
    Single,
    Aggregation,
    Multistep,
    Recovery,
    Approval,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Single => "single",
            Self::Aggregation => "aggregation",
            Self::Multistep => "multistep",
            Self::Recovery => "recovery",
            Self::Approval => "approval",
        }
    }
}

fn yes() -> bool {
    true
}

/// Which part of the suite a task belongs to (`eval/split.toml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Split {
    /// Rules for models may be designed looking at these.
    #[default]
    Tuning,
    /// Never designed against: the judge of whether a rule carries over.
    Heldout,
}

impl Split {
    fn name(self) -> &'static str {
        match self {
            Self::Tuning => "tuning",
            Self::Heldout => "heldout",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SplitFile {
    heldout: Vec<String>,
}

/// One `eval/tasks/<id>/task.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Task {
    #[serde(skip)]
    pub id: String,
    #[serde(skip)]
    pub dir: PathBuf,
    #[serde(skip)]
    pub split: Split,
    pub kind: Kind,
    pub description: String,
    pub message: String,
    #[serde(default = "yes")]
    pub approve: bool,
    #[serde(default)]
    pub flaky: bool,
    #[serde(default)]
    pub config: toml::Table,
    #[serde(default)]
    pub setup: Vec<Invoke>,
    pub check: Check,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Invoke {
    pub tool: String,
    #[serde(default = "empty_table")]
    pub input: toml::Value,
    #[serde(default)]
    pub contains: Vec<String>,
    #[serde(default)]
    pub excludes: Vec<String>,
}

fn empty_table() -> toml::Value {
    toml::Value::Table(toml::Table::new())
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct Check {
    pub answer_contains: Vec<String>,
    pub answer_any: Vec<String>,
    pub answer_numbers: Vec<f64>,
    pub answer_excludes: Vec<String>,
    /// An IANA timezone: the answer names the weekday it is there now, and no other weekday.
    pub answer_weekday_in: Option<String>,
    pub files: Vec<FileCheck>,
    pub absent: Vec<String>,
    pub invoke: Vec<Invoke>,
}

impl Check {
    fn is_empty(&self) -> bool {
        self.answer_contains.is_empty()
            && self.answer_any.is_empty()
            && self.answer_numbers.is_empty()
            && self.answer_excludes.is_empty()
            && self.answer_weekday_in.is_none()
            && self.files.is_empty()
            && self.absent.is_empty()
            && self.invoke.is_empty()
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileCheck {
    pub path: String,
    #[serde(default)]
    pub contains: Vec<String>,
    #[serde(default)]
    pub excludes: Vec<String>,
}

/// Reads every task under `dir`, sorted by id.
pub(crate) fn load_tasks(dir: &Path) -> anyhow::Result<Vec<Task>> {
    let mut tasks = Vec::new();
    let entries = std::fs::read_dir(dir).with_context(|| format!("no {}", dir.display()))?;
    for entry in entries {
        let entry = entry?;
        let file = entry.path().join("task.toml");
        if !file.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&file)?;
        let mut task: Task =
            toml::from_str(&text).with_context(|| format!("{} is not a task", file.display()))?;
        task.id = entry.file_name().to_string_lossy().into_owned();
        task.dir = entry.path();
        if task.check.is_empty() {
            bail!("{}: a task needs at least one check", file.display());
        }
        if task.message.contains("{server}") != task.dir.join("serve").is_dir() {
            bail!(
                "{}: {{server}} in the message and a serve/ directory go together",
                file.display()
            );
        }
        tasks.push(task);
    }
    tasks.sort_by(|a, b| a.id.cmp(&b.id));
    let split_file = dir.join("../split.toml");
    let split: SplitFile = toml::from_str(
        &std::fs::read_to_string(&split_file)
            .with_context(|| format!("no {}", split_file.display()))?,
    )
    .with_context(|| format!("{} is not a split", split_file.display()))?;
    for id in &split.heldout {
        let Some(task) = tasks.iter_mut().find(|task| &task.id == id) else {
            bail!("{}: no task {id}", split_file.display());
        };
        task.split = Split::Heldout;
    }
    Ok(tasks)
}

/// What one run of one task in one mode came to.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunReport {
    pub task: String,
    pub description: String,
    pub kind: Kind,
    pub split: Split,
    pub mode: String,
    pub run: usize,
    pub success: bool,
    /// `ok`, `answer`, `state`, `error`, `timeout` or `crash`.
    pub failure: String,
    pub detail: String,
    pub model_calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub estimated_tokens: bool,
    /// Code-mode scripts run (`code.execute` calls); 0 in classic mode.
    pub iterations: u64,
    /// Tool calls other than `code.execute`.
    pub tool_calls: u64,
    pub wall_ms: u64,
    /// The model that answered, as the provider named it.
    pub model: String,
    pub answer: String,
    /// Mistakes constrained decoding is to make impossible, counted in the timeline.
    pub mistakes: Mistakes,
}

/// Replies and calls of one run that a grammar rules out: programs that did not parse (or
/// were no program), calls of functions that do not exist, and tool inputs with fields the
/// tool does not take.
#[derive(Debug, Default, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Mistakes {
    pub unparsed: u64,
    pub undefined_calls: u64,
    pub unknown_fields: u64,
}

pub(crate) struct Options {
    pub binary: PathBuf,
    pub modes: Vec<String>,
    pub runs: usize,
    pub timeout: Duration,
    /// Sampling temperature for the model (every provider's section); the provider's default
    /// when `None` (llama.cpp's server samples at 0.8, OpenAI at 1).
    pub temperature: Option<f64>,
    /// Whether the embedded model decodes under the request's grammar (`[local] constrain`).
    pub constrain: bool,
    pub out: PathBuf,
}

pub(crate) fn run_all(tasks: &[Task], options: &Options) -> anyhow::Result<Vec<RunReport>> {
    std::fs::create_dir_all(&options.out)?;
    let mut log = std::fs::File::create(options.out.join("runs.jsonl"))?;
    let mut reports = Vec::new();
    // Mode by mode: a server that keeps the last prompt's cache (llama.cpp's) then reuses the
    // mode's system prompt from one task to the next.
    for mode in &options.modes {
        for task in tasks {
            for run in 1..=options.runs {
                let dir = options.out.join(format!("{}-{mode}-{run}", task.id));
                let report = run_one(task, mode, run, &dir, options)
                    .with_context(|| format!("{} ({mode}, run {run})", task.id))?;
                println!(
                    "{:<28} {:<8} {:<4} {:<8} calls {:>2}  tokens {:>6}/{:<5} {:>6.1} s  {}",
                    task.id,
                    mode,
                    if report.success { "ok" } else { "FAIL" },
                    if report.success { "" } else { &report.failure },
                    report.model_calls,
                    report.prompt_tokens,
                    report.completion_tokens,
                    report.wall_ms as f64 / 1000.0,
                    one_line(&report.detail, 80),
                );
                writeln!(log, "{}", serde_json::to_string(&report)?)?;
                reports.push(report);
            }
        }
    }
    Ok(reports)
}

pub(crate) fn one_line(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() > max {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// Sets `key` of the `[section]` table of a run's config, making the table if need be.
/// The model's settings for a run: the temperature, when one is given, for every provider
/// (whichever the environment turns on answers), and whether the embedded model decodes under
/// grammars.
pub(crate) fn model_settings(config: &mut toml::Table, temperature: Option<f64>, constrain: bool) {
    if let Some(temperature) = temperature {
        for section in ["openai", "anthropic", "gemini", "local"] {
            set(
                config,
                section,
                "temperature",
                toml::Value::Float(temperature),
            );
        }
    }
    if !constrain {
        set(config, "local", "constrain", toml::Value::Boolean(false));
    }
}

pub(crate) fn set(config: &mut toml::Table, section: &str, key: &str, value: toml::Value) {
    let table = config
        .entry(section)
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if let toml::Value::Table(table) = table {
        table.insert(key.into(), value);
    }
}

fn run_one(
    task: &Task,
    mode: &str,
    run: usize,
    dir: &Path,
    options: &Options,
) -> anyhow::Result<RunReport> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    let root = dir.join("root");
    std::fs::create_dir_all(&root)?;
    let files = task.dir.join("files");
    if files.is_dir() {
        copy_tree(&files, &root)?;
    }
    let server = if task.dir.join("serve").is_dir() {
        Some(FileServer::start(
            task.dir.join("serve"),
            task.flaky,
            fixture_port(&task.id),
        )?)
    } else {
        None
    };
    let mut config = task.config.clone();
    set(
        &mut config,
        "fs",
        "root",
        toml::Value::String(root.to_string_lossy().into_owned()),
    );
    crate::eval::model_settings(&mut config, options.temperature, options.constrain);
    // Run n > 1 draws its samples from another seed: the embedded model decodes greedily, and
    // the programs code mode samples (candidates, a program asked again) are seeded per step,
    // so runs with one seed would repeat each other token for token. Run 1 keeps the
    // default, which leaves every request's seed as the mode gave it.
    if run > 1 {
        set(
            &mut config,
            "local",
            "seed",
            toml::Value::Integer(i64::try_from(run - 1)?),
        );
    }
    let config_path = dir.join("agentic.toml");
    std::fs::write(&config_path, toml::to_string(&config)?)?;
    let agentic = Agentic {
        binary: &options.binary,
        dir,
        config: &config_path,
        database: format!("sqlite://{}?mode=rwc", dir.join("db.sqlite").display()),
    };
    for setup in &task.setup {
        agentic
            .invoke(setup)
            .with_context(|| format!("setup {}", setup.tool))?;
    }
    let mut message = task.message.clone();
    if let Some(server) = &server {
        message = message.replace("{server}", &server.base);
    }
    let started = Instant::now();
    let outcome = agentic.prompt(&message, mode, task.approve, options.timeout)?;
    let wall_ms = started.elapsed().as_millis() as u64;
    std::fs::write(dir.join("events.jsonl"), &outcome.stdout)?;
    std::fs::write(dir.join("stderr.txt"), &outcome.stderr)?;
    drop(server);

    let events = Events::read(&outcome.stdout);
    let mut report = RunReport {
        task: task.id.clone(),
        description: task.description.clone(),
        kind: task.kind,
        split: task.split,
        mode: mode.to_owned(),
        run,
        success: false,
        failure: String::new(),
        detail: String::new(),
        model_calls: events.usage_number("modelCalls"),
        prompt_tokens: events.usage_number("inputTokens"),
        completion_tokens: events.usage_number("outputTokens"),
        estimated_tokens: events
            .usage
            .as_ref()
            .and_then(|usage| usage.get("estimated"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
        iterations: events.tool_calls("code.execute"),
        tool_calls: events.tool_calls_except("code.execute"),
        wall_ms,
        model: events
            .usage
            .as_ref()
            .and_then(|usage| usage.get("model"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        answer: events.answer(),
        mistakes: events.mistakes(),
    };
    if outcome.timed_out {
        report.failure = "timeout".into();
        report.detail = format!("no answer within {} s", options.timeout.as_secs());
    } else if let Some(error) = &events.error {
        report.failure = "error".into();
        report.detail = error.clone();
    } else if events.usage.is_none() {
        report.failure = "crash".into();
        report.detail = format!(
            "agentic exited with {} and no prompt.completed: {}",
            outcome.status,
            one_line(String::from_utf8_lossy(&outcome.stderr).trim(), 300)
        );
    } else {
        let answer_problems = check_answer(&task.check, &report.answer);
        let state_problems = check_state(&task.check, &root, &agentic)?;
        if let Some(problem) = answer_problems.first() {
            report.failure = "answer".into();
            report.detail = problem.clone();
        } else if let Some(problem) = state_problems.first() {
            report.failure = "state".into();
            report.detail = problem.clone();
        } else {
            report.success = true;
            report.failure = "ok".into();
        }
    }
    if !report.success && report.detail.is_empty() {
        report.detail = one_line(&report.answer, 120);
    } else if !report.success && report.failure != "timeout" {
        report.detail = format!(
            "{}; answer: {}",
            report.detail,
            one_line(&report.answer, 100)
        );
    }
    Ok(report)
}

fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            std::fs::create_dir_all(&target)?;
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// The `agentic` binary set up for one run.
pub(crate) struct Agentic<'a> {
    pub binary: &'a Path,
    pub dir: &'a Path,
    pub config: &'a Path,
    pub database: String,
}

pub(crate) struct Outcome {
    pub status: String,
    pub timed_out: bool,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Agentic<'_> {
    fn command(&self) -> Command {
        let mut command = Command::new(self.binary);
        command
            .current_dir(self.dir)
            .env("AGENTIC_CONFIG", self.config)
            .env("AGENTIC_DATABASE_URL", &self.database)
            .env_remove("AGENTIC_SERVER")
            .stdin(Stdio::null());
        command
    }

    fn invoke(&self, invoke: &Invoke) -> anyhow::Result<String> {
        let input = serde_json::to_string(&invoke.input)?;
        let output = self
            .command()
            .args(["invoke", &invoke.tool, &input])
            .output()
            .context("could not run agentic")?;
        if !output.status.success() {
            bail!(
                "agentic invoke {} {input} failed: {}",
                invoke.tool,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    fn prompt(
        &self,
        message: &str,
        mode: &str,
        approve: bool,
        timeout: Duration,
    ) -> anyhow::Result<Outcome> {
        let mut command = self.command();
        command.args(["prompt", message, "-m", mode, "--json"]);
        if approve {
            command.arg("--yes");
        }
        Self::wait_for_prompt(command, timeout)
    }

    /// The next prompt of `conversation` (a new conversation when `None`), approving every
    /// tool call.
    pub(crate) fn prompt_in(
        &self,
        message: &str,
        mode: &str,
        conversation: Option<&str>,
        timeout: Duration,
    ) -> anyhow::Result<Outcome> {
        let mut command = self.command();
        command.args(["prompt", message, "-m", mode, "--json", "--yes"]);
        if let Some(conversation) = conversation {
            command.args(["-c", conversation]);
        }
        Self::wait_for_prompt(command, timeout)
    }

    fn wait_for_prompt(mut command: Command, timeout: Duration) -> anyhow::Result<Outcome> {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("could not run agentic")?;
        let mut stdout = child.stdout.take().context("no stdout")?;
        let mut stderr = child.stderr.take().context("no stderr")?;
        let out = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = stdout.read_to_end(&mut bytes);
            bytes
        });
        let err = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = stderr.read_to_end(&mut bytes);
            bytes
        });
        let deadline = Instant::now() + timeout;
        let mut timed_out = false;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if Instant::now() >= deadline {
                timed_out = true;
                let _ = child.kill();
                break child.wait()?;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        Ok(Outcome {
            status: status.to_string(),
            timed_out,
            stdout: out.join().unwrap_or_default(),
            stderr: err.join().unwrap_or_default(),
        })
    }
}

/// What a prompt's `--json` events say.
#[derive(Default)]
pub(crate) struct Events {
    /// The last version of each output, by id, in first-seen order.
    outputs: Vec<(String, Value)>,
    completed: Option<Vec<Value>>,
    pub usage: Option<Value>,
    pub error: Option<String>,
    /// The conversation the prompt belongs to (`-c` continues it).
    pub conversation: Option<String>,
}

impl Events {
    pub(crate) fn read(stdout: &[u8]) -> Self {
        let mut events = Self::default();
        for line in stdout.split(|byte| *byte == b'\n') {
            let Ok(event) = serde_json::from_slice::<Value>(line) else {
                continue;
            };
            let data = &event["data"];
            match event["type"].as_str() {
                Some("prompt.created") => {
                    events.conversation = data["conversationId"].as_str().map(str::to_owned);
                }
                Some("prompt.output") => {
                    let output = data["output"].clone();
                    let id = output["id"].as_str().unwrap_or_default().to_owned();
                    match events.outputs.iter_mut().find(|(seen, _)| *seen == id) {
                        Some(slot) => slot.1 = output,
                        None => events.outputs.push((id, output)),
                    }
                }
                Some("prompt.completed") => {
                    events.completed = data["output"].as_array().cloned();
                    events.usage = Some(data["usage"].clone());
                }
                Some("prompt.error") => {
                    events.error = Some(data["error"].as_str().unwrap_or("failed").to_owned());
                }
                _ => {}
            }
        }
        events
    }

    fn outputs(&self) -> Vec<&Value> {
        match &self.completed {
            Some(outputs) => outputs.iter().collect(),
            None => self.outputs.iter().map(|(_, output)| output).collect(),
        }
    }

    pub(crate) fn answer(&self) -> String {
        self.outputs()
            .into_iter()
            .filter(|output| output["type"] == "text")
            .filter_map(|output| output["content"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub(crate) fn tool_calls(&self, function: &str) -> u64 {
        self.outputs()
            .into_iter()
            .filter(|output| output["type"] == "tool" && output["function"] == function)
            .count() as u64
    }

    fn tool_calls_except(&self, function: &str) -> u64 {
        self.outputs()
            .into_iter()
            .filter(|output| output["type"] == "tool" && output["function"] != function)
            .count() as u64
    }

    /// The errors in the timeline that are [`Mistakes`].
    pub(crate) fn mistakes(&self) -> Mistakes {
        let mut mistakes = Mistakes::default();
        for output in self.outputs() {
            if output["type"] != "tool" {
                continue;
            }
            let Some(error) = output["result"]["error"].as_str() else {
                continue;
            };
            if output["function"] == "code.execute" {
                let code = output["input"]["code"].as_str().unwrap_or_default();
                // The program's own syntax, or a reply refused as JSON or another language;
                // not `JSON.parse` failing on its data, nor prose (an answer in words).
                let refused_as_code = output["result"]["notice"] == "not_a_program"
                    && !error.contains(": it is prose");
                if (error.starts_with("SyntaxError") && !error.contains("JSON")) || refused_as_code
                {
                    mistakes.unparsed += 1;
                } else if let Some(name) = error
                    .strip_prefix("ReferenceError: ")
                    .and_then(|rest| rest.split_once(" is not defined"))
                    .map(|(name, _)| name)
                {
                    // A name that is not there, called (not a variable read).
                    if code.contains(&format!("{name}(")) {
                        mistakes.undefined_calls += 1;
                    }
                } else if error.contains("not a callable function")
                    || error.contains("is not a function")
                {
                    mistakes.undefined_calls += 1;
                }
            } else if error.starts_with("invalid input for")
                && (error.contains("Additional properties") || error.contains("unexpected"))
            {
                mistakes.unknown_fields += 1;
            }
        }
        mistakes
    }

    pub(crate) fn usage_number(&self, key: &str) -> u64 {
        self.usage
            .as_ref()
            .and_then(|usage| usage.get(key))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::checks::{number_matches, numbers_in, weekday_problem};
    use super::*;

    #[test]
    fn numbers_are_read_as_people_write_them() {
        let found = numbers_in("Total: 1,234.50 over 12 files, -3 at 2026-11-23, v2 and 21.33.");
        let values: Vec<f64> = found.iter().map(|(value, _)| *value).collect();
        assert_eq!(values, [1234.5, 12.0, -3.0, 2026.0, 11.0, 23.0, 2.0, 21.33]);
        assert!(number_matches(1234.5, 1234.5, 2));
        assert!(number_matches(21.3, 21.33, 2));
        assert!(!number_matches(21.3, 21.0, 0));
        assert!(!number_matches(30.0, 31.0, 0));
        assert!(number_matches(30.0, 30.0, 1));
        let lists = numbers_in("1,2,3");
        assert_eq!(lists.len(), 3, "{lists:?}");
    }

    #[test]
    fn every_task_in_the_repository_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../eval/tasks");
        let tasks = load_tasks(&dir).unwrap();
        assert!(tasks.len() >= 25, "{} tasks", tasks.len());
        let aggregation = tasks
            .iter()
            .filter(|task| task.kind == Kind::Aggregation)
            .count();
        assert!(aggregation >= 8, "{aggregation} aggregation tasks");
        let heldout = tasks
            .iter()
            .filter(|task| task.split == Split::Heldout)
            .count();
        assert!(3 * heldout >= tasks.len(), "{heldout} held-out tasks");
    }

    #[test]
    fn answers_are_checked_case_insensitively() {
        let check = Check {
            answer_contains: vec!["Sensor-17".into()],
            answer_numbers: vec![98.6],
            answer_excludes: vec!["undefined".into()],
            ..Check::default()
        };
        assert!(check_answer(&check, "sensor-17 read 98.6").is_empty());
        assert_eq!(check_answer(&check, "sensor-17 read undefined").len(), 2);
    }

    #[test]
    fn the_weekday_check_wants_the_right_day_only() {
        use chrono::TimeZone as _;
        // A Tuesday afternoon in Tokyo (08:00 UTC).
        let now = chrono::Utc.with_ymd_and_hms(2026, 11, 24, 8, 0, 0).unwrap();
        assert_eq!(weekday_problem("Asia/Tokyo", "it is tuesday.", now), None);
        assert!(weekday_problem("Asia/Tokyo", "the day is thursday.", now).is_some());
        assert!(weekday_problem("Asia/Tokyo", "tuesday or wednesday", now).is_some());
        assert!(weekday_problem("Asia/Tokyo", "i cannot tell", now).is_some());
        // 15:05 UTC is just past midnight in Tokyo: the day before still counts.
        let midnight = chrono::Utc
            .with_ymd_and_hms(2026, 11, 24, 15, 5, 0)
            .unwrap();
        assert_eq!(weekday_problem("Asia/Tokyo", "tuesday", midnight), None);
        assert_eq!(weekday_problem("Asia/Tokyo", "wednesday", midnight), None);
        assert!(weekday_problem("Mars/Olympus", "tuesday", now).is_some());
    }
}

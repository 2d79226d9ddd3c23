//! `cargo xtask eval`: the real-model eval of `eval/README.md`. Every task of `eval/tasks`
//! runs through the real `agentic` binary against whatever model it is configured for (the
//! embedded one, or `OPENAI_BASE_URL`), in a fresh directory per run, and is judged by its
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
    /// Sampling temperature for the model (`[openai]` and `[local]`); the provider's default
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
/// The model's settings for a run: the temperature, when one is given, for the OpenAI-compatible
/// and the embedded provider, and whether the embedded model decodes under grammars.
pub(crate) fn model_settings(config: &mut toml::Table, temperature: Option<f64>, constrain: bool) {
    if let Some(temperature) = temperature {
        for section in ["openai", "local"] {
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

/// The problems with the answer text (empty when it passes).
pub(crate) fn check_answer(check: &Check, answer: &str) -> Vec<String> {
    let lower = answer.to_lowercase();
    let mut problems = Vec::new();
    for wanted in &check.answer_contains {
        if !lower.contains(&wanted.to_lowercase()) {
            problems.push(format!("the answer does not say \"{wanted}\""));
        }
    }
    if !check.answer_any.is_empty()
        && !check
            .answer_any
            .iter()
            .any(|wanted| lower.contains(&wanted.to_lowercase()))
    {
        problems.push(format!(
            "the answer says none of {}",
            check.answer_any.join(", ")
        ));
    }
    let numbers = numbers_in(answer);
    for wanted in &check.answer_numbers {
        if !numbers
            .iter()
            .any(|(value, decimals)| number_matches(*wanted, *value, *decimals))
        {
            problems.push(format!("the answer does not state {wanted}"));
        }
    }
    for unwanted in &check.answer_excludes {
        if lower.contains(&unwanted.to_lowercase()) {
            problems.push(format!("the answer says \"{unwanted}\""));
        }
    }
    if let Some(zone) = &check.answer_weekday_in {
        problems.extend(weekday_problem(zone, &lower, chrono::Utc::now()));
    }
    problems
}

/// Whether `answer` (lowercase) names the weekday in `zone` at `now`, or ten minutes before
/// (a run that crossed midnight), and no other weekday.
fn weekday_problem(zone: &str, answer: &str, now: chrono::DateTime<chrono::Utc>) -> Option<String> {
    const WEEKDAYS: [&str; 7] = [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ];
    let Ok(tz) = zone.parse::<chrono_tz::Tz>() else {
        return Some(format!("answer_weekday_in names no timezone: \"{zone}\""));
    };
    let today: Vec<String> = [now, now - chrono::Duration::minutes(10)]
        .iter()
        .map(|at| {
            at.with_timezone(&tz)
                .format("%A")
                .to_string()
                .to_lowercase()
        })
        .collect();
    let named: Vec<&str> = WEEKDAYS
        .iter()
        .copied()
        .filter(|day| answer.contains(day))
        .collect();
    let right = !named.is_empty() && named.iter().all(|day| today.iter().any(|t| t == day));
    (!right).then(|| {
        format!(
            "the answer does not name the weekday in {zone} ({})",
            today[0]
        )
    })
}

/// Whether `found` (written with `decimals` digits after the point) states `wanted`: equal, or
/// more precise and rounding to it (21.33 states 21.3).
fn number_matches(wanted: f64, found: f64, decimals: usize) -> bool {
    if (wanted - found).abs() <= 1e-9 * wanted.abs().max(1.0) {
        return true;
    }
    let wanted_decimals = decimals_of(wanted);
    if decimals <= wanted_decimals {
        return false;
    }
    let scale = 10f64.powi(wanted_decimals as i32);
    ((found * scale).round() - (wanted * scale).round()).abs() < 0.5
}

fn decimals_of(value: f64) -> usize {
    let text = format!("{value}");
    text.split_once('.')
        .map_or(0, |(_, fraction)| fraction.len())
}

/// The numbers in a text with how many decimals each was written with: `1,234.50` is 1234.5
/// (2 decimals); a `-` is a sign only where it does not follow a letter or digit.
pub(crate) fn numbers_in(text: &str) -> Vec<(f64, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let mut numbers = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts_number = chars[i].is_ascii_digit()
            && (i == 0 || !(chars[i - 1].is_ascii_digit() || chars[i - 1] == '.'));
        if !starts_number {
            i += 1;
            continue;
        }
        let negative = i > 0 && chars[i - 1] == '-' && (i < 2 || !chars[i - 2].is_alphanumeric());
        let mut digits = String::new();
        let mut decimals = None::<usize>;
        while i < chars.len() {
            let c = chars[i];
            let next_is_digit = chars.get(i + 1).is_some_and(char::is_ascii_digit);
            if c.is_ascii_digit() {
                digits.push(c);
                if let Some(count) = decimals.as_mut() {
                    *count += 1;
                }
            } else if c == ',' && decimals.is_none() && next_is_digit {
                // A thousands separator only when three digits follow.
                let three = chars[i + 1..]
                    .iter()
                    .take_while(|d| d.is_ascii_digit())
                    .count()
                    == 3;
                if !three {
                    break;
                }
            } else if c == '.' && decimals.is_none() && next_is_digit {
                digits.push('.');
                decimals = Some(0);
            } else {
                break;
            }
            i += 1;
        }
        if let Ok(value) = digits.parse::<f64>() {
            numbers.push((if negative { -value } else { value }, decimals.unwrap_or(0)));
        }
    }
    numbers
}

fn check_state(check: &Check, root: &Path, agentic: &Agentic<'_>) -> anyhow::Result<Vec<String>> {
    let mut problems = Vec::new();
    for file in &check.files {
        match std::fs::read_to_string(root.join(&file.path)) {
            Err(_) => problems.push(format!("{} was not written", file.path)),
            Ok(text) => {
                let lower = text.to_lowercase();
                for wanted in &file.contains {
                    if !lower.contains(&wanted.to_lowercase()) {
                        problems.push(format!("{} does not contain \"{wanted}\"", file.path));
                    }
                }
                for unwanted in &file.excludes {
                    if lower.contains(&unwanted.to_lowercase()) {
                        problems.push(format!("{} contains \"{unwanted}\"", file.path));
                    }
                }
            }
        }
    }
    for path in &check.absent {
        if root.join(path).exists() {
            problems.push(format!("{path} exists"));
        }
    }
    for invoke in &check.invoke {
        let output = match agentic.invoke(invoke) {
            Ok(output) => output.to_lowercase(),
            Err(error) => {
                problems.push(format!("{error:#}"));
                continue;
            }
        };
        for wanted in &invoke.contains {
            if !output.contains(&wanted.to_lowercase()) {
                problems.push(format!("{} does not show \"{wanted}\"", invoke.tool));
            }
        }
        for unwanted in &invoke.excludes {
            if output.contains(&unwanted.to_lowercase()) {
                problems.push(format!("{} shows \"{unwanted}\"", invoke.tool));
            }
        }
    }
    Ok(problems)
}

/// Serves a directory on 127.0.0.1 for one run. Flaky: the first request for each path
/// answers 503.
struct FileServer {
    base: String,
    stop: Arc<AtomicBool>,
}

/// The port a task's fixtures are served on: the same in every run, so that the URL in the
/// message, and with it the whole prompt, is the same too. With a new port per run, the
/// same task at temperature 0 took different paths from its first program on (eval round 8).
fn fixture_port(task: &str) -> u16 {
    let hash = task.bytes().fold(2_166_136_261_u32, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(16_777_619)
    });
    41_000 + (hash % 1_000) as u16
}

impl FileServer {
    /// Serves on `port` when it is free, else on any free port.
    fn start(dir: PathBuf, flaky: bool, port: u16) -> anyhow::Result<Self> {
        let listener =
            TcpListener::bind(("127.0.0.1", port)).or_else(|_| TcpListener::bind("127.0.0.1:0"))?;
        let base = format!("http://{}", listener.local_addr()?);
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let seen = Arc::new(Mutex::new(std::collections::HashSet::<String>::new()));
        std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let dir = dir.clone();
                        let seen = seen.clone();
                        std::thread::spawn(move || {
                            let _ = serve(stream, &dir, flaky, &seen);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Ok(Self { base, stop })
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve(
    stream: TcpStream,
    dir: &Path,
    flaky: bool,
    seen: &Mutex<std::collections::HashSet<String>>,
) -> anyhow::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
    }
    let path = request
        .split_whitespace()
        .nth(1)
        .unwrap_or("/")
        .split('?')
        .next()
        .unwrap_or("/")
        .trim_start_matches('/')
        .to_owned();
    let first = seen
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .insert(path.clone());
    let safe = !path.split('/').any(|part| part == ".." || part.is_empty());
    let (status, body, kind) = if flaky && first {
        (
            "503 Service Unavailable",
            b"temporarily unavailable, try again".to_vec(),
            "text/plain",
        )
    } else {
        match std::fs::read(dir.join(&path)) {
            Ok(body) if safe => {
                let kind = if path.ends_with(".json") {
                    "application/json"
                } else {
                    "text/plain; charset=utf-8"
                };
                ("200 OK", body, kind)
            }
            _ => ("404 Not Found", b"not found".to_vec(), "text/plain"),
        }
    };
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    stream.write_all(&body)?;
    Ok(())
}

/// Per task kind and mode: successes out of runs, and medians.
pub(crate) fn summary(reports: &[RunReport], modes: &[String]) -> String {
    let mut text = String::new();
    let median = |mut values: Vec<u64>| -> u64 {
        if values.is_empty() {
            return 0;
        }
        values.sort_unstable();
        values[values.len() / 2]
    };
    text.push_str("| tasks | mode | success | model calls (median) | prompt tokens (median) | completion tokens (median) | wall s (median) | unparsed / undefined calls / unknown fields |\n");
    text.push_str("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    // All, then each split (tuning and held-out apart, always), then each kind.
    type Member = Box<dyn Fn(&RunReport) -> bool>;
    let mut groups: Vec<(&str, Member)> = vec![("all", Box::new(|_: &RunReport| true))];
    for split in [Split::Tuning, Split::Heldout] {
        groups.push((
            split.name(),
            Box::new(move |report: &RunReport| report.split == split),
        ));
    }
    let mut seen: Vec<Kind> = reports.iter().map(|report| report.kind).collect();
    seen.sort();
    seen.dedup();
    for kind in seen {
        groups.push((
            kind.name(),
            Box::new(move |report: &RunReport| report.kind == kind),
        ));
    }
    for (name, member) in &groups {
        for mode in modes {
            let runs: Vec<&RunReport> = reports
                .iter()
                .filter(|report| &report.mode == mode && member(report))
                .collect();
            if runs.is_empty() {
                continue;
            }
            let ok = runs.iter().filter(|report| report.success).count();
            text.push_str(&format!(
                "| {name} | {mode} | {ok}/{} ({:.0}%) | {} | {} | {} | {:.1} | {} / {} / {} |\n",
                runs.len(),
                100.0 * ok as f64 / runs.len() as f64,
                median(runs.iter().map(|r| r.model_calls).collect()),
                median(runs.iter().map(|r| r.prompt_tokens).collect()),
                median(runs.iter().map(|r| r.completion_tokens).collect()),
                median(runs.iter().map(|r| r.wall_ms).collect()) as f64 / 1000.0,
                runs.iter().map(|r| r.mistakes.unparsed).sum::<u64>(),
                runs.iter().map(|r| r.mistakes.undefined_calls).sum::<u64>(),
                runs.iter().map(|r| r.mistakes.unknown_fields).sum::<u64>(),
            ));
        }
    }
    text.push_str("\n| task | mode | result | model calls | prompt tokens | iterations | tool calls | wall s | failure |\n");
    text.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    let mut by_task: BTreeMap<(&str, &str), Vec<&RunReport>> = BTreeMap::new();
    for report in reports {
        by_task
            .entry((&report.task, &report.mode))
            .or_default()
            .push(report);
    }
    for ((task, mode), runs) in by_task {
        let ok = runs.iter().filter(|report| report.success).count();
        let failures: Vec<String> = runs
            .iter()
            .filter(|report| !report.success)
            .map(|report| format!("{}: {}", report.failure, one_line(&report.detail, 60)))
            .collect();
        text.push_str(&format!(
            "| {task} | {mode} | {ok}/{} | {} | {} | {} | {} | {:.1} | {} |\n",
            runs.len(),
            median(runs.iter().map(|r| r.model_calls).collect()),
            median(runs.iter().map(|r| r.prompt_tokens).collect()),
            median(runs.iter().map(|r| r.iterations).collect()),
            median(runs.iter().map(|r| r.tool_calls).collect()),
            median(runs.iter().map(|r| r.wall_ms).collect()) as f64 / 1000.0,
            failures.join("; ").replace('|', "\\|"),
        ));
    }
    text
}

#[cfg(test)]
mod tests {
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

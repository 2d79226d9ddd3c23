//! `cargo xtask eval --suite bfcl[:category]`: the Berkeley Function Calling Leaderboard (v4)
//! through agentic, as an outside yardstick. BFCL's tasks, simulated APIs and checkers come
//! from its `bfcl-eval` package (`eval/bfcl/requirements.txt`); `eval/bfcl/server.py` serves a
//! task's functions to agentic as the tools of an MCP server and records the calls, and
//! `eval/bfcl/driver.py` scores them with BFCL's own checker code, unchanged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::eval::{Agentic, Events, one_line, set};

/// BFCL's categories this suite runs: four judged by its AST checker, one by its multi-turn
/// state and response checker.
pub(crate) const CATEGORIES: &[&str] = &[
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "multi_turn_base",
];

/// The `bfcl-eval` release whose tasks and checkers are used (pinned in
/// `eval/bfcl/requirements.txt`).
pub(crate) const PACKAGE_VERSION: &str = "2026.3.23";

/// Tasks per category when `--limit` is not given: a run of the whole suite in both modes
/// then takes one to two hours with the embedded model on a CPU (`--limit 0` runs every
/// task).
pub(crate) const DEFAULT_LIMIT: usize = 5;

/// Plugins whose tools a BFCL run goes without: the model sees the task's functions only, as
/// in BFCL (`interpreter` is classic mode's `interpreter.run-code`; code mode runs without it).
const LEFT_OUT: &[&str] = &[
    "artifact",
    "fs",
    "interpreter",
    "memory",
    "script",
    "shell",
    "time",
    "todo",
    "trigger",
    "web",
];

pub(crate) struct Options {
    pub binary: PathBuf,
    pub modes: Vec<String>,
    pub categories: Vec<String>,
    /// The first `limit` tasks of each category; 0 for all.
    pub limit: usize,
    /// Per prompt (a multi-turn task makes one prompt per turn).
    pub timeout: Duration,
    pub temperature: Option<f64>,
    /// Whether the embedded model decodes under the request's grammar (`[local] constrain`).
    pub constrain: bool,
    pub out: PathBuf,
}

/// What one task in one mode came to.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TaskReport {
    pub category: String,
    pub task: String,
    pub mode: String,
    /// BFCL's checker found the calls right.
    pub valid: bool,
    /// `ok`, `checker` (BFCL's checker said no), `timeout`, `error` or `crash`.
    pub failure: String,
    /// The checker's error type and message, or what went wrong in the run.
    pub detail: String,
    /// Calls of the task's functions that reached the server.
    pub calls: u64,
    pub turns: usize,
    pub model_calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub wall_ms: u64,
    pub model: String,
}

/// `--suite bfcl` is every category; `--suite bfcl:multiple,parallel` the ones named.
pub(crate) fn categories_of(suite: &str) -> anyhow::Result<Vec<String>> {
    let Some(rest) = suite.strip_prefix("bfcl") else {
        bail!("unknown suite {suite}; the suites are bfcl and bfcl:<category>");
    };
    let Some(named) = rest.strip_prefix(':') else {
        if rest.is_empty() {
            return Ok(CATEGORIES.iter().map(|c| (*c).to_owned()).collect());
        }
        bail!("unknown suite {suite}; the suites are bfcl and bfcl:<category>");
    };
    let mut categories = Vec::new();
    for category in named.split(',').map(str::trim).filter(|c| !c.is_empty()) {
        if !CATEGORIES.contains(&category) {
            bail!(
                "unknown BFCL category {category}; the categories are {}",
                CATEGORIES.join(", ")
            );
        }
        categories.push(category.to_owned());
    }
    if categories.is_empty() {
        bail!("--suite bfcl: names no category");
    }
    Ok(categories)
}

/// Whether BFCL's package, its checkers' few dependencies and the MCP SDK import.
pub(crate) fn installed() -> bool {
    Command::new("python3")
        .args([
            "-c",
            "import bfcl_eval.utils, mpmath, mcp.server.lowlevel, mcp_types",
        ])
        .output()
        .is_ok_and(|output| output.status.success())
}

/// Makes sure BFCL's package, its checkers' few dependencies and the MCP SDK are there,
/// installing the pinned versions with pip when they are not.
pub(crate) fn ensure_installed(root: &Path) -> anyhow::Result<()> {
    if installed() {
        return Ok(());
    }
    println!("eval: installing BFCL's package (eval/bfcl/requirements.txt) with pip");
    let requirements = root.join("eval/bfcl/requirements.txt");
    let installs: [Vec<&str>; 2] = [
        vec!["-m", "pip", "install", "--quiet", "mcp==2.3.0"],
        vec![
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "-r",
            requirements.to_str().context("a path that is not UTF-8")?,
        ],
    ];
    for arguments in installs {
        let status = Command::new("python3")
            .args(&arguments)
            .status()
            .context("could not run python3")?;
        if !status.success() {
            bail!("python3 {} failed", arguments.join(" "));
        }
    }
    if !installed() {
        bail!("BFCL's package does not import after installing eval/bfcl/requirements.txt");
    }
    Ok(())
}

/// `cargo xtask eval --suite bfcl…`: BFCL's tasks through agentic, scored by BFCL's checkers.
/// With `require_completed`, a run that did not complete (timeout, error, crash) is an error;
/// the checker's verdict is not.
pub(crate) fn eval(options: &Options, require_completed: bool) -> anyhow::Result<()> {
    let limit = match options.limit {
        0 => "every task".to_owned(),
        limit => format!("the first {limit} tasks"),
    };
    println!(
        "eval: BFCL {} ({limit} of each) × {} against {}; runs in {}",
        options.categories.join(", "),
        options.modes.join(" and "),
        crate::provider(),
        options.out.display()
    );
    let reports = run_all(options)?;
    let model = reports
        .iter()
        .map(|report| report.model.as_str())
        .find(|model| !model.is_empty())
        .unwrap_or("unknown");
    let header = format!(
        "BFCL v4 (bfcl-eval {}), {limit} of each category, scored by BFCL's own checkers. \
         Model: {model} ({}, {}). Machine: {}. At unix time {}.\n\n",
        PACKAGE_VERSION,
        crate::provider(),
        crate::sampling(options.temperature, options.constrain),
        crate::machine(),
        crate::unix_time()?,
    );
    let published = Published::load(&crate::workspace_root())?;
    let table = format!(
        "{header}{}\n{}\n{}",
        by_category(&reports, &options.modes),
        published.table(&options.categories),
        by_task(&reports)
    );
    std::fs::write(options.out.join("report.md"), &table)?;
    println!(
        "\n{table}\nwritten to {}",
        options.out.join("report.md").display()
    );
    let incomplete: Vec<String> = reports
        .iter()
        .filter(|report| !report.valid && report.failure != "checker")
        .map(|report| format!("{} ({}): {}", report.task, report.mode, report.detail))
        .collect();
    if require_completed && !incomplete.is_empty() {
        bail!("--require-completed: {}", incomplete.join("; "));
    }
    Ok(())
}

pub(crate) fn run_all(options: &Options) -> anyhow::Result<Vec<TaskReport>> {
    let root = crate::workspace_root();
    let root = root.as_path();
    std::fs::create_dir_all(&options.out)?;
    let mut log = std::fs::File::create(options.out.join("runs.jsonl"))?;
    let mut reports = Vec::new();
    // Mode by mode, as the task eval does: the model's cached prompt carries over.
    for mode in &options.modes {
        for category in &options.categories {
            for task in load_tasks(root, category, options.limit)? {
                let dir = options.out.join(format!("{}-{mode}", task.id));
                let report = run_task(root, category, &task, mode, &dir, options)
                    .with_context(|| format!("{} ({mode})", task.id))?;
                println!(
                    "{:<24} {:<8} {:<4} calls {:>2}  model calls {:>2}  {:>6.1} s  {}",
                    task.id,
                    mode,
                    if report.valid { "ok" } else { "FAIL" },
                    report.calls,
                    report.model_calls,
                    report.wall_ms as f64 / 1000.0,
                    one_line(&report.detail, 90),
                );
                use std::io::Write as _;
                writeln!(log, "{}", serde_json::to_string(&report)?)?;
                reports.push(report);
            }
        }
    }
    Ok(reports)
}

/// Per category and mode: BFCL's accuracy (tasks its checker passed, of those run), then per
/// task.
/// Accuracy and medians per category and mode.
fn by_category(reports: &[TaskReport], modes: &[String]) -> String {
    let median = |mut values: Vec<u64>| -> u64 {
        values.sort_unstable();
        values.get(values.len() / 2).copied().unwrap_or(0)
    };
    let mut text = String::from(
        "| category | mode | accuracy | model calls (median) | prompt tokens (median) | wall s (median) |\n\
         | --- | --- | --- | --- | --- | --- |\n",
    );
    for category in CATEGORIES {
        for mode in modes {
            let runs: Vec<&TaskReport> = reports
                .iter()
                .filter(|report| report.category == *category && &report.mode == mode)
                .collect();
            if runs.is_empty() {
                continue;
            }
            let valid = runs.iter().filter(|report| report.valid).count();
            text.push_str(&format!(
                "| {category} | {mode} | {valid}/{} ({:.0}%) | {} | {} | {:.1} |\n",
                runs.len(),
                100.0 * valid as f64 / runs.len() as f64,
                median(runs.iter().map(|r| r.model_calls).collect()),
                median(runs.iter().map(|r| r.prompt_tokens).collect()),
                median(runs.iter().map(|r| r.wall_ms).collect()) as f64 / 1000.0,
            ));
        }
    }
    text
}

/// One row per task and mode, with why it failed.
fn by_task(reports: &[TaskReport]) -> String {
    let mut text = String::from(
        "| task | mode | result | calls | model calls | wall s | failure |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    let mut by_task: BTreeMap<(&str, &str), &TaskReport> = BTreeMap::new();
    for report in reports {
        by_task.insert((&report.task, &report.mode), report);
    }
    for ((task, mode), report) in by_task {
        let failure = if report.valid {
            String::new()
        } else {
            format!("{}: {}", report.failure, one_line(&report.detail, 100))
        };
        text.push_str(&format!(
            "| {task} | {mode} | {} | {} | {} | {:.1} | {} |\n",
            if report.valid { "ok" } else { "FAIL" },
            report.calls,
            report.model_calls,
            report.wall_ms as f64 / 1000.0,
            failure.replace('|', "\\|"),
        ));
    }
    text
}

/// The leaderboard's published figures for the nearest entries to the embedded model
/// (`eval/bfcl/published.toml`, which says where they come from).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Published {
    source: String,
    entry: Vec<PublishedEntry>,
}

#[derive(Debug, Deserialize)]
struct PublishedEntry {
    model: String,
    #[serde(flatten)]
    scores: BTreeMap<String, f64>,
}

impl Published {
    pub(crate) fn load(root: &Path) -> anyhow::Result<Self> {
        let path = root.join("eval/bfcl/published.toml");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let published: Self =
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        for entry in &published.entry {
            if let Some(unknown) = entry
                .scores
                .keys()
                .find(|key| !CATEGORIES.contains(&key.as_str()))
            {
                bail!(
                    "{}: {} gives `{unknown}`, which is no category of this suite",
                    path.display(),
                    entry.model
                );
            }
        }
        Ok(published)
    }

    /// The published figures for `categories`, one row per entry, to read beside the run's.
    pub(crate) fn table(&self, categories: &[String]) -> String {
        let mut text = format!(
            "Published ({}), % of each whole category:\n\n| model |",
            self.source
        );
        for category in categories {
            text.push_str(&format!(" {category} |"));
        }
        text.push_str("\n| --- |");
        text.push_str(&" --- |".repeat(categories.len()));
        for entry in &self.entry {
            text.push_str(&format!("\n| {} |", entry.model));
            for category in categories {
                match entry.scores.get(category) {
                    Some(score) => text.push_str(&format!(" {score:.2} |")),
                    None => text.push_str(" – |"),
                }
            }
        }
        text.push('\n');
        text
    }
}

/// One BFCL task as `driver.py tasks` lists it: its id and the user's message per turn.
#[derive(Debug, Deserialize)]
struct Task {
    id: String,
    turns: Vec<String>,
}

/// What `driver.py score` says of a run's calls.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Score {
    valid: bool,
    error_type: String,
    error: String,
    calls: u64,
}

fn driver(root: &Path) -> PathBuf {
    root.join("eval/bfcl/driver.py")
}

fn load_tasks(root: &Path, category: &str, limit: usize) -> anyhow::Result<Vec<Task>> {
    let output = Command::new("python3")
        .arg(driver(root))
        .args([
            "tasks",
            "--category",
            category,
            "--limit",
            &limit.to_string(),
        ])
        .output()
        .context("could not run python3")?;
    if !output.status.success() {
        bail!(
            "driver.py tasks --category {category} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).with_context(|| format!("not a task: {line}")))
        .collect()
}

/// The run's `agentic.toml`: the task's MCP server, told which turn its calls belong to, and
/// no everyday tools.
fn write_config(
    root: &Path,
    category: &str,
    task: &Task,
    turn: usize,
    dir: &Path,
    options: &Options,
) -> anyhow::Result<PathBuf> {
    let mut config = toml::Table::new();
    config.insert(
        "leaveOut".into(),
        toml::Value::Array(LEFT_OUT.iter().map(|p| toml::Value::from(*p)).collect()),
    );
    let server = root.join("eval/bfcl/server.py");
    let args = [
        server.to_string_lossy().into_owned(),
        "--category".into(),
        category.into(),
        "--id".into(),
        task.id.clone(),
        "--run-dir".into(),
        dir.to_string_lossy().into_owned(),
        "--turn".into(),
        turn.to_string(),
    ];
    let mut bfcl = toml::Table::new();
    bfcl.insert("command".into(), "python3".into());
    bfcl.insert(
        "args".into(),
        toml::Value::Array(args.into_iter().map(toml::Value::from).collect()),
    );
    let mut servers = toml::Table::new();
    servers.insert("bfcl".into(), toml::Value::Table(bfcl));
    set(&mut config, "mcp", "servers", toml::Value::Table(servers));
    crate::eval::model_settings(&mut config, options.temperature, options.constrain);
    let path = dir.join("agentic.toml");
    std::fs::write(&path, toml::to_string(&config)?)?;
    Ok(path)
}

fn run_task(
    root: &Path,
    category: &str,
    task: &Task,
    mode: &str,
    dir: &Path,
    options: &Options,
) -> anyhow::Result<TaskReport> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    let mut report = TaskReport {
        category: category.to_owned(),
        task: task.id.clone(),
        mode: mode.to_owned(),
        valid: false,
        failure: String::new(),
        detail: String::new(),
        calls: 0,
        turns: task.turns.len(),
        model_calls: 0,
        prompt_tokens: 0,
        completion_tokens: 0,
        wall_ms: 0,
        model: String::new(),
    };
    let mut conversation: Option<String> = None;
    let mut problem: Option<(&str, String)> = None;
    let started = Instant::now();
    for (turn, message) in task.turns.iter().enumerate() {
        if message.trim().is_empty() {
            continue;
        }
        let config = write_config(root, category, task, turn, dir, options)?;
        let agentic = Agentic {
            binary: &options.binary,
            dir,
            config: &config,
            database: format!("sqlite://{}?mode=rwc", dir.join("db.sqlite").display()),
        };
        let outcome = agentic.prompt_in(message, mode, conversation.as_deref(), options.timeout)?;
        std::fs::write(dir.join(format!("events-{turn}.jsonl")), &outcome.stdout)?;
        std::fs::write(dir.join(format!("stderr-{turn}.txt")), &outcome.stderr)?;
        let events = Events::read(&outcome.stdout);
        report.model_calls += events.usage_number("modelCalls");
        report.prompt_tokens += events.usage_number("inputTokens");
        report.completion_tokens += events.usage_number("outputTokens");
        if let Some(model) = events
            .usage
            .as_ref()
            .and_then(|usage| usage.get("model"))
            .and_then(Value::as_str)
        {
            report.model = model.to_owned();
        }
        if outcome.timed_out {
            problem = Some((
                "timeout",
                format!(
                    "turn {turn}: no answer within {} s",
                    options.timeout.as_secs()
                ),
            ));
        } else if let Some(error) = &events.error {
            problem = Some(("error", format!("turn {turn}: {error}")));
        } else if events.usage.is_none() {
            problem = Some((
                "crash",
                format!(
                    "turn {turn}: agentic exited with {} and no prompt.completed: {}",
                    outcome.status,
                    one_line(String::from_utf8_lossy(&outcome.stderr).trim(), 300)
                ),
            ));
        }
        // A turn that failed leaves the conversation where it was; BFCL would stop the task.
        match (&problem, events.conversation) {
            (None, Some(id)) => conversation = Some(id),
            _ => break,
        }
    }
    report.wall_ms = started.elapsed().as_millis() as u64;
    let score = score(root, category, &task.id, dir)?;
    report.valid = score.valid;
    report.calls = score.calls;
    (report.failure, report.detail) = match (score.valid, problem) {
        (true, _) => ("ok".into(), String::new()),
        (false, Some((kind, detail))) => (kind.into(), detail),
        (false, None) => (
            "checker".into(),
            format!("{}: {}", score.error_type, score.error),
        ),
    };
    Ok(report)
}

fn score(root: &Path, category: &str, task: &str, dir: &Path) -> anyhow::Result<Score> {
    let output = Command::new("python3")
        .arg(driver(root))
        .args(["score", "--category", category, "--id", task, "--run-dir"])
        .arg(dir)
        .output()
        .context("could not run python3")?;
    std::fs::write(dir.join("score.json"), &output.stdout)?;
    if !output.status.success() {
        bail!(
            "driver.py score {task} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    serde_json::from_slice(&output.stdout).context("driver.py score printed no score")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_published_figures_load_and_are_shown_per_category() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let published = Published::load(&root).unwrap();
        let table = published.table(&["multiple".to_owned(), "multi_turn_base".to_owned()]);
        assert!(
            table.contains("| model | multiple | multi_turn_base |"),
            "{table}"
        );
        assert!(
            table.contains("| Qwen2.5-1.5B-Instruct (FC) | 87.00 | 4.00 |"),
            "{table}"
        );
        for entry in &published.entry {
            assert_eq!(entry.scores.len(), CATEGORIES.len(), "{}", entry.model);
        }
    }

    #[test]
    fn suites_name_categories() {
        assert_eq!(categories_of("bfcl").unwrap().len(), CATEGORIES.len());
        assert_eq!(
            categories_of("bfcl:multiple,multi_turn_base").unwrap(),
            ["multiple", "multi_turn_base"]
        );
        assert!(categories_of("bfcl:live_simple").is_err());
        assert!(categories_of("bfclx").is_err());
        assert!(categories_of("bfcl:").is_err());
    }

    /// BFCL's own ground truth scores as right and no calls as wrong, in every category: the
    /// harness reads BFCL's tasks and answers as its checkers expect.
    #[test]
    fn bfcl_ground_truth_passes_its_checkers() {
        if !installed() {
            assert!(
                std::env::var("AGENTIC_REQUIRE_BFCL").as_deref() != Ok("1"),
                "AGENTIC_REQUIRE_BFCL=1 but BFCL's package does not import"
            );
            eprintln!("skipped: python3 -m pip install --no-deps -r eval/bfcl/requirements.txt");
            return;
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for category in CATEGORIES {
            let output = Command::new("python3")
                .arg(driver(&root))
                .args(["selfcheck", "--category", category, "--limit", "3"])
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
            let result: Value = serde_json::from_slice(&output.stdout).unwrap();
            assert_eq!(result["tasks"], 3, "{category}: {result}");
            assert_eq!(
                result["problems"],
                serde_json::json!([]),
                "{category}: {result}"
            );
        }
    }

    #[test]
    fn the_pinned_package_is_the_one_reports_name() {
        let requirements =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../eval/bfcl/requirements.txt");
        let text = std::fs::read_to_string(requirements).unwrap();
        assert!(
            text.lines()
                .any(|line| line.trim() == format!("bfcl-eval=={PACKAGE_VERSION}")),
            "{text}"
        );
    }
}

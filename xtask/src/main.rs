//! Project tasks: `cargo xtask ci` runs everything CI checks; `cargo xtask deps` checks the
//! dependency invariants from `docs/architecture.md`.

mod bench;
mod bfcl;
mod conformance;
mod eval;
mod new_plugin;
mod setup;
mod standalone;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};
use bench::{bench_api, bench_playground, bench_sandbox, bench_takeover, cargo_bench};

/// Crates `agentic-core` must never depend on (normal dependencies).
const FORBIDDEN_IN_CORE: &[&str] = &["reqwest", "axum", "hyper", "sea-orm", "sqlx", "boa_engine"];

fn main() -> anyhow::Result<()> {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    match arguments.first().map(String::as_str) {
        Some("ci") => match arguments.get(1).map(String::as_str) {
            Some("--no-setup") => ci(&root),
            None => setup::then_ci(&root),
            Some(other) => bail!("cargo xtask ci takes --no-setup only, not {other}"),
        },
        Some("deps") => check_core_dependencies(&root),
        Some("new-plugin") => match arguments.get(1) {
            Some(flag) if flag == "--standalone" => standalone::command(&root, &arguments[2..]),
            Some(name) => {
                // AGENTIC_WORKSPACE points at another checkout (the test uses a scratch copy).
                let target = std::env::var_os("AGENTIC_WORKSPACE")
                    .map_or_else(|| root.clone(), PathBuf::from);
                new_plugin::new_plugin(&target, name)
            }
            None => {
                eprintln!(
                    "usage: cargo xtask new-plugin <name>\n       cargo xtask new-plugin --standalone <dir> [--name <name>] [--agentic <path>]"
                );
                std::process::exit(2);
            }
        },
        Some("standalone-check") => standalone::check(&root),
        Some("eval") => eval(&root, &arguments[1..]),
        Some("web") => web(
            &root,
            arguments.get(1).map(String::as_str) == Some("--check"),
        ),
        Some("conformance") => {
            run(&root, "cargo", &["build", "--package", "agentic-cli"], &[])?;
            conformance::conformance(&root, &root.join("target/debug/agentic"))
        }
        Some("bench") => match arguments.get(1).map(String::as_str) {
            Some("sandbox") => bench_sandbox(&root),
            Some("tokens") => {
                cargo_bench(&root, "agentic-interpreter", "tokens")?;
                cargo_bench(&root, "agentic-plugin-mcp", "tokens")
            }
            Some("fairness") => cargo_bench(&root, "agentic-interpreter", "fairness"),
            Some("plan") => cargo_bench(&root, "agentic-interpreter", "plan"),
            Some("store") => cargo_bench(&root, "agentic-conversation", "store"),
            Some("relay") => cargo_bench(&root, "agentic-conversation", "relay"),
            Some("api") => bench_api(&root, &arguments[2..]),
            Some("local") => cargo_bench(&root, "agentic-plugin-local", "local"),
            Some("mcp") => cargo_bench(&root, "agentic-plugin-mcp", "mcp"),
            Some("playground") => bench_playground(&root),
            Some("takeover") => bench_takeover(&root),
            Some("replay") => cargo_bench(&root, "agentic-conversation", "replay"),
            Some("providers") => cargo_bench(&root, "agentic-conformance", "providers"),
            Some("record") => cargo_bench(&root, "agentic-api", "record"),
            _ => {
                eprintln!(
                    "usage: cargo xtask bench <sandbox|tokens|fairness|plan|store|relay|api|local|mcp|playground|takeover|replay|providers|record>"
                );
                std::process::exit(2);
            }
        },
        _ => {
            eprintln!(
                "usage: cargo xtask <task>\n\n\
                 tasks:\n  \
                 eval   the real-model eval of eval/README.md (both modes, every task)\n  \
                 ci [--no-setup]   set up what the tests need (.ci/setup), then the format check,\n                  clippy -D warnings, docs, invariants, packaging, every test\n  \
                 conformance   the MCP conformance suite against agentic's MCP server and client\n  \
                 deps   check that agentic-core depends on no HTTP, database or JS engine crate\n  \
                 web [--check]   build the playground into crates/api/web/dist (or check it is current)\n  \
                 new-plugin <name>   a new tool plugin crate, wired into the workspace and the binary\n  \
                 new-plugin --standalone <dir>   a plugin crate of its own outside this workspace, on `agentic` alone\n  \
                 standalone-check   make one in a temporary directory, run its tests and its example\n  \
                 bench sandbox   sandbox overhead, ours beside the seed's QuickJS (needs node, npm)\n  \
                 bench tokens    model calls and prompt tokens, classic against code mode (also over 120 MCP tools)\n  \
                 bench fairness  one user's scripts beside another user's endless loops\n  \
                 bench store     conversation store on SQLite and PostgreSQL (AGENTIC_TEST_POSTGRES_URL)\n  \
                 bench relay     events from one server to another through PostgreSQL (AGENTIC_TEST_POSTGRES_URL)\n  \
                 bench api [--baseline REV | --replicas]   1,000 concurrent prompts against `agentic serve`\n                  and a fake model, spans without and with an OTLP exporter (and REV's build beside);\n                  with --replicas, one server against three on one PostgreSQL\n  \
                 bench local     the embedded local model: prompt and generation tokens/s, memory\n  \
                 bench mcp       an MCP tool call through agentic against the SDK's own call, stdio and HTTP\n  \
                 bench playground   the playground in headless Chromium: assets, redraws of a 1,000-output\n                  timeline, first paint of 100 prompts (needs chromium, chromium-driver)\n  \
                 bench takeover  21 kills of a server in mixed modes: time to take its prompts over by lease\n  \
                 bench replay    a code-mode script's 1,000 calls replayed from its journal, beside running them\n  \
                 bench providers   each HTTP provider's cost per streamed event, beside a bare read of the same bytes\n  \
                 bench record    a 1,000-call prompt exported as a test case, and replayed beside running its calls"
            );
            std::process::exit(2);
        }
    }
}

/// A full build and test run writes about 11 GB under `target/` (a clean clone, line tables on;
/// `.ci/run` turns them off); a disk that fills up mid-way
/// makes the linker die with a bus error that names no cause, so the space is said first.
fn report_free_space(root: &Path) {
    let output = Command::new("df").args(["-Pk"]).arg(root).output();
    let free_kb = output.ok().and_then(|output| {
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        text.lines()
            .nth(1)?
            .split_whitespace()
            .nth(3)?
            .parse::<u64>()
            .ok()
    });
    if let Some(free_kb) = free_kb {
        let free_gb = free_kb / (1024 * 1024);
        println!("xtask ci: {free_gb} GB free where target/ is");
        if free_gb < 14 {
            println!(
                "xtask ci: warning: a full run writes about 11 GB under target/; with {free_gb} GB free \
                 the build may run out of space (the linker then dies with a bus error)"
            );
        }
    }
}

fn ci(root: &Path) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    report_free_space(root);
    run(root, "cargo", &["fmt", "--all", "--check"], &[])?;
    run(
        root,
        "cargo",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    check_core_dependencies(root)?;
    // Every doc link resolves and no public doc names a private item.
    run(
        root,
        "cargo",
        &["doc", "--workspace", "--no-deps", "--locked"],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )?;
    // The playground the binary embeds must be what its sources and lockfile build.
    if root.join("crates/api/web/node_modules").exists() || std::env::var_os("CI").is_some() {
        web(root, true)?;
    } else {
        println!("xtask ci: skipped the playground's build check (npm ci --prefix crates/api/web)");
    }
    // A missing or changed snapshot fails instead of being written.
    run(
        root,
        "cargo",
        &["test", "--workspace", "--locked"],
        &[("INSTA_UPDATE", "no"), ("CI", "true")],
    )?;
    // A plugin crate outside this workspace, from the template, against this checkout.
    standalone::check(root)?;
    // Every crate but xtask packages, in dependency order, against the others' packages. Not
    // built again from the packages (that is 15 minutes on 2 cores): what a package could lack,
    // a file its sources include from outside the crate, is a tidy check (invariant 45).
    run(
        root,
        "cargo",
        &[
            "package",
            "--workspace",
            "--exclude",
            "xtask",
            "--locked",
            "--allow-dirty",
            "--no-verify",
        ],
        &[],
    )?;
    // The MCP conformance suite, against the binary the tests built.
    let suite_installed = root
        .join("crates/plugins/mcp/tests/conformance/node_modules/.bin/conformance")
        .exists();
    if suite_installed || std::env::var("AGENTIC_REQUIRE_MCP_SERVERS").is_ok_and(|v| v == "1") {
        conformance::conformance(root, &root.join("target/debug/agentic"))?;
    } else {
        println!(
            "xtask ci: skipped the MCP conformance suite (npm ci --prefix crates/plugins/mcp/tests/conformance)"
        );
    }
    // The eval's smoke run: one task through the whole harness with the embedded model (the
    // debug binary the tests built; its model loops are optimised in every profile).
    if std::env::var_os("OPENAI_BASE_URL").is_none() && std::env::var_os("OPENAI_API_KEY").is_none()
    {
        let arguments: Vec<String> = [
            "--binary",
            "target/debug/agentic",
            "--modes",
            "code",
            "--tasks",
            "count-photos",
            "--timeout",
            "300",
            "--out",
            "target/eval/ci-smoke",
            "--require-success",
        ]
        .map(str::to_owned)
        .to_vec();
        eval(root, &arguments)?;
        // BFCL's smoke run: its first simple_python task in code mode, served by BFCL's
        // functions over MCP and scored by its checker. It must run and be scored; the
        // checker's verdict is the model's business.
        if bfcl::installed() {
            let arguments: Vec<String> = [
                "--suite",
                "bfcl:simple_python",
                "--limit",
                "1",
                "--binary",
                "target/debug/agentic",
                "--modes",
                "code",
                "--timeout",
                "300",
                "--out",
                "target/eval/ci-bfcl",
                "--require-completed",
            ]
            .map(str::to_owned)
            .to_vec();
            eval(root, &arguments)?;
        } else if std::env::var("AGENTIC_REQUIRE_BFCL").is_ok_and(|v| v == "1") {
            bail!(
                "AGENTIC_REQUIRE_BFCL=1 but BFCL's package does not import (.ci/run installs it)"
            );
        } else {
            println!(
                "xtask ci: skipped BFCL's smoke run (python3 -m pip install --no-deps -r eval/bfcl/requirements.txt)"
            );
        }
    } else {
        println!("xtask ci: the eval's smoke run is for the embedded model; a provider is set");
    }
    println!(
        "xtask ci: all checks passed in {} s",
        started.elapsed().as_secs()
    );
    Ok(())
}

/// Builds the playground (`crates/api/web`, see its `build.mjs`) into `dist/`, which
/// `agentic-api` embeds; with `check`, fails when the committed `dist/` is not what it builds.
fn web(root: &Path, check: bool) -> anyhow::Result<()> {
    let dir = root.join("crates/api/web");
    if !dir.join("node_modules").exists() {
        bail!("the playground's packages are not installed: npm ci --prefix crates/api/web");
    }
    let mut arguments = vec!["build.mjs"];
    if check {
        arguments.push("--check");
    }
    run(&dir, "node", &arguments, &[])
}

/// The invariant of `docs/architecture.md`: the contract crate stays free of HTTP clients and
/// servers, databases and the JS engine.
/// Test support, which only dev-dependencies may pull in: none of it may reach the binary.
const FORBIDDEN_IN_BINARY: &[&str] = &["agentic-testing", "insta"];

/// Invariants 1 and 17: what `agentic-core` and the `agentic` binary must not depend on.
fn check_core_dependencies(root: &Path) -> anyhow::Result<()> {
    for (package, forbidden) in [
        ("agentic-core", FORBIDDEN_IN_CORE),
        ("agentic-cli", FORBIDDEN_IN_BINARY),
    ] {
        let found = normal_dependencies_among(root, package, forbidden)?;
        if !found.is_empty() {
            bail!("{package} must not depend on {}", found.join(", "));
        }
        println!(
            "xtask deps: {package} depends on none of {}",
            forbidden.join(", ")
        );
    }
    // Invariant 20: plugins meet through agentic-core, never through each other.
    let mut plugins: Vec<String> = std::fs::read_dir(root.join("crates/plugins"))?
        .filter_map(Result::ok)
        .filter(|entry| entry.path().join("Cargo.toml").exists())
        .map(|entry| format!("agentic-plugin-{}", entry.file_name().to_string_lossy()))
        .collect();
    plugins.sort();
    let names: Vec<&str> = plugins.iter().map(String::as_str).collect();
    for plugin in &plugins {
        let others: Vec<&str> = names
            .iter()
            .copied()
            .filter(|name| name != plugin)
            .collect();
        let found = normal_dependencies_among(root, plugin, &others)?;
        if !found.is_empty() {
            bail!(
                "{plugin} must not depend on another plugin: {}",
                found.join(", ")
            );
        }
    }
    println!(
        "xtask deps: no plugin depends on another ({} plugins)",
        plugins.len()
    );
    Ok(())
}

/// Which of `names` are among `package`'s normal dependencies, direct or not.
fn normal_dependencies_among<'a>(
    root: &Path,
    package: &str,
    names: &[&'a str],
) -> anyhow::Result<Vec<&'a str>> {
    let output = Command::new("cargo")
        .current_dir(root)
        .args(["tree", "-p", package, "-e", "normal", "--prefix", "none"])
        .output()
        .context("could not run cargo tree")?;
    if !output.status.success() {
        bail!(
            "cargo tree failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let tree = String::from_utf8_lossy(&output.stdout);
    Ok(names
        .iter()
        .copied()
        .filter(|name| {
            tree.lines()
                .any(|line| line.split_whitespace().next() == Some(*name))
        })
        .collect())
}

pub(crate) fn run(
    root: &Path,
    program: &str,
    arguments: &[&str],
    env: &[(&str, &str)],
) -> anyhow::Result<()> {
    println!("$ {program} {}", arguments.join(" "));
    let started = std::time::Instant::now();
    let status = Command::new(program)
        .current_dir(root)
        .args(arguments)
        .envs(env.iter().copied())
        .status()
        .with_context(|| format!("could not start {program}"))?;
    // What each step took, so that a CI run that grows says where.
    println!(
        "$ {program} {}: {} s",
        arguments.join(" "),
        started.elapsed().as_secs()
    );
    if !status.success() {
        bail!("{program} {} failed ({status})", arguments.join(" "));
    }
    Ok(())
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// `cargo xtask eval [--modes classic,code] [--tasks ids-kinds-or-splits] [--runs N] [--timeout S]
/// [--temperature T] [--out DIR] [--binary PATH] [--unconstrained]`, or with `--suite bfcl[:categories]
/// [--limit N]` BFCL's tasks instead of ours.
fn eval(root: &Path, arguments: &[String]) -> anyhow::Result<()> {
    let mut modes = vec!["classic".to_owned(), "code".to_owned()];
    let mut only: Option<Vec<String>> = None;
    let mut runs = 1;
    let mut timeout = 600;
    let mut out: Option<PathBuf> = None;
    let mut binary: Option<PathBuf> = None;
    let mut temperature: Option<f64> = None;
    let mut constrain = true;
    let mut require_success = false;
    let mut suite: Option<String> = None;
    let mut require_completed = false;
    let mut limit: Option<usize> = None;
    let mut rest = arguments.iter();
    while let Some(flag) = rest.next() {
        let mut value = || {
            rest.next()
                .cloned()
                .with_context(|| format!("{flag} needs a value"))
        };
        let list = |text: String| -> Vec<String> {
            text.split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(str::to_owned)
                .collect()
        };
        match flag.as_str() {
            "--modes" => modes = list(value()?),
            "--tasks" => only = Some(list(value()?)),
            "--runs" => runs = value()?.parse().context("--runs takes a number")?,
            "--timeout" => timeout = value()?.parse().context("--timeout takes seconds")?,
            "--out" => out = Some(PathBuf::from(value()?)),
            "--binary" => binary = Some(PathBuf::from(value()?)),
            "--require-success" => require_success = true,
            "--suite" => suite = Some(value()?),
            "--require-completed" => require_completed = true,
            "--unconstrained" => constrain = false,
            "--limit" => limit = Some(value()?.parse().context("--limit takes a number")?),
            "--temperature" => {
                let value: f64 = value()?.parse().context("--temperature takes a number")?;
                anyhow::ensure!(
                    value.is_finite() && value >= 0.0,
                    "--temperature must be 0 or more"
                );
                temperature = Some(value);
            }
            other => bail!(
                "unknown option {other}; usage: cargo xtask eval [--modes classic,code] \
                 [--tasks ids-kinds-or-splits] [--runs N] [--timeout SECONDS] [--temperature T] \
                 [--out DIR] [--binary PATH] [--require-success] [--suite bfcl[:categories]] \
                 [--limit N] [--require-completed] [--unconstrained]"
            ),
        }
    }
    if let Some(suite) = suite {
        anyhow::ensure!(
            only.is_none() && runs == 1 && !require_success,
            "--tasks, --runs and --require-success are for the task eval, not --suite"
        );
        let categories = bfcl::categories_of(&suite)?;
        bfcl::ensure_installed(root)?;
        let options = bfcl::Options {
            binary: agentic_binary(root, binary)?,
            modes,
            categories,
            limit: limit.unwrap_or(bfcl::DEFAULT_LIMIT),
            timeout: std::time::Duration::from_secs(timeout),
            temperature,
            constrain,
            out: output_dir(root, out, unix_time()?)?,
        };
        return bfcl::eval(&options, require_completed);
    }
    anyhow::ensure!(
        limit.is_none() && !require_completed,
        "--limit and --require-completed are for --suite bfcl"
    );
    let mut tasks = eval::load_tasks(&root.join("eval/tasks"))?;
    if let Some(only) = &only {
        tasks.retain(|task| {
            only.iter().any(|wanted| {
                *wanted == task.id
                    || format!("{:?}", task.kind).eq_ignore_ascii_case(wanted)
                    || format!("{:?}", task.split).eq_ignore_ascii_case(wanted)
            })
        });
        if tasks.is_empty() {
            bail!("no task matches {}", only.join(", "));
        }
    }
    let binary = agentic_binary(root, binary)?;
    let stamp = unix_time()?;
    let out = output_dir(root, out, stamp)?;
    let provider = provider();
    println!(
        "eval: {} tasks × {} × {runs} run(s) against {provider}; runs in {}",
        tasks.len(),
        modes.join(" and "),
        out.display()
    );
    let options = eval::Options {
        binary,
        modes: modes.clone(),
        runs,
        timeout: std::time::Duration::from_secs(timeout),
        temperature,
        constrain,
        out: out.clone(),
    };
    let reports = eval::run_all(&tasks, &options)?;
    let model = reports
        .iter()
        .map(|report| report.model.as_str())
        .find(|model| !model.is_empty())
        .unwrap_or("unknown");
    let header = format!(
        "Model: {model} ({provider}, {}). Machine: {}. {} tasks, {runs} run(s) each, at unix time {stamp}.\n\n",
        sampling(temperature, constrain),
        machine(),
        tasks.len()
    );
    let table = format!("{header}{}", eval::summary(&reports, &modes));
    std::fs::write(out.join("report.md"), &table)?;
    println!("\n{table}\nwritten to {}", out.join("report.md").display());
    let failed: Vec<String> = reports
        .iter()
        .filter(|report| !report.success)
        .map(|report| format!("{} ({}): {}", report.task, report.mode, report.failure))
        .collect();
    if require_success && !failed.is_empty() {
        bail!("--require-success: failed {}", failed.join("; "));
    }
    Ok(())
}

/// The `agentic` binary to run: the one given, or a release build of this checkout.
fn agentic_binary(root: &Path, binary: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match binary {
        Some(binary) => std::fs::canonicalize(&binary)
            .with_context(|| format!("no agentic binary at {}", binary.display())),
        None => {
            run(
                root,
                "cargo",
                &["build", "--release", "--locked", "--package", "agentic-cli"],
                &[],
            )?;
            Ok(root.join("target/release/agentic"))
        }
    }
}

/// The eval's output directory, absolute (each run's agentic starts in its own directory);
/// `target/eval/<unix time>` unless one is given.
fn output_dir(root: &Path, out: Option<PathBuf>, stamp: u64) -> anyhow::Result<PathBuf> {
    let out = out.unwrap_or_else(|| root.join(format!("target/eval/{stamp}")));
    Ok(if out.is_absolute() {
        out
    } else {
        std::env::current_dir()?.join(out)
    })
}

fn unix_time() -> anyhow::Result<u64> {
    Ok(std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs())
}

/// Which model provider the runs' agentic uses, as the report names it.
fn provider() -> String {
    std::env::var("OPENAI_BASE_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .map_or_else(
            || "the embedded local model".to_owned(),
            |url| format!("the OpenAI-compatible server at {url}"),
        )
}

fn sampling(temperature: Option<f64>, constrain: bool) -> String {
    let temperature = temperature.map_or_else(
        || "the provider's default temperature".to_owned(),
        |temperature| format!("temperature {temperature}"),
    );
    if constrain {
        format!("{temperature}, grammars on")
    } else {
        format!("{temperature}, grammars off")
    }
}

/// The CPU and its cores, for a report.
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, name)| name.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    format!("{cpu}, {cores} cores")
}

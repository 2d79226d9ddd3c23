//! The invariants of docs/architecture.md that are facts about the source tree, checked the
//! way rust-analyzer's tidy test does: by reading the files. `cargo xtask ci` runs it with the
//! other tests.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every file under `dir` whose name ends with `suffix`.
fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|name| name != "target") {
                    pending.push(path);
                }
            } else if path.to_string_lossy().ends_with(suffix) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// Every crate directory of the workspace (those with a Cargo.toml under `crates/`).
fn crates() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = files(&workspace().join("crates"), "Cargo.toml")
        .into_iter()
        .filter_map(|manifest| manifest.parent().map(Path::to_path_buf))
        .collect();
    dirs.push(workspace().join("xtask"));
    dirs
}

/// The `.rs` files under `dir` (relative to the workspace) that contain any of `needles`.
fn files_mentioning(dir: &str, needles: &[&str]) -> Vec<String> {
    files(&workspace().join(dir), ".rs")
        .into_iter()
        .filter(|file| {
            let text = std::fs::read_to_string(file).unwrap();
            needles.iter().any(|needle| text.contains(needle))
        })
        .map(|file| relative(&file))
        .collect()
}

fn relative(path: &Path) -> String {
    path.strip_prefix(workspace())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Invariant 9: every library forbids `unsafe` at its root, on top of the workspace lint.
#[test]
fn every_library_forbids_unsafe_code() {
    // The one exception: the inference engine's VNNI loops, called after the CPU check.
    const EXCEPTION: &str = "crates/inference";
    let missing: Vec<String> = crates()
        .iter()
        .map(|dir| dir.join("src/lib.rs"))
        .filter(|lib| lib.exists())
        .filter(|lib| {
            let text = std::fs::read_to_string(lib).unwrap();
            if relative(lib).starts_with(EXCEPTION) {
                !text.contains("#![deny(unsafe_code)]")
            } else {
                !text.contains("#![forbid(unsafe_code)]")
            }
        })
        .map(|lib| relative(&lib))
        .collect();
    assert!(
        missing.is_empty(),
        "no #![forbid(unsafe_code)] in {missing:?}"
    );
    let unsafe_files: Vec<String> = files_mentioning("crates", &["unsafe {"])
        .into_iter()
        .filter(|file| file.ends_with(".rs"))
        .collect();
    assert_eq!(unsafe_files, vec![format!("{EXCEPTION}/src/tiles.rs")]);
    let tiles = std::fs::read_to_string(workspace().join(EXCEPTION).join("src/tiles.rs")).unwrap();
    assert_eq!(
        tiles.matches("unsafe {").count(),
        tiles.matches("// SAFETY:").count(),
        "every unsafe block in tiles.rs has its SAFETY comment"
    );
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
    assert!(manifest.contains("unsafe_code = \"forbid\""));
}

/// Invariant 6: the contract crate knows no mode by name.
#[test]
fn core_knows_no_execution_mode() {
    let mentions = files_mentioning("crates/core/src", &["\"code.execute\"", "boa_engine"]);
    assert!(mentions.is_empty(), "core names code mode in {mentions:?}");
}

/// Invariant 40: inside `agentic-core`, the contract (`src/contract/`) names nothing of the
/// runtime (`src/runtime/`): not its modules, not what it exports. A plugin, a mode or a
/// provider can be read against the contract alone.
#[test]
fn the_contract_names_nothing_of_the_runtime() {
    let core = workspace().join("crates/core/src");
    let runtime = std::fs::read_to_string(core.join("runtime/mod.rs")).unwrap();
    let lib = std::fs::read_to_string(core.join("lib.rs")).unwrap();
    // The runtime's modules, as paths: `runtime::`, `classic::`, …
    let mut names: Vec<String> = vec!["runtime::".to_owned()];
    for line in runtime.lines() {
        let line = line.trim();
        if let Some(module) = line
            .strip_prefix("pub mod ")
            .or_else(|| line.strip_prefix("mod "))
            .and_then(|rest| rest.strip_suffix(';'))
        {
            names.push(format!("{module}::"));
        }
    }
    // What the crate re-exports from the runtime (but its modules, named above), as words.
    let mut words: Vec<String> = Vec::new();
    for export in lib.split("pub use runtime::").skip(1) {
        let export = export.split(';').next().unwrap();
        let items = export.trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let word = item.rsplit("::").next().unwrap().trim();
            if !word.is_empty() && !names.contains(&format!("{word}::")) {
                words.push(word.to_owned());
            }
        }
    }
    assert!(
        words.iter().any(|word| word == "PromptService"),
        "read the runtime's exports from lib.rs: {words:?}"
    );
    let mut found = Vec::new();
    for file in files(&core.join("contract"), ".rs") {
        let text = std::fs::read_to_string(&file).unwrap();
        for (number, line) in text.lines().enumerate() {
            let named = names.iter().any(|name| line.contains(name.as_str()))
                || line
                    .split(|c: char| !c.is_alphanumeric() && c != '_')
                    .any(|word| words.iter().any(|export| export == word));
            if named {
                found.push(format!(
                    "{}:{}: {}",
                    relative(&file),
                    number + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the contract names the runtime:\n{}",
        found.join("\n")
    );
}

/// Invariant 41: one takeover policy for every mode. What a call left unfinished by a
/// stopped process becomes (run again, or closed as taken over) is decided only in
/// `crates/core/src/runtime/takeover.rs`; the legacy reader only classifies old rows.
#[test]
fn one_takeover_policy() {
    let allowed = [
        "crates/core/src/runtime/takeover.rs",
        "crates/core/src/contract/legacy.rs",
    ];
    let mut found = Vec::new();
    for dir in crates() {
        for file in files(&dir.join("src"), ".rs") {
            let name = relative(&file);
            if allowed.contains(&name.as_str()) {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for (number, line) in code.lines().enumerate() {
                // Deciding: a TakenOver result made, or idempotency asked of a tool set.
                if line.contains("ErrorKind::TakenOver") || line.contains("tools.idempotent(") {
                    found.push(format!("{name}:{}: {}", number + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "takeover decided outside runtime/takeover.rs:\n{}",
        found.join("\n")
    );
}

/// Invariant 42: the JavaScript engine knows nothing of models. Explanations for a model
/// reach it through its one hook (`Explain`); its own code, before its tests, names none of
/// code mode's modules for models.
#[test]
fn the_engine_knows_nothing_of_models() {
    let model_side = [
        "crate::mode",
        "crate::prompt",
        "crate::rules",
        "crate::prose",
        "crate::explain",
        "crate::history",
        "crate::got",
        "crate::grammar",
    ];
    let mut found = Vec::new();
    for file in files(&workspace().join("crates/interpreter/src/engine"), ".rs") {
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (number, line) in code.lines().enumerate() {
            if model_side.iter().any(|module| line.contains(module)) {
                found.push(format!(
                    "{}:{}: {}",
                    relative(&file),
                    number + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the engine names code mode's model side:\n{}",
        found.join("\n")
    );
}

/// Invariant 10: only the writer (and the migration runner, and the read-only snapshot) opens
/// database transactions.
#[test]
fn only_the_writer_opens_transactions() {
    let openers = files_mentioning(
        "crates/conversation/src",
        &["begin_with_options", ".begin()"],
    );
    let allowed = [
        "crates/conversation/src/writes.rs",
        "crates/conversation/src/migration.rs",
        "crates/conversation/src/store/snapshot.rs",
    ];
    let others: Vec<&String> = openers
        .iter()
        .filter(|file| !allowed.contains(&file.as_str()))
        .collect();
    assert!(
        others.is_empty(),
        "transactions opened outside the writer: {others:?}"
    );
}

/// Dependencies a crate lists only for a feature or a link, never by name in its code.
const USED_WITHOUT_A_NAME: &[(&str, &str)] = &[];

/// Every normal dependency of every crate is named in that crate's code: an unused one only
/// costs build time and audit surface.
#[test]
fn every_dependency_is_used() {
    let mut unused = Vec::new();
    for dir in crates() {
        let manifest: toml::Table = std::fs::read_to_string(dir.join("Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap();
        let package = manifest["package"]["name"].as_str().unwrap().to_owned();
        let Some(dependencies) = manifest.get("dependencies").and_then(toml::Value::as_table)
        else {
            continue;
        };
        let mut code = String::new();
        for file in files(&dir.join("src"), ".rs")
            .into_iter()
            .chain(files(&dir.join("benches"), ".rs"))
            .chain(std::iter::once(dir.join("build.rs")).filter(|build| build.exists()))
        {
            code.push_str(&std::fs::read_to_string(file).unwrap());
        }
        for name in dependencies.keys() {
            let crate_name = dependencies[name]
                .get("package")
                .and_then(toml::Value::as_str)
                .unwrap_or(name)
                .replace('-', "_");
            let alias = name.replace('-', "_");
            let named = [crate_name.as_str(), alias.as_str()].iter().any(|used| {
                code.contains(&format!("{used}::"))
                    || code.contains(&format!("use {used}"))
                    || code.contains(&format!("{used} as _"))
                    || code.contains(&format!("extern crate {used}"))
                    || code.contains(&format!("#[{used}("))
                    || code.contains(&format!("{used}!"))
            });
            let excused = USED_WITHOUT_A_NAME
                .iter()
                .any(|(owner, dependency)| *owner == package && dependency == name);
            if !named && !excused {
                unused.push(format!("{package}: {name}"));
            }
        }
    }
    assert!(unused.is_empty(), "unused dependencies: {unused:?}");
}

/// Invariant 36: what happens next (resuming, taking over, counting a rule's notices) is
/// decided by the kinds and names stored with a result, never by its words. Only the legacy
/// reader of rows written before kinds existed compares words.
#[test]
fn no_behaviour_reads_stored_words() {
    // The words written into timelines today: compared anywhere, a rewording would change how
    // a previous release's prompts resume.
    let stored = [
        "_TOOL_ERROR",
        "rejection_error",
        "Rejected by user",
        "\"running\"",
        "NOT_RUN",
        "REFUSED",
        "REPEATED",
        "ASKED_AFRESH",
        "UNSAID",
        "NOTHING_SHOWN",
        "\"not run",
    ];
    let compares = [
        "==",
        "!=",
        "starts_with(",
        "strip_prefix(",
        "contains(",
        "ends_with(",
    ];
    let mut found = Vec::new();
    for dir in crates() {
        for file in files(&dir.join("src"), ".rs") {
            if file.ends_with("core/src/contract/legacy.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            // The unit tests at the end of a file may say what was written.
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for (number, line) in code.lines().enumerate() {
                if stored.iter().any(|word| line.contains(word))
                    && compares.iter().any(|compare| line.contains(compare))
                {
                    found.push(format!(
                        "{}:{}: {}",
                        relative(&file),
                        number + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "stored words compared to decide behaviour:\n{}",
        found.join("\n")
    );
}

/// Issue 36's target: no source file outside tests is over 800 lines (a file's unit tests,
/// after `#[cfg(test)]`, do not count). The exceptions may not grow; each says why it is one.
#[test]
fn no_source_file_is_over_800_lines() {
    const LIMIT: usize = 800;
    // (file, its lines now, why)
    const EXCEPTIONS: &[(&str, usize, &str)] = &[(
        "crates/inference/src/kernels.rs",
        1444,
        "the quantised products, one per block format and instruction set, checked against \
             one reference: read and changed together",
    )];
    let mut over = Vec::new();
    for dir in crates() {
        for file in files(&dir.join("src"), ".rs") {
            let text = std::fs::read_to_string(&file).unwrap();
            let lines = text
                .lines()
                .take_while(|line| !line.starts_with("#[cfg(test)]"))
                .count();
            let name = relative(&file);
            let allowed = EXCEPTIONS
                .iter()
                .find(|(path, _, _)| *path == name)
                .map_or(LIMIT, |(_, lines, _)| *lines);
            if lines > allowed {
                over.push(format!("{name}: {lines} lines (at most {allowed})"));
            }
        }
    }
    assert!(
        over.is_empty(),
        "source files too long:\n{}",
        over.join("\n")
    );
}

/// Invariant 45: every crate but `xtask` can be published. It says what it is (description,
/// licence, keywords, a README), names the workspace crates it depends on with the exact
/// version they are released at, and names them in dev-dependencies by path alone, which cargo
/// drops from the published manifest (the test-only cycles stay home). `cargo package` in
/// `cargo xtask ci` checks the rest.
#[test]
fn every_crate_can_be_published() {
    let workspace_manifest: toml::Table = std::fs::read_to_string(workspace().join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let mut problems = Vec::new();
    let shared = &workspace_manifest["workspace"]["dependencies"];
    for (name, entry) in shared.as_table().unwrap() {
        if name == "agentic" || name.starts_with("agentic-") {
            let version = entry.get("version").and_then(|v| v.as_str()).unwrap_or("");
            if !version.starts_with('=') {
                problems.push(format!(
                    "[workspace.dependencies] {name}: version = \"={version}\""
                ));
            }
        }
    }
    for dir in crates() {
        if dir.ends_with("xtask") {
            continue;
        }
        let manifest: toml::Table = std::fs::read_to_string(dir.join("Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap();
        let package = manifest["package"].as_table().unwrap();
        let name = package["name"].as_str().unwrap().to_owned();
        for field in ["description", "license", "keywords", "readme"] {
            if !package.contains_key(field) {
                problems.push(format!("{name}: no {field}"));
            }
        }
        if package
            .get("publish")
            .is_some_and(|publish| publish.as_bool() == Some(false))
        {
            problems.push(format!("{name}: publish = false"));
        }
        if !dir.join("README.md").exists() {
            problems.push(format!("{name}: no README.md"));
        }
        if let Some(dev) = manifest.get("dev-dependencies").and_then(|d| d.as_table()) {
            for (dependency, entry) in dev {
                let ours = dependency == "agentic" || dependency.starts_with("agentic-");
                let versioned = entry.get("version").is_some()
                    || entry
                        .get("workspace")
                        .is_some_and(|w| w.as_bool() == Some(true));
                if ours && versioned {
                    problems.push(format!(
                        "{name}: dev-dependency {dependency} by path alone, without a version"
                    ));
                }
            }
        }
    }
    // A package holds its crate's folder only: a file its library or binary includes from
    // outside it would be missing when the package is built on its own. (Its tests may read
    // the repository: they are not run from a package.)
    for dir in crates() {
        for file in files(&dir.join("src"), ".rs") {
            let text = std::fs::read_to_string(&file).unwrap();
            for (at, _) in text.match_indices("include_") {
                let rest = &text[at..];
                let Some(open) = rest.find("!(\"") else {
                    continue;
                };
                if open > "include_bytes".len() {
                    continue;
                }
                let path = &rest[open + 3..];
                let Some(close) = path.find('"') else {
                    continue;
                };
                let included = file.parent().unwrap().join(&path[..close]);
                let included = normalise(&included);
                if !included.starts_with(&dir) {
                    problems.push(format!(
                        "{} includes {}, outside its crate",
                        relative(&file),
                        &path[..close]
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "not publishable:\n{}",
        problems.join("\n")
    );
}

/// `path` with its `..` and `.` resolved, without reading the file system.
fn normalise(path: &Path) -> PathBuf {
    let mut parts = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::CurDir => {}
            other => parts.push(other),
        }
    }
    parts
}

/// Invariant 46: every provider crate that speaks HTTP has a row in the conformance table.
#[test]
fn every_http_provider_runs_the_conformance_table() {
    let root = workspace();
    let table = std::fs::read_to_string(root.join("crates/conformance/tests/providers.rs"))
        .expect("the conformance table");
    let manifest = std::fs::read_to_string(root.join("crates/conformance/Cargo.toml"))
        .expect("the conformance manifest");
    let mut http_providers = Vec::new();
    for dir in crates() {
        let Ok(text) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        let Ok(parsed) = text.parse::<toml::Table>() else {
            continue;
        };
        let name = parsed["package"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let speaks_http = parsed
            .get("dependencies")
            .and_then(toml::Value::as_table)
            .is_some_and(|deps| deps.contains_key("agentic-wire"));
        if speaks_http && name.starts_with("agentic-plugin-") {
            http_providers.push(name);
        }
    }
    assert!(!http_providers.is_empty(), "no HTTP provider found");
    let missing: Vec<&String> = http_providers
        .iter()
        .filter(|name| {
            let path = name.replace('-', "_");
            !table.contains(&format!("{path}::")) || !manifest.contains(name.as_str())
        })
        .collect();
    assert!(
        missing.is_empty(),
        "these providers speak HTTP but have no row in crates/conformance/tests/providers.rs: {missing:?}"
    );
}

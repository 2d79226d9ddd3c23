//! Docs that cannot drift: every path, `file:line`, test named beside its file, `cargo xtask`
//! command and `cargo test -p` package that `docs/` and the README name in inline code exists
//! (invariant 37).

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The documents checked: the README and every page of `docs/`.
fn documents() -> Vec<PathBuf> {
    let mut found = vec![workspace().join("README.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(workspace().join("docs"))
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "md"))
        .collect();
    pages.sort();
    found.extend(pages);
    found
}

/// A span of inline code, with the line it is on and the text that follows it on that line
/// (and the next, for a parenthesis that runs on).
struct Span {
    line: usize,
    code: String,
    after: String,
}

/// The inline code spans of a Markdown text, fenced blocks left out.
fn spans(text: &str) -> Vec<Span> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut fenced = false;
    for (index, line) in lines.iter().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let parts: Vec<&str> = line.split('`').collect();
        // Odd parts are code when the backticks pair up on the line.
        if parts.len().is_multiple_of(2) {
            continue;
        }
        for (number, part) in parts.iter().enumerate() {
            if !number.is_multiple_of(2) && !part.is_empty() {
                let mut after = parts[number + 1..].join("`");
                for next in lines.iter().skip(index + 1).take(2) {
                    after.push('\n');
                    after.push_str(next);
                }
                found.push(Span {
                    line: index + 1,
                    code: part.trim().to_owned(),
                    after,
                });
            }
        }
    }
    found
}

/// `code` as a workspace path with an optional `:line` (or `:line-line`), if it is one.
fn as_path(code: &str) -> Option<(String, Option<usize>)> {
    const ROOTS: [&str; 5] = ["crates/", "docs/", "eval/", "xtask/", ".ci/"];
    let code = code.split(' ').next()?;
    if !ROOTS.iter().any(|root| code.starts_with(root))
        || code.contains(['<', '*', '{', '…'])
        || !code
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:".contains(c))
    {
        return None;
    }
    let (path, line) = match code.split_once(':') {
        Some((path, line)) => (path, line.split('-').next()?.parse().ok()),
        None => (code, None),
    };
    Some((path.trim_end_matches(['/', '.']).to_owned(), line))
}

/// The test names in the parenthesis right after a `.rs` path: `path` (`name`, `other…`).
/// Names with fewer than three underscores are other words (error codes, fields).
fn names_after(after: &str) -> Vec<String> {
    let Some(rest) = after.trim_start().strip_prefix('(') else {
        return Vec::new();
    };
    let inside = rest.split(')').next().unwrap_or_default();
    inside
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|name| {
            name.matches('_').count() >= 3
                && name
                    .trim_end_matches('…')
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
        .map(str::to_owned)
        .collect()
}

/// The workspace's package names.
fn packages() -> Vec<String> {
    let mut names = Vec::new();
    let mut pending = vec![workspace().join("crates"), workspace().join("xtask")];
    while let Some(dir) = pending.pop() {
        let manifest = dir.join("Cargo.toml");
        if let Ok(text) = std::fs::read_to_string(&manifest)
            && let Ok(value) = text.parse::<toml::Table>()
            && let Some(name) = value
                .get("package")
                .and_then(|package| package.get("name"))
                .and_then(toml::Value::as_str)
        {
            names.push(name.to_owned());
        }
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() && !path.ends_with("node_modules") && !path.ends_with("target") {
                pending.push(path);
            }
        }
    }
    names
}

#[test]
fn what_the_docs_name_exists() {
    let root = workspace();
    let xtask = std::fs::read_to_string(root.join("xtask/src/main.rs")).unwrap();
    let packages = packages();
    let mut wrong = Vec::new();
    for document in documents() {
        let text = std::fs::read_to_string(&document).unwrap();
        let page = document.file_name().unwrap().to_string_lossy().into_owned();
        for span in spans(&text) {
            let at = format!("{page}:{}: `{}`", span.line, span.code);
            if let Some((path, line)) = as_path(&span.code) {
                // A crate `cargo xtask new-plugin <name>` would create, as an example.
                let example = path
                    .strip_prefix("crates/plugins/")
                    .is_some_and(|name| text.contains(&format!("new-plugin {name}")));
                let file = root.join(&path);
                if !file.exists() {
                    if !example {
                        wrong.push(format!("{at}: no such path"));
                    }
                    continue;
                }
                if let Some(line) = line {
                    let lines = std::fs::read_to_string(&file).unwrap().lines().count();
                    if line == 0 || line > lines {
                        wrong.push(format!("{at}: {path} has {lines} lines"));
                    }
                }
                if path.ends_with(".rs") {
                    let source = std::fs::read_to_string(&file).unwrap();
                    for name in names_after(&span.after) {
                        let found = match name.strip_suffix('…') {
                            Some(start) => source.contains(&format!("fn {start}")),
                            None => source.contains(&format!("fn {name}(")),
                        };
                        if !found {
                            wrong.push(format!("{at}: no test `{name}` in it"));
                        }
                    }
                }
            }
            if let Some(command) = span.code.strip_prefix("cargo xtask ") {
                let sub = command.split(' ').next().unwrap_or_default();
                if !sub.starts_with('<') && !xtask.contains(&format!("\"{sub}\"")) {
                    wrong.push(format!("{at}: no xtask command `{sub}`"));
                }
            }
            if let Some((_, rest)) = span.code.split_once("cargo test -p ") {
                let package = rest.split(' ').next().unwrap_or_default();
                if !packages.iter().any(|name| name == package) {
                    wrong.push(format!("{at}: no package `{package}`"));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the docs name what is not there:\n{}",
        wrong.join("\n")
    );
}

//! Where a command runs and what it sees: the working directory, kept under the base
//! directory, and the environment, which carries no secrets of the runtime.

use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};

use agentic_core::ToolError;

/// The real directory for `requested` (relative to `base`, or absolute), refusing anything
/// outside the base: `..` that climbs out, an absolute path elsewhere, or a symbolic link that
/// leads out. `None` or an empty string is the base itself.
pub fn resolve_working_directory(
    base: &Path,
    requested: Option<&str>,
) -> Result<PathBuf, ToolError> {
    let real_base = base.canonicalize().map_err(|error| {
        ToolError::failed(format!(
            "the base directory \"{}\" is not usable: {error}",
            base.display()
        ))
    })?;
    let Some(requested) = requested
        .map(str::trim)
        .filter(|requested| !requested.is_empty())
    else {
        return Ok(real_base);
    };
    if requested.contains('\0') {
        return Err(ToolError::failed(
            "workingDirectory contains a NUL character",
        ));
    }
    if requested.starts_with('~') {
        return Err(ToolError::failed(format!(
            "workingDirectory \"{requested}\" starts with \"~\", which is not expanded; give a path relative to the base directory"
        )));
    }
    let outside = || {
        ToolError::failed(format!(
            "workingDirectory \"{requested}\" is outside the base directory; commands run in the base directory or below it"
        ))
    };
    let absolute_base = std::path::absolute(base).unwrap_or_else(|_| real_base.clone());
    let wanted = real_base.join(requested);
    let lexical = lexically_normal(&wanted).ok_or_else(outside)?;
    if !lexical.starts_with(&real_base) && !lexical.starts_with(&absolute_base) {
        return Err(outside());
    }
    let real = wanted.canonicalize().map_err(|error| {
        if error.kind() == std::io::ErrorKind::NotFound {
            ToolError::failed(format!("workingDirectory \"{requested}\" does not exist"))
        } else {
            ToolError::failed(format!(
                "cannot use workingDirectory \"{requested}\": {error}"
            ))
        }
    })?;
    if !real.starts_with(&real_base) {
        return Err(ToolError::failed(format!(
            "workingDirectory \"{requested}\" leads out of the base directory through a symbolic link"
        )));
    }
    if !real.is_dir() {
        return Err(ToolError::failed(format!(
            "workingDirectory \"{requested}\" is not a directory"
        )));
    }
    Ok(real)
}

/// `directory` as shown to the model: relative to the base, `.` for the base itself.
pub fn shown_relative_to_base(base: &Path, directory: &Path) -> String {
    let real_base = base.canonicalize().unwrap_or_else(|_| base.to_path_buf());
    match directory.strip_prefix(&real_base) {
        Ok(relative) if relative.as_os_str().is_empty() => ".".to_owned(),
        Ok(relative) => relative.to_string_lossy().into_owned(),
        Err(_) => directory.to_string_lossy().into_owned(),
    }
}

/// Variables a command gets from the runtime's own environment, when set there. Everything
/// else (API keys, tokens, the runtime's own settings) stays out unless `passEnv` names it.
const INHERITED: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR",
];

/// Set for every command: no colours, no pagers, no prompts for passwords that nobody can type.
const FIXED: &[(&str, &str)] = &[
    ("TERM", "dumb"),
    ("NO_COLOR", "1"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("SYSTEMD_PAGER", "cat"),
    ("GIT_TERMINAL_PROMPT", "0"),
];

const FALLBACK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The child's whole environment, built from the runtime's (`parent`): the inherited names,
/// the locale (`LC_*`), the names in `pass`, then the fixed settings.
pub fn child_environment(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    pass: &[String],
) -> Vec<(OsString, OsString)> {
    let mut environment: Vec<(OsString, OsString)> = parent
        .into_iter()
        .filter(|(name, _)| {
            let name = name.to_string_lossy();
            INHERITED.contains(&name.as_ref())
                || name.starts_with("LC_")
                || pass.iter().any(|passed| *passed == name)
        })
        .filter(|(name, _)| !FIXED.iter().any(|(fixed, _)| OsStr::new(fixed) == name))
        .collect();
    if !environment.iter().any(|(name, _)| name == "PATH") {
        environment.push(("PATH".into(), FALLBACK_PATH.into()));
    }
    environment.extend(
        FIXED
            .iter()
            .map(|(name, value)| (OsString::from(name), OsString::from(value))),
    );
    environment.sort();
    environment
}

/// Checks a `passEnv` name. The runtime's own credentials never reach a command, and
/// variables that make the shell or the loader run other code would let an allowed command
/// run anything.
pub fn check_passed_variable(name: &str) -> Result<(), String> {
    let well_formed = name
        .chars()
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !well_formed {
        return Err(format!(
            "passEnv entry \"{}\" is not a variable name",
            name.escape_debug()
        ));
    }
    let upper = name.to_ascii_uppercase();
    if upper.starts_with("AGENTIC_") || upper.starts_with("OPENAI_") {
        return Err(format!(
            "passEnv entry \"{name}\" is one of the runtime's own settings or credentials, which commands never get"
        ));
    }
    if matches!(
        upper.as_str(),
        "ENV" | "BASH_ENV" | "LD_PRELOAD" | "LD_AUDIT" | "LD_LIBRARY_PATH"
    ) {
        return Err(format!(
            "passEnv entry \"{name}\" would make the shell or the loader run other code before each command"
        ));
    }
    Ok(())
}

/// `path` with `.` and `..` applied without touching the filesystem; `None` when `..` climbs
/// above the root.
fn lexically_normal(path: &Path) -> Option<PathBuf> {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                if !normal.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    Some(normal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("base");
        std::fs::create_dir_all(base.join("src/deep")).unwrap();
        std::fs::write(base.join("file.txt"), "x").unwrap();
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        (dir, base)
    }

    fn error(base: &Path, requested: &str) -> String {
        resolve_working_directory(base, Some(requested))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn directories_under_the_base_are_found() {
        let (_dir, base) = base();
        let real_base = base.canonicalize().unwrap();
        for (requested, expected) in [
            (None, real_base.clone()),
            (Some(""), real_base.clone()),
            (Some("."), real_base.clone()),
            (Some("src"), real_base.join("src")),
            (Some("./src/deep/"), real_base.join("src/deep")),
            (Some("src/deep/.."), real_base.join("src")),
            (Some("src/../src/deep"), real_base.join("src/deep")),
        ] {
            assert_eq!(
                resolve_working_directory(&base, requested).unwrap(),
                expected,
                "{requested:?}"
            );
        }
        let absolute_inside = real_base.join("src").to_string_lossy().into_owned();
        assert_eq!(
            resolve_working_directory(&base, Some(&absolute_inside)).unwrap(),
            real_base.join("src")
        );
        assert_eq!(shown_relative_to_base(&base, &real_base), ".");
        assert_eq!(
            shown_relative_to_base(&base, &real_base.join("src/deep")),
            "src/deep"
        );
    }

    #[test]
    fn directories_outside_the_base_are_refused() {
        let (dir, base) = base();
        let outside_absolute = dir.path().join("outside").to_string_lossy().into_owned();
        for requested in [
            "..",
            "../outside",
            "src/../../outside",
            "../../../../../../../../etc",
            "/",
            "/etc",
            outside_absolute.as_str(),
            "../base-not-really",
        ] {
            let message = error(&base, requested);
            assert!(
                message.contains("outside the base directory"),
                "{requested}: {message}"
            );
        }
        assert!(error(&base, "~/x").contains("not expanded"));
        assert!(error(&base, "missing").contains("does not exist"));
        assert!(error(&base, "file.txt").contains("is not a directory"));
        assert!(error(&base, "a\0b").contains("NUL"));
    }

    #[test]
    fn symbolic_links_out_of_the_base_are_refused() {
        let (dir, base) = base();
        std::os::unix::fs::symlink(dir.path().join("outside"), base.join("exit")).unwrap();
        std::os::unix::fs::symlink(dir.path(), base.join("up")).unwrap();
        std::os::unix::fs::symlink(base.join("src"), base.join("inner")).unwrap();
        for requested in ["exit", "up/outside", "up/base/../outside"] {
            let message = error(&base, requested);
            assert!(message.contains("symbolic link"), "{requested}: {message}");
        }
        // A link that stays inside is fine, and resolves to where it points.
        assert_eq!(
            resolve_working_directory(&base, Some("inner")).unwrap(),
            base.canonicalize().unwrap().join("src")
        );
    }

    #[test]
    fn a_missing_base_is_reported() {
        let (dir, _base) = base();
        let message = resolve_working_directory(&dir.path().join("nope"), None)
            .unwrap_err()
            .to_string();
        assert!(message.contains("the base directory"), "{message}");
    }

    #[test]
    fn the_environment_keeps_secrets_out_and_turns_colours_off() {
        let parent = [
            ("PATH", "/opt/bin:/usr/bin"),
            ("HOME", "/home/ada"),
            ("LC_ALL", "C.UTF-8"),
            ("OPENAI_API_KEY", "sk-secret"),
            ("AGENTIC_API_TOKEN", "token-secret"),
            ("AWS_SECRET_ACCESS_KEY", "aws-secret"),
            ("BASH_ENV", "/tmp/evil.sh"),
            ("TERM", "xterm-256color"),
            ("SSH_AUTH_SOCK", "/tmp/agent.sock"),
        ]
        .map(|(name, value)| (OsString::from(name), OsString::from(value)));
        let environment = child_environment(parent.clone(), &["SSH_AUTH_SOCK".to_owned()]);
        let shown: Vec<(String, String)> = environment
            .iter()
            .map(|(name, value)| {
                (
                    name.to_string_lossy().into_owned(),
                    value.to_string_lossy().into_owned(),
                )
            })
            .collect();
        let get = |wanted: &str| {
            shown
                .iter()
                .find(|(name, _)| name == wanted)
                .map(|(_, value)| value.as_str())
        };
        assert_eq!(get("PATH"), Some("/opt/bin:/usr/bin"));
        assert_eq!(get("HOME"), Some("/home/ada"));
        assert_eq!(get("LC_ALL"), Some("C.UTF-8"));
        assert_eq!(get("SSH_AUTH_SOCK"), Some("/tmp/agent.sock"));
        assert_eq!(get("TERM"), Some("dumb"));
        assert_eq!(get("NO_COLOR"), Some("1"));
        assert_eq!(get("GIT_PAGER"), Some("cat"));
        for secret in [
            "OPENAI_API_KEY",
            "AGENTIC_API_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "BASH_ENV",
        ] {
            assert_eq!(get(secret), None, "{secret}");
        }
        assert_eq!(
            shown.iter().filter(|(name, _)| name == "TERM").count(),
            1,
            "TERM is set once"
        );
        let without_path = child_environment(Vec::new(), &[]);
        assert!(without_path.contains(&("PATH".into(), FALLBACK_PATH.into())));
    }

    #[test]
    fn passed_variables_cannot_be_the_runtimes_secrets_or_code_hooks() {
        for good in ["SSH_AUTH_SOCK", "CARGO_HOME", "_X1"] {
            assert_eq!(check_passed_variable(good), Ok(()), "{good}");
        }
        for bad in [
            "OPENAI_API_KEY",
            "openai_base_url",
            "AGENTIC_API_TOKEN",
            "BASH_ENV",
            "ENV",
            "LD_PRELOAD",
            "",
            "1X",
            "A-B",
            "A=B",
        ] {
            assert!(check_passed_variable(bad).is_err(), "{bad}");
        }
    }
}

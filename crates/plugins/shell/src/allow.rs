//! The allowlist: which command lines may run without asking the user.
//!
//! A command line skips approval only when it is one plain command whose leading words are
//! exactly the words of an allowed prefix. Anything the shell would treat specially (control
//! operators, redirections, substitutions, globs, quoting tricks on the command name) makes
//! the check fail, so an allowed `ls` can never smuggle in a second command.

/// Whether `command` may run without approval under the `allowed` prefixes.
///
/// `ls` allows `ls` and `ls -la`, never `lsblk`, `ls; rm -rf ~`, `ls $(rm x)` or `ls > f`.
pub fn command_is_allowed(command: &str, allowed: &[String]) -> bool {
    if command.chars().any(is_special_to_the_shell) {
        return false;
    }
    let words: Vec<&str> = shell_words(command).collect();
    if words.is_empty() {
        return false;
    }
    allowed.iter().any(|prefix| {
        let prefix: Vec<&str> = shell_words(prefix).collect();
        !prefix.is_empty()
            && prefix.len() <= words.len()
            && prefix
                .iter()
                .zip(&words)
                .all(|(wanted, word)| wanted == word)
    })
}

/// Checks one configured prefix: it must be plain words of characters that mean nothing to
/// the shell, so that a command whose words equal it is parsed by the shell as those words.
pub fn check_allowed_prefix(prefix: &str) -> Result<(), String> {
    if shell_words(prefix).next().is_none() {
        return Err("an allow entry is empty".to_owned());
    }
    if let Some(bad) = prefix.chars().find(|c| {
        !(c.is_ascii_alphanumeric()
            || matches!(
                c,
                ' ' | '-' | '_' | '.' | '/' | ':' | '=' | '@' | '+' | ',' | '%'
            ))
    }) {
        return Err(format!(
            "allow entry \"{}\" holds {bad:?}; entries are plain words of letters, digits and - _ . / : = @ + , %",
            prefix.escape_debug()
        ));
    }
    Ok(())
}

/// Words as the shell splits a plain command: on spaces and tabs.
fn shell_words(text: &str) -> impl Iterator<Item = &str> {
    text.split([' ', '\t']).filter(|word| !word.is_empty())
}

/// Characters that can start another command, redirect, substitute, expand or escape, and
/// control characters other than tab (a newline ends a command). Quotes
/// are not among them: a quote glued to a word makes it differ from the allowed word, and
/// inside later arguments quotes only group text.
fn is_special_to_the_shell(c: char) -> bool {
    (c.is_control() && c != '\t')
        || matches!(
            c,
            ';' | '&'
                | '|'
                | '`'
                | '$'
                | '>'
                | '<'
                | '('
                | ')'
                | '{'
                | '}'
                | '['
                | ']'
                | '*'
                | '?'
                | '\\'
                | '!'
                | '#'
                | '~'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(prefixes: &[&str]) -> Vec<String> {
        prefixes.iter().map(|prefix| (*prefix).to_owned()).collect()
    }

    fn check(prefixes: &[&str], command: &str, expected: bool) {
        assert_eq!(
            command_is_allowed(command, &allowed(prefixes)),
            expected,
            "{command:?} under {prefixes:?}"
        );
    }

    #[test]
    fn prefixes_match_on_word_boundaries() {
        let prefixes = ["ls", "git status", "cargo test -p"];
        for command in [
            "ls",
            "ls -la",
            "  ls\t-la  ",
            "ls 'my file.txt'",
            "git status",
            "git  status --short",
            "cargo test -p agentic-plugin-shell",
        ] {
            check(&prefixes, command, true);
        }
        for command in [
            "lsblk",
            "ls-la",
            "lsx -la",
            "git",
            "git statusx",
            "git stash",
            "git log status",
            "cargo test",
            "cargo test --workspace",
            "'ls' -la",
            "\"ls\" -la",
            "l's' -la",
            "ls'' -la",
            "LS -la",
            "",
            "   ",
        ] {
            check(&prefixes, command, false);
        }
    }

    #[test]
    fn metacharacters_never_match_even_after_an_allowed_prefix() {
        let prefixes = ["ls", "echo"];
        for command in [
            "ls; rm -rf /",
            "ls;rm -rf /",
            "ls && rm x",
            "ls & rm x",
            "ls || rm x",
            "ls | sh",
            "ls `rm x`",
            "ls $(rm x)",
            "ls $HOME",
            "ls ${HOME}",
            "ls > listing.txt",
            "ls >> listing.txt",
            "ls < input",
            "ls <(rm x)",
            "ls\nrm x",
            "ls\rrm x",
            "ls\u{0}rm",
            "ls\u{b}-la",
            "ls\u{c}-la",
            "ls \\\nrm x",
            "ls (x)",
            "ls {a,b}",
            "ls *",
            "ls ?",
            "ls [ab]",
            "ls ~",
            "ls !x",
            "ls # comment",
            "echo 'a;b'",
            "echo \"$(id)\"",
        ] {
            check(&prefixes, command, false);
        }
    }

    #[test]
    fn no_prefix_means_nothing_is_allowed() {
        check(&[], "ls", false);
        check(&[""], "ls", false);
        check(&["  "], "ls", false);
    }

    #[test]
    fn configured_prefixes_must_be_plain_words() {
        for good in [
            "ls",
            "git status",
            "cargo test -p",
            "npm run lint:fix",
            "./x.sh",
        ] {
            assert_eq!(check_allowed_prefix(good), Ok(()), "{good}");
        }
        for bad in [
            "", "  ", "ls;", "ls *", "echo $x", "'ls'", "ls\n", "a|b", "ls\\",
        ] {
            assert!(check_allowed_prefix(bad).is_err(), "{bad:?}");
        }
    }
}

//! **Did nothing.** Fixes two programs that run as a success with `value: null` and leave the
//! model nothing to go on, after which it went on as if its work were done:
//! - one that called no tool, logged and showed nothing and did not end the turn; most often
//!   one that only declares functions (a row of helpers, none called). Seen: "The CSV file has
//!   been created", with no file written. The error names the functions it declared.
//! - one that called tools and ends by declaring what it found (`const count = …;`), shown to
//!   no one. Seen: a count computed, then "0" answered in words. The error names the variable.
//! - one that is a value alone (`3`, `"Lyon"`), which calls nothing and computes nothing: a
//!   guess that returns a value, after which the model answered it in words (open-todos,
//!   round 34). The candidate check fails such a program as well.
//!
//! Designed on the tuning split (json-to-csv, invoice-todos; round 14); measured with the other
//! changes of round 14 (`docs/benchmarks.md`).

/// The notice for a program that ran, logged nothing, showed nothing, returned no value and
/// did not end the turn; `code` is the program, `called` how many tool calls it made. `None`
/// when it called tools and its last statement is not a declaration (a program that writes a
/// file and stops has done something).
pub(crate) fn notice(code: &str, called: usize) -> Option<String> {
    if called > 0 {
        let name = last_declared(code)?;
        return Some(format!(
            "the program ran (its {called} tool call{} did) but showed nothing: its last line \
             declares `{name}`, and nobody sees its value. End with done(answer), the answer \
             built from `{name}`, or log({name}) to look at it first. Do not repeat its writes.",
            if called == 1 { "" } else { "s" }
        ));
    }
    let declared = declared_functions(code);
    let what = if declared.is_empty() {
        String::new()
    } else {
        format!(
            " It declares {} and calls none of {}.",
            declared.join(", "),
            if declared.len() == 1 { "it" } else { "them" }
        )
    };
    Some(format!(
        "the program ran and did nothing: it called no tool, logged and showed nothing, and \
         its last line has no value.{what} Write the program that does the task: call the \
         tools, and end with done(answer)."
    ))
}

/// The variable the program's last statement declares, when it is a declaration: the last
/// line that starts at the left margin and is not a closing bracket or a comment.
fn last_declared(code: &str) -> Option<&str> {
    let last = code.lines().rev().find(|line| {
        let line = line.trim_end();
        !line.is_empty()
            && !line.starts_with(char::is_whitespace)
            && !line.starts_with(['}', ')', ']', '/', '*', '.'])
    })?;
    let rest = ["const ", "let ", "var "]
        .iter()
        .find_map(|kind| last.strip_prefix(kind))?;
    let name = rest.split(['=', ';', ' ']).next()?.trim();
    is_name(name).then_some(name)
}

/// The names of the functions `code` declares (`function f(`, `const f = (…) =>`,
/// `const f = async function`), in order, at most eight.
fn declared_functions(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in code.lines() {
        let line = line.trim_start();
        let name = if let Some(rest) = line
            .strip_prefix("async function ")
            .or_else(|| line.strip_prefix("function "))
        {
            rest.split('(').next()
        } else if let Some(rest) = ["const ", "let ", "var "]
            .iter()
            .find_map(|kind| line.strip_prefix(kind))
        {
            rest.split_once('=').and_then(|(name, value)| {
                let value = value.trim_start();
                let value = value.strip_prefix("async").unwrap_or(value).trim_start();
                let function = value.starts_with("function")
                    || (value.starts_with('(') && line.contains("=>"))
                    || value.split_whitespace().next().is_some_and(|first| {
                        first.ends_with("=>") || value[first.len()..].trim_start().starts_with("=>")
                    });
                function.then_some(name)
            })
        } else {
            None
        };
        if let Some(name) = name.map(str::trim).filter(|name| is_name(name))
            && !names.iter().any(|known| known == name)
        {
            names.push(name.to_owned());
        }
    }
    names.truncate(8);
    names
}

/// The notice for a program that is a value alone (`3`, `"Lyon"`): it called no tool and
/// computed nothing, so its value is a guess (open-todos, tuning, round 34: the first reply
/// was `3`, and the answer after it "You have 3 open todos"). `None` for any other program.
pub(crate) fn lone_value(code: &str) -> Option<String> {
    let value = literal_only(code)?;
    Some(format!(
        "the program is the value {value} alone: it called no tool and computed nothing, so \
         that value is a guess. Write the program that does the task: call the tools, and end \
         with done(answer)."
    ))
}

/// The literal `code` is made of (a number, or a string without substitutions), with its
/// fence, comments and last `;` left out; `None` when it holds anything else.
fn literal_only(code: &str) -> Option<String> {
    let (code, _) = crate::prompt::extract_code(code);
    let mut kept = String::new();
    for line in code.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with("//") {
            continue;
        }
        kept.push_str(line);
    }
    let value = kept.trim().trim_end_matches(';').trim();
    let number = {
        let digits = value.strip_prefix('-').unwrap_or(value);
        !digits.is_empty()
            && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
            && digits.chars().any(|c| c.is_ascii_digit())
    };
    let string = value.len() >= 2
        && ["\"", "'", "`"].iter().any(|quote| {
            value.starts_with(quote)
                && value.ends_with(quote)
                && !value[1..value.len() - 1].contains(quote)
        })
        && !value.contains("${");
    (number || string).then(|| value.to_owned())
}

fn is_name(text: &str) -> bool {
    !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
        && !text.starts_with(|c: char| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_that_is_a_value_alone_is_a_guess() {
        for (code, value) in [
            ("3", "3"),
            ("```js\n// the open todos\n3;\n```", "3"),
            ("'Lyon'", "'Lyon'"),
            ("-2.5", "-2.5"),
        ] {
            let told = lone_value(code).unwrap();
            assert!(
                told.starts_with(&format!("the program is the value {value} alone")),
                "{code}: {told}"
            );
        }
        for code in [
            "todo.list({}).todos.length",
            "`${1 + 2}`",
            "'a' + 'b'",
            "new Date().getDay()",
            "const n = 3;",
            "3 + x",
        ] {
            assert_eq!(lone_value(code), None, "{code}");
        }
    }

    #[test]
    fn names_the_functions_a_program_declares() {
        let code = "const readIt = async ({ path }) => {\n  return fs.read({ path });\n};\n\
                    function writeIt(p, c) { fs.write({ path: p, content: c }) }\n\
                    const twice = x => x * 2;\nconst n = 3;\nlet f = async function () {};";
        assert_eq!(
            declared_functions(code),
            ["readIt", "writeIt", "twice", "f"]
        );
        let told = notice(code, 0).unwrap();
        assert!(told.contains("It declares readIt, writeIt, twice, f and calls none of them."));
        assert!(!notice("const n = 1;", 0).unwrap().contains("declares"));
    }

    #[test]
    fn a_program_that_called_tools_is_told_only_when_it_ends_declaring() {
        let counted = "const todos = todo.list({}).todos\n  .filter(t => t.done)\n  .length;\n";
        assert!(
            notice(counted, 1)
                .unwrap()
                .contains("its last line declares `todos`")
        );
        let written =
            "const text = fs.read({ path: 'a' }).content;\nfs.write({ path: 'b', content: text });";
        assert_eq!(notice(written, 2), None);
        let looped = "let n = 0;\nfor (const f of fs.list({}).entries) {\n  n += f.size;\n}";
        assert_eq!(notice(looped, 1), None);
    }
}

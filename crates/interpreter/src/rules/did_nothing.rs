//! **Did nothing.** Fixes: a program that called no tool, logged and showed nothing, returned
//! no value and did not end the turn; most often one that only declares functions (a row of
//! helpers, none of them called). It ran as a success with `value: null`, and the model went
//! on as if its work were done ("The CSV file has been created", with no file written). The
//! error says so, and names the functions it declared.
//!
//! Designed on the tuning split (json-to-csv, round s45); measured in round s45 with three other
//! changes (`docs/benchmarks.md`).

/// The notice for a program that did nothing; `code` is the program.
pub(crate) fn notice(code: &str) -> String {
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
    format!(
        "the program ran and did nothing: it called no tool, logged and showed nothing, and \
         its last line has no value.{what} Write the program that does the task: call the \
         tools, and end with done(answer)."
    )
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
    fn names_the_functions_a_program_declares() {
        let code = "const readIt = async ({ path }) => {\n  return fs.read({ path });\n};\n\
                    function writeIt(p, c) { fs.write({ path: p, content: c }) }\n\
                    const twice = x => x * 2;\nconst n = 3;\nlet f = async function () {};";
        assert_eq!(
            declared_functions(code),
            ["readIt", "writeIt", "twice", "f"]
        );
        assert!(notice(code).contains("It declares readIt, writeIt, twice, f and calls none of them."));
        assert!(!notice("const n = 1;").contains("declares"));
    }
}

//! Heuristics on text alone: whether a model's reply is prose (an answer) or code (to run, or
//! to repair), which the engine asks only once Boa could not parse the reply; and which common
//! format a text that is not JSON is written in, for `JSON.parse`'s error.

/// Whether a reply that failed to parse reads as prose rather than broken code. Blocks fenced
/// as another language (small models often answer with Python) are part of the answer, not
/// JavaScript to fix, so they are left out of the judgement.
pub(crate) fn looks_like_prose(text: &str) -> bool {
    if prose_answer_line(text) {
        return true;
    }
    let kept: Vec<&str> = crate::prompt::segments(text)
        .into_iter()
        .filter(|segment| segment.fence.is_none() || segment.is_javascript_fence())
        .flat_map(|segment| segment.lines)
        .collect();
    prose_lines(&kept.join("\n"))
}

/// Whether `text` is an answer in words as code mode's grammar takes one (`PROSE` in
/// `grammar/program.lark`): one line, a capitalised word followed by a space, comma or colon,
/// then no backtick, `;`, brace or `=`, at most 600 characters after the word; or a short
/// "Done." and the like. What the grammar let through as words is never run as code.
fn prose_answer_line(text: &str) -> bool {
    let text = text.trim();
    if text.contains('\n') {
        return false;
    }
    let free =
        |rest: &str| rest.chars().count() <= 600 && !rest.contains(['`', ';', '{', '}', '=', '\n']);
    for word in [
        "Done",
        "OK",
        "Okay",
        "Yes",
        "No",
        "Sure",
        "Finished",
        "Completed",
    ] {
        if let Some(rest) = text.strip_prefix(word)
            && let Some(rest) = rest.strip_prefix(['.', '!'])
            && (rest.is_empty() || rest.strip_prefix(' ').is_some_and(free))
        {
            return true;
        }
    }
    let word_end = text
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_alphabetic() || c == '\''))
        .map_or(text.len(), |(at, _)| at);
    let (word, rest) = text.split_at(word_end);
    let rest = rest.strip_prefix(['!', '?']).unwrap_or(rest);
    word.starts_with(|c: char| c.is_ascii_uppercase())
        && word.len() <= 31
        && rest.starts_with([' ', ',', ':'])
        && free(&rest[1..])
}

fn prose_lines(text: &str) -> bool {
    // Markdown's inline code (`time()`) is how prose mentions code; it is not code to run.
    let text: String = text
        .lines()
        .map(|line| {
            let mut kept = String::new();
            for (index, part) in line.split('`').enumerate() {
                if index % 2 == 0 {
                    kept.push_str(part);
                }
            }
            kept
        })
        .collect::<Vec<_>>()
        .join("\n");
    let text = text.as_str();
    const CODE_STARTS: &[&str] = &[
        "const ",
        "let ",
        "var ",
        "function ",
        "return",
        "if ",
        "if(",
        "for ",
        "for(",
        "while",
        "await ",
        "try",
        "}",
        "//",
        "/*",
        "import ",
        "export ",
        "class ",
    ];
    let code_like_lines = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .filter(|line| {
            CODE_STARTS.iter().any(|start| line.starts_with(start))
                || line.ends_with(';')
                || line.ends_with('{')
                || line.contains("=>")
                || line.contains(" = ")
                || line.contains("();")
                || calls_something(line)
        });
    code_like_lines.count() == 0
}

/// `name(` with no space between: how code calls things and prose rarely writes.
fn calls_something(line: &str) -> bool {
    line.as_bytes()
        .windows(2)
        .any(|pair| (pair[0].is_ascii_alphanumeric() || pair[0] == b'_') && pair[1] == b'(')
}

/// The format a text that failed `JSON.parse` reads as, with how to read it: models reach
/// for `JSON.parse` on every file. `None` when it reads as none of the usual ones.
pub(crate) fn text_format(text: &str) -> Option<&'static str> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#') && !line.starts_with(';'))
        .collect();
    if lines.len() < 2 {
        return None;
    }
    let section = |line: &str| {
        line.starts_with('[') && line.ends_with(']') && !line.contains(',') && line.len() > 2
    };
    let assignment = |line: &str| {
        line.split_once('=').is_some_and(|(key, _)| {
            let key = key.trim();
            !key.is_empty()
                && key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        })
    };
    let assignments = lines.iter().filter(|line| assignment(line)).count();
    let sections = lines.iter().any(|line| section(line));
    if (sections && assignments > 0) || assignments * 2 > lines.len() {
        if crate::engine::parse_toml(text).is_ok() {
            return Some("TOML: TOML.parse(text) gives its data, each `[section]` an object");
        }
        if sections {
            return Some(
                "INI: `[section]` headers, then `key = value` lines, not valid TOML (TOML.parse \
                 refuses it); split it into lines and read the `key = value` lines under the \
                 section you need",
            );
        }
        return Some("`key = value` lines; split it into lines, then each line at the first `=`");
    }
    let commas = |line: &str| line.matches(',').count();
    let header = commas(lines[0]);
    if header > 0
        && lines
            .iter()
            .take(6)
            .all(|line| commas(line) == header && !line.starts_with('{'))
    {
        return Some(
            "CSV: a header line, then one row per line; CSV.parse(text) gives one object per \
             row, keyed by the header line",
        );
    }
    let yaml = |line: &str| {
        let line = line.trim_start_matches("- ");
        line.split_once(": ").is_some_and(|(key, _)| {
            !key.is_empty() && !key.contains(['"', '{', '(']) && key.len() < 40
        }) || (line.ends_with(':') && !line.contains(' '))
    };
    if lines.iter().filter(|line| yaml(line)).count() * 2 > lines.len()
        && !lines[0].starts_with('{')
    {
        return Some("YAML: YAML.parse(text) gives its data");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_and_code_are_told_apart() {
        assert!(looks_like_prose("The answer is 42 (roughly)."));
        assert!(looks_like_prose("It is 10:30 in Oslo.\nHave a nice day!"));
        assert!(!looks_like_prose("const x = timeNow(;"));
        assert!(!looks_like_prose("output('hi'"));
        assert!(!looks_like_prose("for (let i = 0; i < 3; i++) {"));
        // An answer that shows Python is an answer, not JavaScript to repair.
        assert!(looks_like_prose(
            "The time is:\n```python\nimport datetime\nreturn datetime.now()\n```"
        ));
        assert!(!looks_like_prose("```js\nconst x = timeNow(;\n```"));
        // Inline code in prose is prose; a template literal in code is still code.
        assert!(looks_like_prose(
            "You can use `time()` or `date` methods:\n- `time()`: Returns a Unix timestamp"
        ));
        assert!(!looks_like_prose("output(`Time: ${t}`"));
        // Seen with Qwen2.5-Coder-1.5B under the grammar (round 14): one line of words that
        // names a call. The grammar took it as words, so the mode does too.
        assert!(looks_like_prose(
            "The program returned an object that is not JSON text. To parse it as JSON, use \
             JSON.parse(text)."
        ));
        assert!(looks_like_prose("Done."));
        assert!(!looks_like_prose("Math.max(1, 2"));
        assert!(!looks_like_prose("Total = count(items);"));
    }

    #[test]
    fn common_formats_are_named() {
        let toml = "# Service configuration\n[server]\nport = 8080\n\n[database]\nport = 5433\n";
        assert!(
            text_format(toml)
                .unwrap()
                .starts_with("TOML: TOML.parse(text)")
        );
        let ini = "[server]\nhost = db.internal\nport = 5433\n";
        assert!(text_format(ini).unwrap().starts_with("INI"));
        assert!(
            text_format("NAME=web\nDEBUG=true\n")
                .unwrap()
                .starts_with("`key = value`")
        );
        let csv = "id,payee,amount\nP01,Office,45.00\nP02,Cloud,129.99\n";
        assert!(text_format(csv).unwrap().starts_with("CSV"));
        assert!(
            text_format("name: auth\nport: 8080\ndebug: true\n")
                .unwrap()
                .starts_with("YAML")
        );
        // Prose, one line, and broken JSON are none of them.
        assert_eq!(text_format("temporarily unavailable, try again"), None);
        assert_eq!(text_format("The service is down.\nTry again later."), None);
        assert_eq!(text_format("{\"a\": 1,\n\"b\": 2,\n"), None);
    }
}

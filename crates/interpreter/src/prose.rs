//! Whether a model's reply is prose (an answer) or code (to run, or to repair). Heuristics on
//! text alone: the engine asks only once Boa could not parse the reply.

/// Whether a reply that failed to parse reads as prose rather than broken code. Blocks fenced
/// as another language (small models often answer with Python) are part of the answer, not
/// JavaScript to fix, so they are left out of the judgement.
pub(crate) fn looks_like_prose(text: &str) -> bool {
    let kept: Vec<&str> = crate::prompt::segments(text)
        .into_iter()
        .filter(|segment| segment.fence.is_none() || segment.is_javascript_fence())
        .flat_map(|segment| segment.lines)
        .collect();
    prose_lines(&kept.join("\n"))
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
    }
}

//! **A reply that is not a program.** Fixes: the model answers in JSON (a tool call written
//! as JSON), in another language (Python, shell), copies back the last execution error, or
//! explains a failure in prose instead of fixing it. The reply is not run; the model is told
//! once what to send instead (a second such reply is asked afresh, then answered in plain
//! text from the results).
//!
//! Measured: round 1, code mode 1/26 → 4/26 with it (f892141, with the rest of that round's
//! package); prose after a failure, round 2, 8 → 10/26 (62f292c, package). Copy checks:
//! contacts-emails passed 2/2 in round 9c (a73bb36). Under the embedded model's grammar
//! (`crate::grammar`) a reply is a program, or, once a program of the turn ran, prose with no
//! code in it: JSON, other languages and copied errors cannot be written, prose can.

use serde_json::Value;

use crate::prompt::{Segment, segments};
use crate::protocol::ToolBinding;

/// How the error of a reply that was not run starts (the timeline's record of a refusal).
pub(crate) const REFUSED: &str = "not run: this reply is not a JavaScript program";

/// Fence languages that are code, but not ours to run.
const OTHER_LANGUAGES: &[&str] = &[
    "python",
    "py",
    "bash",
    "sh",
    "shell",
    "zsh",
    "console",
    "ruby",
    "go",
    "rust",
    "java",
    "c",
    "cpp",
    "c++",
    "csharp",
    "php",
    "sql",
    "powershell",
];

/// Why a model's reply is neither run nor taken as the answer, as the hint the model gets:
/// JSON (```json, or a bare object such as a tool call written as JSON), code in another
/// language, or a copy of the last execution error. `None` for everything else: JavaScript
/// to run, or prose to take as the answer.
pub(crate) fn refusal(
    reply: &str,
    last_error: Option<&str>,
    bindings: &[ToolBinding],
) -> Option<String> {
    let example = bindings
        .iter()
        .find(|binding| binding.member.is_some() || binding.function.is_some())
        .map_or_else(|| "toolName".to_owned(), ToolBinding::call_name);
    let segments: Vec<Segment<'_>> = segments(reply)
        .into_iter()
        .filter(|segment| segment.lines.iter().any(|line| !line.trim().is_empty()))
        .collect();
    if segments.iter().any(Segment::is_javascript_fence) {
        return None;
    }
    let trimmed = reply.trim();
    if let Some(error) = last_error {
        // The error's own words: not the source line it quotes (`> …`), which a corrected
        // program may well start with, not the code it offers in backticks (`Write line 1
        // as: \`const x = JSON.parse(…);\``), which a corrected program copies, and not the
        // position it names.
        let words: Vec<String> = error
            .lines()
            .filter(|line| !line.starts_with('>'))
            .map(|line| without_quoted_code(strip_position(line.trim())))
            .filter(|line| line.len() >= 16)
            .collect();
        let reply_first = strip_position(trimmed.lines().next().unwrap_or_default().trim());
        let copied = words.iter().any(|line| trimmed.contains(line.as_str()))
            || (reply_first.len() >= 16 && words.iter().any(|line| line.contains(reply_first)))
            || (crate::prose::looks_like_prose(trimmed)
                && mostly_words_of(trimmed, &words.join("\n")));
        if trimmed.starts_with("Execution error") || copied {
            return Some(format!(
                "{REFUSED}: it repeats the error of the last execution. Reply with the \
                 corrected program, in JavaScript, and nothing else."
            ));
        }
    }
    let json_only = !segments.is_empty()
        && segments
            .iter()
            .all(|segment| match segment.fence.as_deref() {
                Some("json" | "jsonc" | "json5") => true,
                Some(_) => false,
                None => {
                    let text = segment.lines.join("\n");
                    let text = text.trim();
                    (text.starts_with('{') || text.starts_with('['))
                        && serde_json::from_str::<Value>(text).is_ok()
                }
            });
    if json_only {
        return Some(format!(
            "{REFUSED}: it is JSON. Tools are functions: call them in a program, e.g. \
             `const result = {example}({{ ... }});`, and end with done(answer)."
        ));
    }
    let other_language = segments.iter().find_map(|segment| {
        segment
            .fence
            .as_deref()
            .filter(|language| OTHER_LANGUAGES.contains(language))
    });
    if let Some(language) = other_language {
        return Some(format!(
            "{REFUSED}: it is {language}. The sandbox runs JavaScript only; write the program \
             in JavaScript and call the tools as functions, e.g. `{example}({{ ... }})`."
        ));
    }
    None
}

/// A line without the ` (line 3, column 9)` an error message ends with.
/// True when a reply of ten words or more is, word for word, mostly the error it follows:
/// the model paraphrasing our notice back ("The error message indicates that the last
/// program returned prose… Please provide the corrected program only…") rather than
/// answering. Words are letters and digits, three or more, in any case.
fn mostly_words_of(reply: &str, error: &str) -> bool {
    fn words(text: &str) -> impl Iterator<Item = String> + '_ {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|word| word.chars().count() >= 3)
            .map(str::to_lowercase)
    }
    let known: std::collections::HashSet<String> = words(error).collect();
    let said: Vec<String> = words(reply).collect();
    if said.len() < 10 {
        return false;
    }
    let shared = said.iter().filter(|word| known.contains(*word)).count();
    shared * 10 >= said.len() * 7
}

/// A line of an error with its backticked spans (code it quotes or offers) left out.
fn without_quoted_code(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join(" ")
}

fn strip_position(line: &str) -> &str {
    match line.rfind(" (line ") {
        Some(at) if line.ends_with(')') => &line[..at],
        _ => line,
    }
}

/// The notice for prose after a failed program (told once; the next prose is the answer).
pub(crate) fn prose_after_failure() -> String {
    format!(
        "{REFUSED}: it is prose, and the last program failed. Reply with the corrected program \
         only. If the task cannot be done, end a program with done(\"…\") saying what to tell \
         the user."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seen with Qwen2.5-Coder-1.5B (eval round 8, flaky-forecast): told its prose was not a
    /// program, it paraphrased the notice back, and that became the answer.
    #[test]
    fn a_paraphrase_of_the_notice_is_a_copy_and_an_answer_is_not() {
        let notice = format!(
            "{REFUSED}: it is prose, and the last program failed. Reply with the corrected \
             program only. If the task cannot be done, end a program with done(\"…\") saying \
             what to tell the user."
        );
        assert!(mostly_words_of(
            "The error message indicates that the last program returned prose instead of a \
             JavaScript program. Please provide the corrected program only. If the task cannot \
             be done, end a program with `done(\"…\")` saying what to tell the user.",
            &notice
        ));
        let error = "Error: disk full (line 1, column 1)\n> kit.fail({ text: \"disk full\" });";
        assert!(!mostly_words_of(
            "The tool failed with \"disk full\", so nothing was echoed to you this time.",
            error
        ));
        // Too short to tell.
        assert!(!mostly_words_of("disk full", error));
        // Through `refusal`: the paraphrase is refused as a copy; the program the error
        // quotes, sent again, is code (the same-program rule deals with it), not a copy.
        let refused = refusal(
            "The error message indicates that the last program returned prose instead of a \
             JavaScript program. Please provide the corrected program only. If the task cannot \
             be done, end a program with `done(\"…\")` saying what to tell the user.",
            Some(&notice),
            &[],
        );
        assert!(refused.is_some_and(|hint| hint.contains("repeats the error")));
        let program = "const time = shell.exec({ command: 'date +\"%A\"', timezone: 'Asia/Tokyo' });\noutput(time.output);";
        let error = format!(
            "Error: invalid input for shell.exec: Additional properties are not allowed \
             ('timezone' was unexpected). Expected shell.exec(input: {{ command: string }}). \
             Another tool takes `timezone`: time.now(input?: {{ timezone?: string | null }}) \
             (line 1, column 24)\n> {}",
            program.lines().next().unwrap_or_default()
        );
        assert_eq!(refusal(program, Some(&error), &[]), None);
        // Seen in eval round 9 (contacts-emails): the corrected program starts with the line
        // the error offered; it is a program, not a copy of the error.
        let error = "the program ran, but: fs.write was given only blank lines in `content`. \
            `fs.read({\"path\":\"contacts.json\"}).content` is text that holds JSON, and the \
            program never parses it: `JSON.parse(…)` gives its values (a string's items are its \
            characters). Write line 1 as: `const contacts = JSON.parse(fs.read({ path: \
            \"contacts.json\" }).content);` A variable or field the program used has no value.";
        let program = "const contacts = JSON.parse(fs.read({ path: \"contacts.json\" }).content);\n\
            const emails = contacts.map(contact => contact.email);\n\
            fs.write({ content: emails.join(\"\\n\"), path: \"emails.txt\" });";
        assert_eq!(refusal(program, Some(error), &[]), None);
    }

    #[test]
    fn json_other_languages_and_repeated_errors_are_refused() {
        let bindings = vec![ToolBinding {
            id: "time.now".into(),
            function: Some("timeNow".into()),
            aliases: Vec::new(),
            member: Some("time.now".into()),
            description: String::new(),
            result: Default::default(),
        }];
        let refused = |reply: &str, error: Option<&str>| refusal(reply, error, &bindings);
        let json = refused(
            "```json\n{\"name\": \"time_now\", \"arguments\": {}}\n```",
            None,
        );
        assert!(
            json.as_deref()
                .is_some_and(|hint| hint.contains("time.now(")),
            "{json:?}"
        );
        assert!(refused("{\"response\": 8081}", None).is_some());
        assert!(refused("```python\nprint(1)\n```", None).is_some());
        let error = "ReferenceError: require is not defined\nThere are no modules here";
        assert!(refused("ReferenceError: require is not defined", Some(error)).is_some());
        assert!(refused("Execution error: boom", Some("boom")).is_some());
        let invalid = "Error: invalid input for fs.write: \"content\" is a required property. \
                       Expected fs.write(…) (line 3, column 9)\n> fs.write(options);";
        let copy = "Error: invalid input for fs.write: \"content\" is a required property. \
                    Expected fs.write(…)";
        assert!(refused(copy, Some(invalid)).is_some());
        // A corrected program may start with the line the error quotes.
        assert!(refused("fs.write(options);\ndone(1)", Some(invalid)).is_none());
        // Code, prose and numbers are not refused.
        assert!(refused("```js\ndone(1)\n```\n```json\n{}\n```", None).is_none());
        assert!(refused("done(timeNow({}).iso)", Some(error)).is_none());
        assert!(refused("It is 3 pm in Tokyo.", None).is_none());
        assert!(refused("8081", None).is_none());
        assert!(refused("{ const a = 1; done(a) }", None).is_none());
    }
}

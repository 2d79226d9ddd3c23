//! **Answered unseen.** Fixes: an answer computed from text the model never looked at. The
//! system prompt asks for a look first ("Look before you compute"), and a small model often
//! skips it: it reads a file and answers from it in one program, guessing how the text is
//! laid out. "How many items of checklist.md are not ticked off?": it counted the lines without
//! `"x "`, while the ticked ones say `- [x]`, and answered with every item (checklist-left,
//! tuning). "Lines of code in the .py files under src/": it listed src/ without its
//! subfolders, kept README.md and answered 19 (python-lines, tuning). Nothing failed, so no
//! other rule had anything to say.
//!
//! The instruction is enforced rather than repeated: a program that made only read-only calls,
//! read text of several lines that the turn had not shown the model, and ended with
//! `done(answer)` has that answer held back once. The model is told the answer and shown
//! what each call returned (text as its lines, the start of each), with the string searches
//! that never matched one of the texts they were given, and is asked to give the answer again
//! or to fix the program. A program sent again unchanged after this runs again (its calls only
//! read), and its answer stands. The candidate check does not count the hold as a failure:
//! every sample of such a turn is as unseen as the first.
//!
//! Designed on the tuning split (checklist-left, python-lines). Measured: see
//! `docs/benchmarks.md`, round 36.

use agentic_core::tool::cap_text;
use serde_json::Value;

/// How the error of a held-back answer starts.
pub(crate) const UNSEEN: &str = "held back: the answer was not shown to the user yet";

/// Lines shown of each text a call returned, and characters of each line.
const LINES_SHOWN: usize = 12;
const LINE_CHARS: usize = 160;

/// Calls shown, and characters of a result shown as JSON.
const CALLS_SHOWN: usize = 4;
const JSON_CHARS: usize = 400;

/// The texts of several lines in a call's result: what a program has to know the layout of
/// to read right (a file's content, a command's output, a page).
pub(crate) fn texts_of_lines(result: &Value) -> Vec<&str> {
    crate::engine::texts_in(result)
        .into_iter()
        .filter(|text| {
            text.trim()
                .lines()
                .filter(|line| !line.trim().is_empty())
                .count()
                >= 2
        })
        .collect()
}

/// The first line of `text` with something on it: what shows the model has seen the text.
pub(crate) fn first_line(text: &str) -> Option<&str> {
    text.lines()
        .map(str::trim)
        .find(|line| line.chars().filter(|c| c.is_alphanumeric()).count() >= 2)
}

/// One call as the model is shown it: its input, then its result (texts of lines as lines).
pub(crate) fn call_view(function: &str, input: &Value, result: &Value) -> String {
    let input = cap_text(&input.to_string(), 200).replace('\n', " ");
    let texts = texts_of_lines(result);
    if texts.is_empty() {
        return format!(
            "- {function}({input}) returned {}",
            cap_text(&result.to_string(), JSON_CHARS)
        );
    }
    let mut view = format!("- {function}({input}) returned");
    for text in texts.iter().take(2) {
        let lines: Vec<&str> = text.lines().collect();
        view.push_str(&format!(" a text of {} lines:", lines.len()));
        for line in lines.iter().take(LINES_SHOWN) {
            view.push_str("\n    ");
            view.push_str(&cap_text(line, LINE_CHARS));
        }
        if lines.len() > LINES_SHOWN {
            view.push_str(&format!(
                "\n    … ({} more lines)",
                lines.len() - LINES_SHOWN
            ));
        }
    }
    view
}

/// The notice: `answer` held back, `calls` (each as [`call_view`] shows it; more than
/// [`CALLS_SHOWN`] are counted), and the searches of the program that never matched.
pub(crate) fn notice(answer: &str, calls: &[String], never_matched: &[String]) -> String {
    let mut text = format!(
        "{UNSEEN}. Your program computed it from text you have not looked at, so check it \
         against that text first.\nYour answer: {}\nWhat your program's calls returned:",
        cap_text(answer.trim(), 600)
    );
    for call in calls.iter().take(CALLS_SHOWN) {
        text.push('\n');
        text.push_str(call);
    }
    if calls.len() > CALLS_SHOWN {
        text.push_str(&format!(
            "\n- and {} more calls like these",
            calls.len() - CALLS_SHOWN
        ));
    }
    if !never_matched.is_empty() {
        text.push_str("\nSearches that found nothing:");
        for search in never_matched {
            text.push_str("\n- ");
            text.push_str(search);
        }
    }
    text.push_str(
        "\nIf the answer is right for this data, give it again with done(). If not, change \
         the code that reads the data and run the program again.",
    );
    text
}

#[cfg(test)]
mod tests {
    use super::{call_view, first_line, notice, texts_of_lines};
    use serde_json::json;

    #[test]
    fn texts_of_several_lines_are_what_needs_a_look() {
        let read = json!({ "content": "# Moving\n- [x] Book the van\n- [ ] Pack" });
        assert_eq!(texts_of_lines(&read).len(), 1);
        // A time, a path, a one-line value: their layout is the declaration's.
        let now = json!({ "iso": "2026-12-07T16:00:00Z", "timezone": "UTC" });
        assert!(texts_of_lines(&now).is_empty());
        assert!(texts_of_lines(&json!({ "content": "one line\n\n" })).is_empty());
        assert_eq!(first_line("\n\n  # Moving\n- a"), Some("# Moving"));
        assert_eq!(first_line("---\n\nname: x"), Some("name: x"));
    }

    #[test]
    fn the_notice_shows_the_answer_the_lines_read_and_the_searches_that_missed() {
        let content: String = (1..=20).map(|n| format!("- [x] item {n}\n")).collect();
        let view = call_view(
            "fs.read",
            &json!({ "path": "checklist.md" }),
            &json!({ "content": content }),
        );
        assert!(view.starts_with("- fs.read({\"path\":\"checklist.md\"}) returned a text of 20"));
        assert!(view.contains("\n    - [x] item 12\n    … (8 more lines)"));
        assert!(!view.contains("item 13"));
        let text = notice(
            "20 items are not ticked off yet.",
            &[view],
            &["`.includes(\"x \")` was false for all 20 texts it searched".to_owned()],
        );
        assert!(text.starts_with(super::UNSEEN));
        assert!(text.contains("Your answer: 20 items are not ticked off yet."));
        assert!(text.contains("Searches that found nothing:\n- `.includes(\"x \")`"));
        assert!(text.ends_with("run the program again."));
    }
}

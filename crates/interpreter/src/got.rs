//! What a program got from its tools, said when a value it wrote or answered came out empty.
//!
//! Small models compute before they look: `for (const c of text)` over a file's text instead
//! of its parsed JSON, `item.quantity` on items that have no quantity. The error "a value came
//! out NaN", even with the start of each result beside it (see `prompt::returned_preview`),
//! sent Qwen2.5-Coder-1.5B back to the same guess. Two facts settle it, and both come from the
//! calls' own results: that a text is JSON the program never parsed, and which fields the
//! program reads that no result has.

use std::collections::BTreeSet;

use agentic_core::{ToolOutput, ToolResult};
use serde_json::Value;

use crate::names::is_identifier_char;

/// A string field shorter than this, on one line, is a value rather than text.
const TEXT_CHARS: usize = 60;
/// Field names listed when a field is missing.
const KEYS_LISTED: usize = 16;
/// How deep and how wide results are walked for their field names.
const KEY_DEPTH: usize = 6;
const KEY_ITEMS: usize = 50;

/// Property names that every string, array or object has in JavaScript.
const BUILTIN_PROPERTIES: &[&str] = &["length", "constructor", "prototype"];

/// One or more sentences, on one line, about what the program's successful tool calls returned, for an
/// error about a value it left empty. `None` when there is nothing the program did not use.
pub(crate) fn what_it_got<'a>(
    code: &str,
    calls: impl IntoIterator<Item = &'a ToolOutput>,
) -> Option<String> {
    let source_code = code;
    let code = without_literals(code);
    let mut keys = BTreeSet::new();
    let mut unparsed_json = None;
    for call in calls {
        let ToolResult::Success { output } = &call.result else {
            continue;
        };
        collect_keys(output, &mut keys, 0);
        let Some((field, text)) = text_field(output) else {
            continue;
        };
        let parsed = serde_json::from_str::<Value>(text.trim()).ok();
        if let Some(parsed) = &parsed {
            collect_keys(parsed, &mut keys, 0);
        }
        let source = match field {
            Some(field) => format!("{}.{field}", call_text(call)),
            None => call_text(call),
        };
        let is_collection = matches!(parsed, Some(Value::Array(_) | Value::Object(_)));
        if is_collection && !code.contains("JSON.parse") && unparsed_json.is_none() {
            unparsed_json = Some((source, field));
        }
    }
    let mut notes = Vec::new();
    if let Some((source, field)) = unparsed_json {
        let mut note = format!(
            "`{source}` is text that holds JSON, and the program never parses it: \
             `JSON.parse(…)` gives its values (a string's items are its characters)."
        );
        // The line to change, changed: told only what to do, Qwen2.5-Coder-1.5B sent its
        // program back unchanged (eval round 9, contacts-emails).
        if let Some((number, fixed)) = field.and_then(|field| parsed_line(source_code, field)) {
            note.push_str(&format!(" Write line {number} as: `{fixed}`"));
        }
        notes.push(note);
    }
    let missing: Vec<String> = fields_read(&code)
        .into_iter()
        .filter(|field| !keys.contains(field.as_str()))
        .filter(|field| !BUILTIN_PROPERTIES.contains(&field.as_str()))
        .filter(|field| !assigned_in(&code, field))
        .collect();
    if !missing.is_empty() && !keys.is_empty() {
        let named: Vec<String> = missing.iter().map(|field| format!("`{field}`")).collect();
        let mut listed: Vec<&str> = keys.iter().map(String::as_str).take(KEYS_LISTED).collect();
        if keys.len() > KEYS_LISTED {
            listed.push("…");
        }
        notes.push(format!(
            "The program reads {}, which no result it got has; the fields its results have are: \
             {}.",
            named.join(", "),
            listed.join(", ")
        ));
    }
    (!notes.is_empty()).then(|| notes.join(" "))
}

/// `const contacts = fs.read({ path: "contacts.json" }).content;` → line 1 and `const
/// contacts = JSON.parse(fs.read({ path: "contacts.json" }).content);`: the first line that
/// declares a variable as a read of `field`, with the read parsed.
fn parsed_line(code: &str, field: &str) -> Option<(usize, String)> {
    let ending = format!(".{field}");
    code.lines().enumerate().find_map(|(index, line)| {
        let trimmed = line.trim();
        let (declaration, value) = trimmed.split_once('=')?;
        let mut words = declaration.split_whitespace();
        let keyword = words.next()?;
        let name = words.next()?;
        if !["const", "let", "var"].contains(&keyword)
            || words.next().is_some()
            || !name.chars().all(is_identifier_char)
            || value.starts_with('=')
        {
            return None;
        }
        let value = value.trim().trim_end_matches(';').trim_end();
        value.ends_with(&ending).then(|| {
            (
                index + 1,
                format!("{keyword} {name} = JSON.parse({value});"),
            )
        })
    })
}

/// `fs.read({"path":"sales.csv"})`: the call as the program could have written it, with
/// short input spelled out.
fn call_text(call: &ToolOutput) -> String {
    let input = call.input.to_string();
    if input.chars().count() <= TEXT_CHARS {
        format!("{}({input})", call.function)
    } else {
        format!("{}(…)", call.function)
    }
}

/// A result that is text (several lines, or long), or its first string field that is, e.g.
/// `content`; with the field's name.
fn text_field(output: &Value) -> Option<(Option<&str>, &str)> {
    let is_text = |text: &str| text.contains('\n') || text.chars().count() > TEXT_CHARS;
    if let Some(text) = output.as_str() {
        return is_text(text).then_some((None, text));
    }
    output.as_object()?.iter().find_map(|(field, value)| {
        let text = value.as_str()?;
        is_text(text).then_some((Some(field.as_str()), text))
    })
}

fn collect_keys(value: &Value, keys: &mut BTreeSet<String>, depth: usize) {
    if depth > KEY_DEPTH {
        return;
    }
    match value {
        Value::Object(fields) => {
            for (key, value) in fields {
                keys.insert(key.clone());
                collect_keys(value, keys, depth + 1);
            }
        }
        Value::Array(items) => {
            for item in items.iter().take(KEY_ITEMS) {
                collect_keys(item, keys, depth + 1);
            }
        }
        _ => {}
    }
}

/// The code with string literals, template literals and comments blanked out, so that
/// `"report.md"` does not read as a field `md`. `${…}` inside a template is kept.
pub(crate) fn without_literals(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut chars = code.chars().peekable();
    // Open template literals, each with the brace depth of its `${…}` when inside one.
    let mut templates: Vec<usize> = Vec::new();
    while let Some(c) = chars.next() {
        let in_template_text = templates.last().is_some_and(|depth| *depth == 0);
        if in_template_text {
            match c {
                '\\' => {
                    chars.next();
                }
                '`' => {
                    templates.pop();
                    out.push(' ');
                }
                '$' if chars.peek() == Some(&'{') => {
                    chars.next();
                    if let Some(depth) = templates.last_mut() {
                        *depth = 1;
                    }
                    out.push(' ');
                }
                _ => {}
            }
            continue;
        }
        match c {
            '"' | '\'' => {
                while let Some(next) = chars.next() {
                    match next {
                        '\\' => {
                            chars.next();
                        }
                        '\n' => break,
                        quote if quote == c => break,
                        _ => {}
                    }
                }
                out.push_str("\"\"");
            }
            '`' => {
                templates.push(0);
                out.push(' ');
            }
            '/' if chars.peek() == Some(&'/') => {
                for next in chars.by_ref() {
                    if next == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for next in chars.by_ref() {
                    if last == '*' && next == '/' {
                        break;
                    }
                    last = next;
                }
                out.push(' ');
            }
            '{' => {
                if let Some(depth) = templates.last_mut().filter(|depth| **depth > 0) {
                    *depth += 1;
                }
                out.push(c);
            }
            '}' => {
                if let Some(depth) = templates.last_mut().filter(|depth| **depth > 0) {
                    *depth -= 1;
                    if *depth == 0 {
                        out.push(' ');
                        continue;
                    }
                }
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// `x.field`, `f().field`, `a[0].field` and `x?.field` reads that are not method calls.
fn fields_read(code: &str) -> BTreeSet<String> {
    let mut fields = BTreeSet::new();
    let chars: Vec<char> = code.chars().collect();
    let mut index = 0;
    while index < chars.len() {
        if chars[index] != '.' || index == 0 {
            index += 1;
            continue;
        }
        let before = if chars[index - 1] == '?' && index >= 2 {
            chars[index - 2]
        } else {
            chars[index - 1]
        };
        let start = index + 1;
        let mut end = start;
        while end < chars.len() && is_identifier_char(chars[end]) {
            end += 1;
        }
        let name: String = chars[start..end].iter().collect();
        let receiver = is_identifier_char(before) || before == ')' || before == ']';
        let is_call = chars[end..]
            .iter()
            .find(|c| !c.is_whitespace())
            .is_some_and(|c| *c == '(');
        let starts_like_a_name = name
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$');
        // `1.5` is a number, `...rest` a spread, `Math.max` a builtin's member.
        let number = before.is_ascii_digit() && !preceded_by_identifier(&chars, index - 1);
        if receiver && starts_like_a_name && !is_call && !number && !on_builtin(&chars, index) {
            fields.insert(name);
        }
        index = end.max(index + 1);
    }
    fields
}

/// True when the digit before `at` is part of an identifier (`row2.total`), not a number.
fn preceded_by_identifier(chars: &[char], at: usize) -> bool {
    let mut index = at;
    while index > 0 && is_identifier_char(chars[index - 1]) {
        index -= 1;
    }
    !chars[index].is_ascii_digit()
}

/// `Math.PI`, `Number.MAX_SAFE_INTEGER`, `CSV.parse`: members of JavaScript's own objects and
/// the sandbox's parsers.
fn on_builtin(chars: &[char], dot: usize) -> bool {
    let mut start = dot;
    while start > 0 && is_identifier_char(chars[start - 1]) {
        start -= 1;
    }
    let receiver: String = chars[start..dot].iter().collect();
    matches!(
        receiver.as_str(),
        "Math"
            | "Number"
            | "JSON"
            | "TOML"
            | "YAML"
            | "CSV"
            | "Object"
            | "Array"
            | "String"
            | "Date"
            | "console"
    )
}

/// `{ total: 0 }`, `x.total = 1`, `let { total } = …`: fields the program made itself.
fn assigned_in(code: &str, field: &str) -> bool {
    let bytes = code.as_bytes();
    code.match_indices(field).any(|(at, _)| {
        let before_ok = at == 0 || !is_identifier_char(bytes[at - 1] as char);
        let after = &code[at + field.len()..];
        let after_ok = after.chars().next().is_none_or(|c| !is_identifier_char(c));
        if !before_ok || !after_ok {
            return false;
        }
        let rest = after.trim_start();
        let dotted = at > 0 && bytes[at - 1] == b'.';
        (rest.starts_with(':') && !dotted)
            || (dotted && rest.starts_with('=') && !rest.starts_with("=="))
            || (dotted
                && ["+=", "-=", "*=", "/=", "++", "--"]
                    .iter()
                    .any(|op| rest.starts_with(op)))
            || (!dotted && (rest.starts_with(',') || rest.starts_with('}')) && {
                // `{ total }` shorthand in a pattern or object literal.
                code[..at].trim_end().ends_with(['{', ','])
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use serde_json::json;

    fn call(function: &str, input: Value, output: Value) -> ToolOutput {
        ToolOutput {
            id: "call_1".to_owned(),
            function: function.to_owned(),
            input,
            result: ToolResult::Success { output },
            start: Utc::now(),
            end: None,
            decision: None,
        }
    }

    /// Seen with Qwen2.5-Coder-1.5B (eval, contacts-emails): `for (const c of content)`.
    #[test]
    fn json_text_never_parsed_is_named() {
        let read = call(
            "fs.read",
            json!({"path": "contacts.json"}),
            json!({"content": "[\n  {\n    \"name\": \"Ana\",\n    \"email\": \"ana@example.com\"\n  }\n]\n", "path": "contacts.json"}),
        );
        let code = "const contacts = fs.read({ path: \"contacts.json\" }).content;\n\
                    for (const contact of contacts) { emails.push(contact.email); }";
        let note = what_it_got(code, [&read]).expect("a note");
        assert!(
            note.starts_with(
                "`fs.read({\"path\":\"contacts.json\"}).content` is text that holds JSON, and \
                 the program never parses it"
            ),
            "{note}"
        );
        assert!(
            note.ends_with(
                "Write line 1 as: `const contacts = JSON.parse(fs.read({ path: \"contacts.json\" \
                 }).content);`"
            ),
            "{note}"
        );
        // `email` is in the parsed text, so it is not called missing.
        assert!(!note.contains("which no result it got has"), "{note}");
    }

    /// Seen with Qwen2.5-Coder-1.5B (eval, flaky-prices): items have a price, no quantity.
    #[test]
    fn a_field_no_result_has_is_named_with_the_fields_there_are() {
        let fetch = call(
            "web.fetch",
            json!({"url": "http://127.0.0.1:1/prices.json"}),
            json!({"status": 200, "text": "{\"currency\": \"EUR\", \"items\": [{\"name\": \"oat milk\", \"price\": 2.35}]}", "url": "http://127.0.0.1:1/prices.json"}),
        );
        let code = "const prices = JSON.parse(web.fetch({ url: \"http://127.0.0.1:1/prices.json\" }).text);\n\
                    let total = 0;\nfor (const item of prices.items) { total += item.price * item.quantity; }\n\
                    done(`The total is ${total.toFixed(2)} in ${Math.PI}.`);";
        let note = what_it_got(code, [&fetch]).expect("a note");
        assert!(
            note.starts_with(
                "The program reads `quantity`, which no result it got has; the fields its \
                 results have are: currency, items, name, price, status, text, url."
            ),
            "{note}"
        );
    }

    #[test]
    fn literals_comments_numbers_and_own_fields_are_not_reads() {
        let code = "const a = { total: 1.5 }; // see x.y\nconst s = 'report.md';\n\
                    const t = `${row.amount} in a.b`; /* c.d */ a.extra = 2; ok.push(...rest);";
        assert_eq!(
            fields_read(&without_literals(code)),
            BTreeSet::from(["amount".to_owned(), "extra".to_owned()])
        );
        assert!(assigned_in(code, "extra"));
        assert!(assigned_in(code, "total"));
        assert!(!assigned_in(code, "amount"));
    }

    #[test]
    fn nothing_to_say_is_none() {
        let list = call("todo.list", json!({}), json!({"todos": [{"title": "a"}]}));
        assert_eq!(
            what_it_got("todo.list({}).todos.map(t => t.title)", [&list]),
            None
        );
        // A CSV whose columns were guessed: the start of each result already goes with the
        // error (`prompt::returned_preview`).
        let read = call(
            "fs.read",
            json!({"path": "sales.csv"}),
            json!({"content": "date,region,amount\n2026-04-01,East,189\n", "path": "sales.csv"}),
        );
        let code = "for (const row of fs.read({ path: \"sales.csv\" }).content.split(\"\\n\")) {\n\
                    const [region, amount] = row.split(\",\"); }";
        assert_eq!(what_it_got(code, [&read]), None);
    }
}

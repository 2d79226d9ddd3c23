//! Ways JavaScript gets data wrong without a word, made loud (a number cut at a comma or a
//! colon when parsed is in `numbers.rs`):
//!
//! - **A search that only matched in another case.** `line.includes("Net Profit")` over lines
//!   that say `Net profit` is false every time, and a total built on it stays 0. The string
//!   searches (`includes`, `startsWith`, `endsWith`, `indexOf`) note each text they searched
//!   for; an answer given to `done()` or `complete()` is refused when one of them never
//!   matched while a text searched held it in another case. A search with a capital that
//!   matched at least once (`ERROR` among lines that also say `error`) is taken as meant; one
//!   in lower case (`invoice`) is a word as the user says it, and missing a text that has it
//!   in another case ("Check the Invoice …") is refused even after it matched others
//!   (invoice-todos, tuning, round 34).
//! - **A search at one end that only matched further in.** `row.startsWith("Germany")` over
//!   CSV rows `1,Hans,Germany` is false every time, and the count built on it is 0.
//!   `startsWith` and `endsWith` (without a position) that never matched, while a text they
//!   searched held the needle where a word starts, refuse the answer the same way, naming the
//!   field of the line to compare when it has fields. The first `log()` line after either
//!   kind of missed search gets the same words as a note. Fixes: germany-customers (tuning) in a
//!   round-21 run. Measured in round 22: it fired in no run of either split (tuning 21/24,
//!   held-out 6/12, as before).
//! - **A search for a word with marks the text does not give it.** `item.includes("x ")` over
//!   checklist lines that say `- [x] Book the van` is false for every line, and every item is
//!   counted as open (checklist-left, tuning, round 36). `includes` and `indexOf` of a needle
//!   that is a word with marks or blanks at its edges (`"x "`, `"TODO:"`), that never matched,
//!   while a text searched held the word alone with other marks around it (`[x]`), refuse the
//!   answer the same way, naming the search as the text writes it (`.includes("[x]")`). The
//!   word bare (`2 x 500g`) is another use of it and does not count. Measured: round 36,
//!   `docs/benchmarks.md`.
//! - **A field read on a string, a number or a boolean.** `contact.email`, where `contact`
//!   is a character of a file's text that was never parsed (`for (const contact of text)`),
//!   is `undefined`, and the list built from it is empty. The prototypes of strings, numbers
//!   and booleans get a `Proxy` in front of `Object.prototype` whose `get` throws at the
//!   line for a name no such value has: not a method, not an index, not a symbol, and none of
//!   the names every value answers (`then`, `toJSON`, …), nor `error` (how a program tells
//!   a failed call of `parallel()` from a result). Measured in round 18.
//!
//! Fixes: answers of 0 from files written for people (reports, invoices, logs). Measured in
//! round 17 (`docs/benchmarks.md`): tuning 13 → 14/17 (misplaced-report), held-out 2 → 2/9.

use boa_engine::{Context, JsNativeError, JsResult, JsString, JsValue};

use super::{quoted_start, with_engine};

/// What the program's string searches looked for, in one run.
#[derive(Debug, Default)]
pub(super) struct Searches {
    list: Vec<Search>,
    /// Characters of searched text looked through in another case so far: past
    /// [`OTHER_CASE_BUDGET`], searches are counted but no longer looked through.
    looked_through: usize,
    /// A `log()` line has been given the note of a missed search ([`annotate_log`]).
    logged: bool,
}

/// How many characters of searched text one run looks through in another case: enough for
/// every line of a large file, and a bound on what a script that searches a long text in a
/// loop pays for it.
const OTHER_CASE_BUDGET: usize = 16 * 1024 * 1024;

/// One text the program searched for, by every string search it made.
#[derive(Debug, Clone)]
struct Search {
    method: &'static str,
    needle: String,
    calls: u32,
    matched: bool,
    /// The first searched text that held the needle in another case (its line, quoted).
    other_case: Option<String>,
    /// For `startsWith` and `endsWith`: the first searched text that held the needle in its
    /// case, but not at the end searched (its line, quoted), and the field of that line it
    /// fills, when the line has fields.
    elsewhere: Option<(String, Option<Field>)>,
    /// For `includes` and `indexOf` of a word with marks or blanks at its edges (`"x "`,
    /// `"TODO:"`): the first searched text that held the word alone with other marks around
    /// it, as the text writes it (`[x]`), and its line, quoted.
    marked: Option<(String, String)>,
}

/// Where a needle stands in a line of fields: `line.split(separator)[index]`.
#[derive(Debug, Clone)]
struct Field {
    separator: char,
    index: usize,
    /// The field is the needle, not only starts or ends with it.
    whole: bool,
}

/// How much of a searched text a refusal quotes.
pub(super) const QUOTED_CHARS: usize = 80;

/// Wraps the string searches and the number parsers of a fresh context.
pub(super) fn install(context: &mut Context) -> JsResult<()> {
    let prototype = context.intrinsics().constructors().string().prototype();
    for method in ["includes", "startsWith", "endsWith", "indexOf"] {
        super::wrap_builtin(context, &prototype, method, searched)?;
    }
    let global = context.global_object();
    let number = context.intrinsics().constructors().number().constructor();
    for name in ["parseFloat", "parseInt"] {
        if let Some(wrapped) = super::wrap_builtin(context, &global, name, super::numbers::parsed)?
        {
            // `Number.parseFloat` is the same function as the global one.
            number.set(JsString::from(name), wrapped, true, context)?;
        }
    }
    let constructors = context.intrinsics().constructors();
    let primitives = [
        (constructors.string().prototype(), "a string"),
        (constructors.number().prototype(), "a number"),
        (constructors.boolean().prototype(), "a boolean"),
    ];
    for (prototype, kind) in primitives {
        super::primitive::guard_fields(context, &prototype, kind)?;
    }
    Ok(())
}

/// What a string search (`method`) found, noted ([`note`]); its result unchanged.
fn searched(
    method: &'static str,
    this: &JsValue,
    arguments: &[JsValue],
    result: JsValue,
    _context: &mut Context,
) -> JsResult<JsValue> {
    let matched = match method {
        "indexOf" => result.as_number().is_some_and(|index| index >= 0.0),
        _ => result.to_boolean(),
    };
    if let (Some(text), Some(needle)) = (
        this.as_string(),
        arguments.first().and_then(JsValue::as_string),
    ) {
        // `startsWith(text, 5)` looks where the program said: not at an end.
        let at_an_end = matches!(method, "startsWith" | "endsWith")
            && arguments.get(1).is_none_or(JsValue::is_undefined);
        note(
            method,
            &needle.to_std_string_escaped(),
            &text,
            matched,
            at_an_end,
        );
    }
    Ok(result)
}

/// Notes one search: `needle` looked for in `text`, and whether it was found. The text is
/// read only for a search that has found nothing and has not yet seen its needle in another
/// case or (a search at one of its ends: `at_an_end`) elsewhere in it.
fn note(method: &'static str, needle: &str, text: &JsString, matched: bool, at_an_end: bool) {
    // A single character, or a needle whose letters have no case, cannot be in another case.
    let cased = needle.to_lowercase() != needle.to_uppercase();
    // A needle of punctuation (`//`, `- `) is found inside lines as a matter of course.
    let at_an_end = at_an_end && needle.chars().filter(|c| c.is_alphanumeric()).count() >= 2;
    // A word with marks at its edges, searched anywhere: `"x "` over lines that say `- [x]`.
    let word = (matches!(method, "includes" | "indexOf"))
        .then(|| word_of(needle))
        .flatten();
    // Every search is counted ([`in_vain`]); only these are looked into further.
    let looked_into = needle.chars().count() >= 2 && (cased || at_an_end || word.is_some());
    if needle.is_empty() {
        return;
    }
    let _ = with_engine(|state| {
        let searches = &mut state.searches;
        let index = match searches
            .list
            .iter()
            .position(|search| search.method == method && search.needle == needle)
        {
            Some(index) => index,
            None => {
                // A program that searches for thousands of different texts is not one whose
                // searches this is about.
                if searches.list.len() >= 256 {
                    return;
                }
                searches.list.push(Search {
                    method,
                    needle: needle.to_owned(),
                    calls: 0,
                    matched: false,
                    other_case: None,
                    elsewhere: None,
                    marked: None,
                });
                searches.list.len() - 1
            }
        };
        let search = &mut searches.list[index];
        search.calls += 1;
        search.matched |= matched;
        if !looked_into {
            return;
        }
        // A needle in lower case is a word as the user would say it, meant in any case: a
        // text it missed in another case counts even after it matched others.
        let look_other_case = cased
            && search.other_case.is_none()
            && !matched
            && (!search.matched || is_lower(needle));
        let look_elsewhere = at_an_end && search.elsewhere.is_none() && !search.matched;
        let look_marked = word.is_some() && search.marked.is_none() && !search.matched;
        if !(look_other_case || look_elsewhere || look_marked) {
            return;
        }
        if searches.looked_through + text.len() > OTHER_CASE_BUDGET {
            return;
        }
        searches.looked_through += text.len();
        let text = text.to_std_string_escaped();
        if look_elsewhere {
            search.elsewhere = elsewhere(needle, &text, method == "startsWith");
        }
        if let Some(word) = word.filter(|_| look_marked) {
            search.marked = marked(word, &text);
        }
        if look_other_case {
            search.other_case = if search.matched {
                // After a match, only a text the search would have taken in the other case.
                in_other_case_where_searched(needle, &text, method)
            } else {
                in_other_case(needle, &text)
            };
        }
    });
}

/// The line of `text` that holds `needle` where a word starts (after a blank or a separator,
/// not inside a word), quoted, and the field of it the needle is or starts (`from_start`) or
/// ends, when the line has fields.
fn elsewhere(needle: &str, text: &str, from_start: bool) -> Option<(String, Option<Field>)> {
    // Where the needle begins or ends with a letter or digit, the text's must not go on with
    // one: `Germany` in `3,Hans,Germany,Berlin`, not `land` in `Finland`. (At the start of a
    // line is further in: the search did not find it at the start of the text.)
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    let (first, last) = (needle.chars().next(), needle.chars().next_back());
    let line = text.lines().find(|line| {
        line.match_indices(needle).any(|(at, _)| {
            let before = line[..at].chars().next_back();
            let after = line[at + needle.len()..].chars().next();
            let inside_a_word = (word(first) && word(before)) || (word(last) && word(after));
            !inside_a_word
        })
    })?;
    let field = [',', '\t', ';', '|'].into_iter().find_map(|separator| {
        let fields: Vec<&str> = line.split(separator).collect();
        if fields.len() < 2 {
            return None;
        }
        fields.iter().enumerate().find_map(|(index, field)| {
            let field = field.trim();
            let whole = field == needle;
            let fits = if from_start {
                field.starts_with(needle)
            } else {
                field.ends_with(needle)
            };
            (whole || fits).then_some(Field {
                separator,
                index,
                whole,
            })
        })
    });
    Some((quoted_start(line.trim(), QUOTED_CHARS), field))
}

/// The word of a needle that has marks or blanks at its edges and letters or digits between
/// them (`x` of `"x "`, `TODO` of `"TODO:"`); `None` for a needle without such edges.
fn word_of(needle: &str) -> Option<&str> {
    let word = needle.trim_matches(|c: char| !c.is_alphanumeric());
    (!word.is_empty() && word.len() < needle.len()).then_some(word)
}

/// Where `text` holds `word` as a word (not inside a longer one) with marks around it, as the
/// text writes it (`[x]` in `- [x] Book the van`), and that line, quoted.
fn marked(word: &str, text: &str) -> Option<(String, String)> {
    let mark = |c: &char| !c.is_alphanumeric() && !c.is_whitespace();
    text.lines().find_map(|line| {
        line.match_indices(word).find_map(|(at, _)| {
            let before = &line[..at];
            let after = &line[at + word.len()..];
            if before
                .chars()
                .next_back()
                .is_some_and(char::is_alphanumeric)
                || after.chars().next().is_some_and(char::is_alphanumeric)
            {
                return None;
            }
            let left: String = before.chars().rev().take_while(mark).collect();
            let right: String = after.chars().take_while(mark).collect();
            // The word bare (`2 x 500g`) is another use of it, not the one searched for.
            if left.is_empty() && right.is_empty() {
                return None;
            }
            let written = format!("{}{word}{right}", left.chars().rev().collect::<String>());
            Some((written, quoted_start(line.trim(), QUOTED_CHARS)))
        })
    })
}

/// `text`, quoted, when `method` would have taken it with `needle` in the text's case: at its
/// start (`startsWith`), its end (`endsWith`), or anywhere.
fn in_other_case_where_searched(needle: &str, text: &str, method: &str) -> Option<String> {
    let folded = text.to_lowercase();
    let lower = needle.to_lowercase();
    let taken = match method {
        "startsWith" => folded.starts_with(&lower),
        "endsWith" => folded.ends_with(&lower),
        _ => folded.contains(&lower),
    };
    if !taken {
        return None;
    }
    let line = match method {
        "endsWith" => text.lines().next_back(),
        "startsWith" => text.lines().next(),
        _ => text
            .lines()
            .find(|line| line.to_lowercase().contains(&lower)),
    }?;
    Some(quoted_start(line.trim(), QUOTED_CHARS))
}

/// Whether `needle` has letters, all of them in lower case.
fn is_lower(needle: &str) -> bool {
    needle.chars().any(char::is_alphabetic) && needle.to_lowercase() == needle
}

/// The line of `text` that holds `needle` in another case (as written, it is not a case
/// mistake: see [`elsewhere`]), quoted and shortened.
fn in_other_case(needle: &str, text: &str) -> Option<String> {
    let lower = needle.to_lowercase();
    let line = text.lines().find(|line| {
        let folded = line.to_lowercase();
        if folded.len() != line.len() {
            // Lower case changed the text's length: its offsets are not the line's.
            return folded.contains(&lower) && !line.contains(needle);
        }
        folded
            .match_indices(&lower)
            .any(|(at, _)| line.get(at..at + lower.len()) != Some(needle))
    })?;
    Some(quoted_start(line.trim(), QUOTED_CHARS))
}

/// A search that never matched, though a text it searched held what it looked for in another
/// case, or (a search at one end of the text) further in; `None` once `noted` (see
/// [`annotate_log`]) when `unnoted` is asked for.
fn missed(unnoted: bool) -> JsResult<Option<Search>> {
    with_engine(|state| first_missed(state, unnoted))
}

/// Whether a search of the run missed (what [`check_answer`] would refuse an answer for).
pub(super) fn misread(state: &super::EngineState) -> bool {
    first_missed(state, false).is_some()
}

/// Whether a string search of the run was given several texts and matched none of them
/// (`line.endsWith(" ✔️")` over every line of a checklist): the candidate check does not
/// take such a sample in place of the model's own program (`mode/candidates.rs`).
pub(super) fn in_vain(state: &super::EngineState) -> bool {
    state
        .searches
        .list
        .iter()
        .any(|search| !search.matched && search.calls >= 2)
}

fn first_missed(state: &super::EngineState, unnoted: bool) -> Option<Search> {
    if unnoted && state.searches.logged {
        return None;
    }
    state
        .searches
        .list
        .iter()
        .find(|search| {
            if search.matched {
                is_lower(&search.needle) && search.other_case.is_some()
            } else {
                search.other_case.is_some() || search.elsewhere.is_some() || search.marked.is_some()
            }
        })
        .cloned()
}

/// What is wrong with `search`, which found nothing `so_far` (in a log line: the run goes on),
/// and what to do instead.
fn why(search: Search, so_far: bool) -> String {
    let times = match (search.calls, so_far) {
        (1, false) => "once".to_owned(),
        (1, true) => "the one time so far".to_owned(),
        (calls, false) => format!("all {calls} times"),
        (calls, true) => format!("all {calls} times so far"),
    };
    let call = format!("`.{}({:?})`", search.method, search.needle);
    if search.matched {
        return format!(
            "{call} matched some texts but missed one that has it in another case: {}. A word \
             in lower case is meant in any case: compare both in lower case \
             (`text.toLowerCase().{}({:?})`)",
            search.other_case.unwrap_or_default(),
            search.method,
            search.needle
        );
    }
    if let (None, None, Some((written, line))) =
        (&search.elsewhere, &search.other_case, &search.marked)
    {
        let word = word_of(&search.needle).unwrap_or_default();
        let written = serde_json::Value::String(written.clone());
        return format!(
            "{call} found nothing {times}, but the text it searched has {word:?} with other \
             marks around it: {line}. Search for it as the text writes it (`.{}({written})`)",
            search.method
        );
    }
    match (search.elsewhere, search.other_case) {
        (Some((line, field)), _) => {
            let (end, mode) = if search.method == "startsWith" {
                ("starts with", "startsWith")
            } else {
                ("ends with", "endsWith")
            };
            let instead = match field {
                Some(Field {
                    separator,
                    index,
                    whole,
                }) => {
                    let separator = serde_json::Value::String(separator.to_string());
                    let field = format!("line.split({separator})[{index}].trim()");
                    if whole {
                        format!(
                            "compare the field it is (`{field} === {:?}`)",
                            search.needle
                        )
                    } else {
                        format!(
                            "look at the field it is in (`{field}.{mode}({:?})`)",
                            search.needle
                        )
                    }
                }
                None => "look anywhere in it (`.includes(…)`), or at the part you mean".to_owned(),
            };
            format!(
                "{call} found nothing {times}, but the text it searched has it further in: \
                 {line}. It is true only of a text that {end} it: {instead}"
            )
        }
        (None, line) => format!(
            "{call} found nothing {times}, but the text it searched has it in another case: \
             {}. Search for it as the text writes it, or compare both in lower case \
             (`.toLowerCase()`)",
            line.unwrap_or_default()
        ),
    }
}

/// Refuses an answer (`what` is `done()` or `complete()`) given after a search that never
/// matched, though a text it searched held what it looked for in another case, or (a search
/// at one end of the text) further in.
pub(super) fn check_answer(what: &str) -> JsResult<()> {
    match missed(false)? {
        Some(search) => Err(JsNativeError::typ()
            .with_message(format!(
                "the answer given to {what} was not shown: {}",
                why(search, false)
            ))
            .into()),
        None => Ok(()),
    }
}

/// The first `log()` line after such a search, with a note saying what it missed: the model
/// may answer in words from its logs (a program that logs the count of 0 and then a reply
/// "0 customers" would get past the refusal above). Once a run.
pub(super) fn annotate_log(text: String) -> JsResult<String> {
    let missed = with_engine(|state| {
        let search = first_missed(state, true)?;
        state.searches.logged = true;
        Some(search)
    })?;
    let Some(search) = missed else {
        return Ok(text);
    };
    Ok(format!(
        "{text} (note from the sandbox: {})",
        why(search, true)
    ))
}

#[cfg(test)]
mod tests {
    use crate::testing::run;
    use serde_json::json;

    #[test]
    fn an_answer_after_a_search_for_a_word_the_text_marks_otherwise_is_refused() {
        // Seen with Qwen2.5-Coder-1.5B (eval checklist-left): ticked items counted as open.
        let code = "const lines = ['# Moving', '- [x] Book the van', '- [ ] Pack'];\n\
                    done(`${lines.filter(l => l.startsWith('- ') && !l.includes('x ')).length} open`)";
        let error = run(code, json!({})).result.unwrap_err();
        assert_eq!(
            error.message,
            "TypeError: the answer given to done() was not shown: `.includes(\"x \")` found \
             nothing all 2 times, but the text it searched has \"x\" with other marks around \
             it: \"- [x] Book the van\". Search for it as the text writes it \
             (`.includes(\"[x]\")`)"
        );
        // The word bare is another use of it; a search that matched once is meant; a needle
        // without a word, or one the texts never hold, is no miss.
        for code in [
            "const lines = ['Buy 2 x 500g flour', '- milk'];\ndone(`${lines.filter(l => l.includes('[x]')).length}`)",
            "const lines = ['- [x] a', '- x b'];\ndone(`${lines.filter(l => l.includes('x ')).length}`)",
            "const lines = ['- [x] a', '- b'];\ndone(`${lines.filter(l => l.includes('- [ ]')).length}`)",
            "const lines = ['a: 1', 'b: 2'];\ndone(`${lines.filter(l => l.includes('TODO:')).length}`)",
        ] {
            let outcome = run(code, json!({}));
            assert!(outcome.result.is_ok(), "{code}: {outcome:?}");
            assert!(outcome.complete.is_some(), "{code}: {outcome:?}");
        }
    }

    #[test]
    fn a_search_that_matched_none_of_several_texts_is_noted() {
        for (code, in_vain) in [
            (
                "['- [x] a', '- b'].filter(l => l.endsWith('✔')).length",
                true,
            ),
            (
                "['- [x] a', '- b'].filter(l => l.includes('x ')).length",
                true,
            ),
            (
                "['- [x] a', '- b'].filter(l => l.includes('[x]')).length",
                false,
            ),
            ("['a'].filter(l => l.includes('z')).length", false),
        ] {
            assert_eq!(run(code, json!({})).searched_in_vain, in_vain, "{code}");
        }
    }

    #[test]
    fn an_answer_after_a_search_that_only_matched_in_another_case_is_refused() {
        let report = "Revenue: 312,400 EUR\nNet profit: 48,250 EUR";
        let code = format!(
            "let found = 0;\nfor (const line of {report:?}.split('\\n')) {{\n  if (line.includes('Net Profit')) found += 1;\n}}\ndone(`${{found}}`)"
        );
        let error = run(&code, json!({})).result.unwrap_err();
        assert_eq!(
            error.message,
            "TypeError: the answer given to done() was not shown: `.includes(\"Net Profit\")` \
             found nothing all 2 times, but the text it searched has it in another case: \
             \"Net profit: 48,250 EUR\". Search for it as the text writes it, or compare both \
             in lower case (`.toLowerCase()`)"
        );
        // A word in lower case is meant in any case: missing one text that has it in
        // another case is refused after it matched others.
        let error = run(
            "const titles = ['Pay the invoice', 'Check the Invoice from Ana', 'Buy milk'];\ndone(`${titles.filter(t => t.includes('invoice')).length} todos`)",
            json!({}),
        )
        .result
        .unwrap_err();
        assert_eq!(
            error.message,
            "TypeError: the answer given to done() was not shown: `.includes(\"invoice\")` \
             matched some texts but missed one that has it in another case: \"Check the \
             Invoice from Ana\". A word in lower case is meant in any case: compare both in \
             lower case (`text.toLowerCase().includes(\"invoice\")`)"
        );
        // A search that matched once is meant as written when it has a capital, and a text
        // it would not have taken in any case is no miss; one in the text's case passes.
        for code in [
            "const titles = ['draft: a', 'Review the Draft: b'];\ndone(`${titles.filter(t => t.startsWith('draft:')).length}`)",
            "const lines = ['ERROR disk', 'INFO an error'];\ndone(`${lines.filter(l => l.startsWith('ERROR')).length}`)",
            "const lines = ['a Net profit', 'b'];\ndone(`${lines.filter(l => l.indexOf('Net profit') >= 0).length}`)",
            "done(`${'Net profit'.toLowerCase().includes('net profit')}`)",
        ] {
            let outcome = run(code, json!({}));
            assert!(outcome.result.is_ok(), "{code}: {outcome:?}");
            assert!(outcome.complete.is_some(), "{code}: {outcome:?}");
        }
    }

    #[test]
    fn an_answer_after_a_search_at_an_end_that_only_matched_further_in_is_refused() {
        let rows = "id,name,country\n1,Hans,Germany\n2,Ana,Spain\n3,Lena,Germany\n";
        let code = format!(
            "const rows = {rows:?}.split('\\n').slice(1);\nconst found = rows.filter(row => row.startsWith('Germany'));\ndone(`${{found.length}} customers`)"
        );
        let error = run(&code, json!({})).result.unwrap_err();
        assert_eq!(error.line, Some(3), "{error:?}");
        assert_eq!(
            error.message,
            "TypeError: the answer given to done() was not shown: `.startsWith(\"Germany\")` \
             found nothing all 4 times, but the text it searched has it further in: \
             \"1,Hans,Germany\". It is true only of a text that starts with it: compare the \
             field it is (`line.split(\",\")[2].trim() === \"Germany\"`)"
        );
        let error = run(
            "const lines = ['2024-05-01 ERROR disk full', '2024-05-01 INFO ok'];\ndone(`${lines.filter(l => l.endsWith('ERROR')).length}`)",
            json!({}),
        )
        .result
        .unwrap_err();
        assert!(
            error.message.ends_with(
                "has it further in: \"2024-05-01 ERROR disk full\". It is true only of a text \
                 that ends with it: look anywhere in it (`.includes(…)`), or at the part you mean"
            ),
            "{error:?}"
        );
        // Left alone: a search that matched once, a needle of punctuation or found only inside
        // a word, a search from a position the program gave, and a needle seen nowhere.
        for code in [
            "const rows = ['Germany,1', '2,Germany'];\ndone(`${rows.filter(r => r.startsWith('Germany')).length}`)",
            "const lines = ['x = 1 // one', 'y = 2'];\ndone(`${lines.filter(l => l.startsWith('//')).length}`)",
            "const names = ['Finland', 'Iceland'];\ndone(`${names.filter(n => n.startsWith('land')).length}`)",
            "const rows = ['1,Germany'];\ndone(`${rows.filter(r => r.startsWith('Germany', 0)).length}`)",
            "const rows = ['1,Spain'];\ndone(`${rows.filter(r => r.startsWith('Germany')).length}`)",
            "const paths = ['docs/a.md', 'src/b.rs'];\ndone(`${paths.filter(p => p.endsWith('.md')).length}`)",
        ] {
            let outcome = run(code, json!({}));
            assert!(outcome.result.is_ok(), "{code}: {outcome:?}");
            assert!(outcome.complete.is_some(), "{code}: {outcome:?}");
        }
        // A path searched from its start for a folder it is inside of.
        let error = run(
            "const paths = ['./docs/a.md', './src/b.rs'];\ndone(`${paths.filter(p => p.startsWith('docs/')).length}`)",
            json!({}),
        )
        .result
        .unwrap_err();
        assert!(
            error.message.contains("has it further in: \"./docs/a.md\""),
            "{error:?}"
        );
    }
}

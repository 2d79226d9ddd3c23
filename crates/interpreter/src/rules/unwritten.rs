//! **Unwritten file.** Fixes: a turn that ends while the file the user asked for was never
//! written. "Write a file sizes.txt that lists every file in data/ with its size": the model
//! logged each file with its size, then answered `done("The file sizes are: a.csv - 120
//! bytes, …")`, or said in prose that sizes.txt was created (file-sizes, tuning). "Write the
//! names of the .md files … to index.txt": it answered with the names (markdown-index). The
//! answer reads as success and the file is not there. The end of such a turn is held back
//! once, as `nothing_shown` holds back an empty one (the program's calls did run); after that
//! the turn ends as the model says. The candidate check (`mode/candidates.rs`) counts such an
//! ending as a failure the model would be told of, so a sample that writes runs in its place.
//!
//! A message asks for a file when one of its sentences has a verb that makes one (write, save,
//! create, export, …) and after it a file name (a word with an extension, not an address) that
//! is the verb's object or follows `to`, `into`, `as`, `file`, `called` or `named`: "Save the
//! totals as totals.csv". A file the sentence only reads from is not asked for ("Read
//! notes.txt and write a summary", "a summary of notes.txt"), nor the object of copy, move,
//! rename or export, which is where the file comes from ("Copy note.txt to …"). The file
//! counts as written when a call of the turn to a tool that is not read-only (a write, a
//! move, a shell command) has its name in a string of its input, whether the call succeeded or
//! not: a refused write is answered by saying so.
//!
//! Designed on the tuning split (file-sizes, markdown-index). Measured (round 33,
//! `docs/benchmarks.md`): tuning 26 → 27/30 (file-sizes passes), held-out 6 → 6/15 task for
//! task; it fired in no held-out run.

use serde_json::Value;

/// Verbs whose object may be a file the turn is to make.
const MAKES: [&str; 14] = [
    "write", "save", "create", "export", "store", "put", "append", "copy", "move", "rename",
    "generate", "produce", "make", "dump",
];

/// Of those, the verbs whose object is where the file comes from ("Copy note.txt to …"): only
/// a name after one of [`BEFORE_TARGET`] is the file they make.
const FROM_SOURCE: [&str; 4] = ["copy", "move", "rename", "export"];

/// Words after which a file name, later in a sentence with such a verb, is where it goes.
const BEFORE_TARGET: [&str; 6] = ["to", "into", "as", "file", "called", "named"];

/// The files `message` asks the turn to write, in the order it names them.
pub(crate) fn asked_files(message: &str) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for sentence in sentences(message) {
        let words: Vec<&str> = sentence.split_whitespace().collect();
        let Some(verb) = words
            .iter()
            .position(|word| MAKES.contains(&bare(word).to_lowercase().as_str()))
        else {
            continue;
        };
        let object_is_made = !FROM_SOURCE.contains(&bare(words[verb]).to_lowercase().as_str());
        for at in verb + 1..words.len() {
            let Some(name) = file_name(words[at]) else {
                continue;
            };
            let before = bare(words[at - 1]).to_lowercase();
            let target =
                (object_is_made && at == verb + 1) || BEFORE_TARGET.contains(&before.as_str());
            if target && !files.iter().any(|file| file == name) {
                files.push(name.to_owned());
            }
        }
    }
    files
}

/// The first of `asked` that no call in `changes` (tool calls of the turn that may change
/// something, by their input) names.
pub(crate) fn unwritten<'a>(
    asked: &'a [String],
    changes: impl Iterator<Item = &'a Value> + Clone,
) -> Option<&'a str> {
    asked
        .iter()
        .find(|file| {
            let name = file.rsplit('/').next().unwrap_or(file);
            !changes.clone().any(|input| {
                crate::engine::texts_in(input)
                    .into_iter()
                    .any(|text| names(text, name))
            })
        })
        .map(String::as_str)
}

/// Whether `text` names the file `name` (with a folder before it or not), not another file
/// whose name ends or starts with it: `data/sizes.txt` and `ls > sizes.txt` name `sizes.txt`,
/// `data/filesizes.txt` does not (a sampled program wrote that one, and the turn ended as if
/// sizes.txt were written: file-sizes, tuning, round 36).
fn names(text: &str, name: &str) -> bool {
    let in_a_name = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-');
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        !before.is_some_and(|c| in_a_name(c) || c == '.') && !after.is_some_and(in_a_name)
    })
}

/// Why the turn was not ended, naming `file` and, when the sandbox has one, the tool that
/// writes files (`write`, as code calls it).
pub(crate) fn notice(file: &str, write: Option<&str>) -> String {
    let how = match write {
        Some(write) => format!(
            "Write it with {write}({{ path: {}, content }}), the content built in the program \
             from what it read, then end with done(answer) saying what was written.",
            Value::String(file.to_owned())
        ),
        None => {
            "Write it with a tool, then end with done(answer) saying what was written.".to_owned()
        }
    };
    format!(
        "the turn was not ended: the user asked for {file} to be written, and no program of \
         this turn has written it (a log or an answer is not the file). {how}"
    )
}

/// `message` cut where a sentence ends: at `.`, `!` or `?` before a space or the end (a
/// file name's dot is followed by its extension), and at a line break.
fn sentences(message: &str) -> impl Iterator<Item = &str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut chars = message.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let next = chars.peek().map(|&(_, next)| next);
        let ends =
            c == '\n' || (matches!(c, '.' | '!' | '?') && next.is_none_or(char::is_whitespace));
        if ends {
            pieces.push(&message[start..at]);
            start = at + c.len_utf8();
        }
    }
    pieces.push(&message[start..]);
    pieces.into_iter().filter(|piece| !piece.trim().is_empty())
}

/// A word without the quotes and punctuation around it.
fn bare(word: &str) -> &str {
    word.trim_matches(|c: char| {
        matches!(
            c,
            '"' | '\'' | '`' | ',' | ';' | ':' | '(' | ')' | '[' | ']' | '.' | '!' | '?'
        )
    })
}

/// `word` when it is a file name: a stem of letters, digits, `_`, `-`, `.` or `/`, and an
/// extension of one to five letters and digits with a letter; not an address or a number.
fn file_name(word: &str) -> Option<&str> {
    let word = bare(word);
    let (stem, extension) = word.rsplit_once('.')?;
    let stem_ok = !stem.is_empty()
        && !stem.ends_with('/')
        && stem
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
        && stem.chars().any(char::is_alphanumeric);
    let extension_ok = (1..=5).contains(&extension.chars().count())
        && extension.chars().all(|c| c.is_ascii_alphanumeric())
        && extension.chars().any(|c| c.is_ascii_alphabetic());
    let address = word.contains("://") || word.starts_with("www.");
    (stem_ok && extension_ok && !address).then_some(word)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_file_to_make_is_asked_for() {
        let cases: [(&str, &[&str]); 12] = [
            (
                "Write a file sizes.txt that lists every file in data/ with its size in bytes, \
                 one file per line, like: name size",
                &["sizes.txt"],
            ),
            (
                "Write the names of the .md files directly in docs/ (not in its subfolders) to \
                 index.txt, one name per line.",
                &["index.txt"],
            ),
            (
                "Save the totals as `report/totals.csv`.",
                &["report/totals.csv"],
            ),
            ("Create notes.md with a heading.", &["notes.md"]),
            (
                "Copy the rows of a.csv that mention Leeds to leeds.csv",
                &["leeds.csv"],
            ),
            ("Copy note.txt in capitals", &[]),
            (
                "Move notes.txt to archive/ and rename it as old-notes.txt.",
                &["old-notes.txt"],
            ),
            ("Export data.json to data.csv", &["data.csv"]),
            ("Read notes.txt and write a summary.", &[]),
            ("Write a summary of notes.txt.", &[]),
            ("What port does config.toml give the database?", &[]),
            ("Write an email to bob@example.com about example.com.", &[]),
        ];
        for (message, files) in cases {
            assert_eq!(asked_files(message), files, "{message}");
        }
    }

    #[test]
    fn a_call_that_names_the_file_wrote_it() {
        let asked = vec!["sizes.txt".to_owned()];
        let write = json!({ "path": "sizes.txt", "content": "a.csv 120" });
        let shell = json!({ "command": "ls -l data > out/sizes.txt" });
        let other = json!({ "path": "notes.txt", "content": "" });
        assert_eq!(unwritten(&asked, [&other].into_iter()), Some("sizes.txt"));
        assert_eq!(unwritten(&asked, std::iter::empty()), Some("sizes.txt"));
        assert_eq!(unwritten(&asked, [&other, &write].into_iter()), None);
        assert_eq!(unwritten(&asked, [&shell].into_iter()), None);
        // Another file whose name holds this one's is not it.
        let longer = json!({ "path": "data/filesizes.txt", "content": "[]" });
        let copy = json!({ "path": "sizes.txt-old", "content": "[]" });
        assert_eq!(
            unwritten(&asked, [&longer, &copy].into_iter()),
            Some("sizes.txt")
        );
        let nested = json!({ "path": "data/sizes.txt", "content": "a.csv 120" });
        assert_eq!(unwritten(&asked, [&nested].into_iter()), None);
        assert_eq!(unwritten(&[], [&other].into_iter()), None);
    }
}

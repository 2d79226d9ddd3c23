//! **Fixed answer.** Fixes: a program that changes nothing and gives the user only words
//! written out in its own code, so that nothing it read reaches the user: the fallback line
//! after a search that never matched (`done("Failed to find 'port' in the database section")`,
//! its loop having started past the section), or a file's name shown where the file should
//! have been written (`output("docs/index.txt")`). Like an answer from reads that all came back
//! empty, it is a preference of the check (`mode/candidates.rs`), not an error: a sampled
//! program whose words are built from what it read runs in its place, and when none gets
//! through, the program runs as written and nothing is said to the model (a fixed "No errors
//! found." can be the right answer). Words the turn has already seen in a result or a log
//! (a value looked at, then written out in `done("5433")`) are not fixed, nor is text that
//! says a data word of one (round 32: `done("The services that are down are: search,
//! billing.")` after a program logged the status page naming them; only the whole text
//! counted before, so the model's right answer was passed over for a sample's).
//!
//! Designed on the tuning split (config-port, markdown-index). Measured (round 20,
//! `docs/benchmarks.md`): tuning 19 → 20/24 (config-port passes), held-out 6/12 → 6/12.

/// Whether `said` (the texts a program showed and answered, `dry_run::DryRun::said`) is
/// nothing but words written out in `code`, by a program that `changes` nothing (its dry run
/// planned no call). `seen` tells whether the turn has met a text before (in a result or a
/// log), which is then no fixed answer.
pub(crate) fn fixed(
    code: &str,
    said: &[String],
    changes: bool,
    seen: impl Fn(&str) -> bool,
) -> bool {
    let said: Vec<&str> = said
        .iter()
        .map(|text| text.trim())
        .filter(|text| !text.is_empty())
        .collect();
    !changes
        && !said.is_empty()
        && said
            .iter()
            .all(|text| written_out(code, text) && !seen(text))
}

/// Whether `text` is a string literal of `code`, in any of JavaScript's quotes (a template
/// without substitutions counts; one with them is built, not written out).
fn written_out(code: &str, text: &str) -> bool {
    ['"', '\'', '`']
        .iter()
        .any(|quote| code.contains(&format!("{quote}{text}{quote}")))
}

#[cfg(test)]
mod tests {
    use super::fixed;

    fn said(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|text| (*text).to_owned()).collect()
    }

    #[test]
    fn words_written_out_in_the_program_are_a_fixed_answer() {
        let code = "for (const line of lines) { if (line === '[database]') { done(port(line)) } }\n\
                    done(\"Failed to find 'port' in the database section\");";
        let texts = said(&["Failed to find 'port' in the database section"]);
        assert!(fixed(code, &texts, false, |_| false));
        assert!(fixed(
            "output(`docs/index.txt`)",
            &said(&["docs/index.txt"]),
            false,
            |_| false
        ));
    }

    #[test]
    fn built_changing_seen_or_silent_programs_are_not() {
        // Built from what the program read.
        let code = "const n = fs.list({}).entries.length;\ndone(`${n} files`);";
        assert!(!fixed(code, &said(&["7 files"]), false, |_| false));
        // One text written out beside one built.
        let code = "output('Files:');\noutput(names.join(', '));";
        assert!(!fixed(code, &said(&["Files:", "a, b"]), false, |_| false));
        // A confirmation after a write.
        let code = "todo.create({ title: 'x' });\ndone('Added the todo.');";
        assert!(!fixed(code, &said(&["Added the todo."]), true, |_| false));
        // A value the turn has seen, written out.
        let code = "done('5433')";
        assert!(!fixed(code, &said(&["5433"]), false, |text| text == "5433"));
        // Nothing said.
        assert!(!fixed("done()", &said(&[" "]), false, |_| false));
    }
}

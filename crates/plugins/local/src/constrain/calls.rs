//! Calls of names nobody declared, taken back while the program is written. A grammar cannot
//! know which names a program declares (that depends on what came before), so code mode's
//! grammar lets a program call any name; a 1.5B model then writes module loaders under names
//! of its own (`requireArtifact('fs')`) that throw a `ReferenceError` when it runs. With the
//! names the request says a program may call without declaring them
//! (`ModelRequest::callable`), each `(` the model writes is checked (`agentic-jscalls`): a
//! call of a bare name that is neither one of them nor declared earlier in the program is
//! taken back to the name's first token, that token is not chosen again at that place, and
//! decoding goes on from there, so the model writes a name that exists (or something else).
//!
//! Measured (round 22, `docs/benchmarks.md`): undefined calls 2 → 0 on the tuning split;
//! json-to-csv passes (the model declared the reader it had been importing), csv-sum lost;
//! tuning 21 → 21/24, held-out 6 → 6/12 task for task.

use std::collections::HashSet;

/// The most names taken back in one answer; past it the answer is left as the model writes
/// it (the sandbox still says what was wrong when it runs).
const MAX_TAKEN_BACK: usize = 24;

/// The call check of one answer.
#[derive(Debug)]
pub struct CallGuard {
    known: HashSet<String>,
    /// Tokens not to choose again, by the number of tokens before them in the answer.
    banned: Vec<(usize, u32)>,
    taken_back: usize,
}

impl CallGuard {
    /// A guard for a program that may call `names` (and what it declares) by a bare name.
    pub fn new(names: &[String]) -> Self {
        Self {
            known: names.iter().cloned().collect(),
            banned: Vec::new(),
            taken_back: 0,
        }
    }

    /// Where a call of a name neither known nor declared starts in `text`, when the text
    /// from byte `from` on (what the last token added) makes one.
    pub fn undeclared(&self, text: &str, from: usize) -> Option<usize> {
        if !text[from..].contains('(') {
            return None;
        }
        let start = program_start(text)?;
        let known = |name: &str| self.known.contains(name);
        let program = &text[start..];
        agentic_jscalls::undeclared_call(program, from.saturating_sub(start), &known).map(|call| {
            tracing::debug!(name = %call.name, "a call of an undeclared name, taken back");
            start + call.start
        })
    }

    /// Notes that `token`, chosen after `position` tokens of the answer, is taken back; the
    /// bans past that place no longer apply. False once 24 names have been (`MAX_TAKEN_BACK`).
    pub fn take_back(&mut self, position: usize, token: u32) -> bool {
        if self.taken_back >= MAX_TAKEN_BACK {
            return false;
        }
        self.taken_back += 1;
        self.banned.retain(|(at, _)| *at <= position);
        self.banned.push((position, token));
        true
    }

    /// Rules out the tokens taken back at `position` (the number of tokens so far).
    pub fn ban(&self, position: usize, logits: &mut [f32]) {
        for (at, token) in &self.banned {
            if *at == position
                && let Some(logit) = logits.get_mut(*token as usize)
            {
                *logit = f32::NEG_INFINITY;
            }
        }
    }

    /// How much of `text` may go out: not the name (and the blanks after it) it ends with,
    /// which a `(` may still make a call to take back.
    pub fn settled(text: &str) -> usize {
        text.trim_end_matches(|c: char| {
            c.is_alphanumeric() || c == '_' || c == '$' || c.is_whitespace()
        })
        .len()
    }
}

/// Where the program of a reply starts: after the line that opens its fence (```` ```js ````
/// at the start of a line, the first line or after a line of words), else at the start.
/// `None` while the fence's line is not yet finished. A closing fence reads as a template
/// literal to the scanner, so what follows it holds no calls.
fn program_start(text: &str) -> Option<usize> {
    let fence = if text.starts_with("```") {
        Some(0)
    } else {
        text.find("\n```").map(|at| at + 1)
    };
    match fence {
        None => Some(0),
        Some(at) => text[at..].find('\n').map(|end| at + end + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::CallGuard;

    #[test]
    fn an_undeclared_call_is_found_only_in_what_the_last_token_added() {
        let guard = CallGuard::new(&["parseInt".to_owned(), "done".to_owned()]);
        let text = "const read = requireArtifact(";
        assert_eq!(guard.undeclared(text, text.len() - 1), Some(13));
        // A token without `(` adds no call.
        assert_eq!(guard.undeclared("const read = requireArtifact", 20), None);
        assert_eq!(guard.undeclared("const n = parseInt(", 17), None);
        // In a fence, alone or after a line of words.
        for text in [
            "```javascript\nconst read = requireArtifact(",
            "Here is the code:\n```js\nconst read = requireArtifact(",
        ] {
            let start = text.find("requireArtifact").unwrap();
            assert_eq!(
                guard.undeclared(text, text.len() - 1),
                Some(start),
                "{text}"
            );
        }
        assert_eq!(guard.undeclared("```js\ndone(parseInt(", 17), None);
    }

    #[test]
    fn taken_back_tokens_are_ruled_out_at_their_place_only() {
        let mut guard = CallGuard::new(&[]);
        assert!(guard.take_back(5, 2));
        assert!(guard.take_back(7, 1));
        let mut logits = vec![0.0; 4];
        guard.ban(5, &mut logits);
        assert_eq!(logits, [0.0, 0.0, f32::NEG_INFINITY, 0.0]);
        // Taken back to an earlier place: the later ban goes.
        assert!(guard.take_back(3, 0));
        let mut logits = vec![0.0; 4];
        guard.ban(7, &mut logits);
        assert_eq!(logits, [0.0; 4]);
        for _ in 0..super::MAX_TAKEN_BACK {
            guard.take_back(1, 3);
        }
        assert!(!guard.take_back(1, 3));
    }

    #[test]
    fn a_name_at_the_end_is_not_settled() {
        assert_eq!(
            CallGuard::settled("const x = requireArt"),
            "const x =".len()
        );
        assert_eq!(CallGuard::settled("done(x);\n"), "done(x);".len());
        assert_eq!(CallGuard::settled("log(1)"), "log(1)".len());
    }
}

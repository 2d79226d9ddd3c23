//! **Undeclared call.** Fixes: a call of a function that neither the sandbox, the tools nor
//! any program of the turn declares, most often a module loader under another name once
//! `require` could not be written (`requireArtifact('fs').read`, sent five times over on a bare
//! `ReferenceError`). The error says that nothing is imported and what can be called.
//!
//! Designed on the tuning split (json-to-csv, round 14); not measured alone.

/// The note for `ReferenceError: name is not defined` when `code` calls `name(` and declares
/// no `name`; `None` otherwise (a name read, not called, or one an earlier program declared,
/// which `declared_earlier` explains).
pub(crate) fn note(message: &str, code: &str) -> Option<String> {
    let name = message
        .strip_prefix("ReferenceError: ")?
        .strip_suffix(" is not defined")?;
    let called = code.match_indices(name).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + name.len()..].trim_start();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.'))
            && after.starts_with('(')
    });
    if !called || crate::names::declares(code, name) {
        return None;
    }
    Some(format!(
        "`{name}` is no function here: nothing is imported or loaded. Call the tools by the \
         names their declarations give (each is already a function that returns its result), \
         and the sandbox's own: done, output, log, store, recall, parallel, llm."
    ))
}

#[cfg(test)]
mod tests {
    use super::note;

    #[test]
    fn a_called_name_nobody_declared_is_explained() {
        let code = "const read = requireArtifact('fs').read;\nread({ path: 'a' });";
        let told = note("ReferenceError: requireArtifact is not defined", code).unwrap();
        assert!(told.starts_with("`requireArtifact` is no function here"));
        // Read rather than called, or declared by the program: not this rule's.
        assert_eq!(
            note("ReferenceError: total is not defined", "done(total)"),
            None
        );
        assert_eq!(
            note(
                "ReferenceError: f is not defined",
                "function f() { return 1 }\nf()"
            ),
            None
        );
    }
}

//! **A declaration's parameter name passed as a value.** Fixes: the declarations read
//! `todo.create(input: { title: string; … })`, and the model wrote `todoCreate(input)` and
//! `fs.search(input)`, which ran with `undefined` (code mode had a global `input`) and met a
//! schema error about a missing field that it did not connect with its call (notes-todos in
//! round 15a, csv-sum in round 10). Code mode now binds no `input`, so the line throws a
//! `ReferenceError`, and this note says what `input` is.
//!
//! Designed on the tuning split (notes-todos, csv-sum); not measured alone.

/// The parameter name every tool declaration gives its one argument.
const PARAMETER: &str = "input";

/// The note for `ReferenceError: input is not defined` when `code` passes `input` to a call
/// (`callee(input)`) and declares no `input`; `None` otherwise.
pub(crate) fn note(message: &str, code: &str) -> Option<String> {
    let name = message
        .strip_prefix("ReferenceError: ")?
        .strip_suffix(" is not defined")?;
    if name != PARAMETER || crate::names::declares(code, PARAMETER) {
        return None;
    }
    let at = code.find(&format!("({PARAMETER})"))?;
    let callee: String = code[..at]
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.'))
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    if callee.is_empty() {
        return None;
    }
    Some(format!(
        "`input` is only the name the declarations give a tool's parameter \
         (`{callee}(input: {{ … }})`), not a value. Pass the object itself, with the fields the \
         declaration lists: `{callee}({{ … }})`."
    ))
}

#[cfg(test)]
mod tests {
    use super::note;

    #[test]
    fn the_parameter_name_passed_as_a_value_is_explained() {
        let message = "ReferenceError: input is not defined";
        let told = note(message, "const found = fs.search(input);").unwrap();
        assert!(told.contains("`fs.search({ … })`"), "{told}");
        // Declared by the program, another name, or not passed to a call: not this rule's.
        assert_eq!(
            note(message, "const input = { path: 'a' };\nfs.read(input);"),
            None
        );
        assert_eq!(
            note("ReferenceError: other is not defined", "f(other)"),
            None
        );
        assert_eq!(note(message, "log(input.path)"), None);
    }
}

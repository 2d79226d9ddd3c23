//! **Sampled changes.** Fixes: a program sampled in place of the model's own (the check of
//! `mode/candidates.rs`) that changes something the model never asked to change. A sample is
//! drawn warmer, to find a read or an input the greedy pick got wrong; it is not a license to
//! act. In round 25, the model copied a `todo.list()` after adding a todo; a sample in its place,
//! `todo.delete({ id })` of the todo just added, passed its dry run (a call that changes
//! things gets a placeholder there) and ran: the user's todo was gone, and a later sample
//! deleted a trigger. Round 24's dentist-done lost a todo the same way.
//!
//! So a sample may call a tool that changes things (one that is not read-only) only when the
//! model's own program calls that tool too: the sample can fix how it is called, never choose
//! a new effect. When the model's own program is a copy of one that did not fail, a sample
//! may change nothing at all: if it ran, what it changes has been changed (no todo added
//! twice); if it was not run (a person refused it, a rule held it back), nobody asked for a
//! change in its place. Read-only tools are free in both cases. A sample refused here is
//! skipped like one that only repeats another; nothing is said to the model.
//!
//! Calls are found in the source by every name the tool is bound as (`todo.delete`,
//! `todoDelete`, `tools["todo.delete"]`): a mention counts, run or not, which errs toward
//! refusing a sample and toward allowing the model's own program.
//!
//! Designed on the tuning split (todo-add). Measured (round 26, `docs/benchmarks.md`): tuning
//! 20 → 20/24 (todo-add passes; misplaced-report timed out, with no sample the rule could
//! skip), held-out 6 → 6/12 task for task; it skipped 1 sample on tuning and 4 on held-out
//! (a `todo.delete` in place of a copied `todo.complete`, `shell.exec` writing a file the
//! user had refused).

use agentic_core::Prepared;

use crate::protocol::ToolBinding;

/// The tools that change things (not read-only) that `code` names, by any name they are
/// bound as, in the order of `bindings`.
pub(crate) fn changing_tools(
    code: &str,
    prepared: &Prepared,
    bindings: &[ToolBinding],
) -> Vec<String> {
    bindings
        .iter()
        .filter(|binding| {
            prepared
                .tools
                .get(&binding.id)
                .is_some_and(|tool| !tool.read_only())
        })
        .filter(|binding| crate::dry_run::names_tool(code, binding))
        .map(|binding| binding.id.clone())
        .collect()
}

/// The first tool the sample changes things with that `allowed` (what the model's own
/// program may change) does not hold.
pub(crate) fn beyond<'a>(sample: &'a [String], allowed: &[String]) -> Option<&'a str> {
    sample
        .iter()
        .find(|tool| !allowed.contains(tool))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::beyond;

    #[test]
    fn a_sample_may_change_only_what_the_model_s_own_program_changes() {
        let own = vec!["todo.create".to_owned()];
        assert_eq!(beyond(&["todo.create".to_owned()], &own), None);
        assert_eq!(beyond(&[], &own), None);
        assert_eq!(
            beyond(&["todo.create".to_owned(), "todo.delete".to_owned()], &own),
            Some("todo.delete")
        );
        assert_eq!(
            beyond(&["todo.create".to_owned()], &[]),
            Some("todo.create")
        );
    }
}

//! Code mode's feedback for small models, one rule per file: what mistake each fixes and what
//! it was measured to do, in its module's first lines. Every error a rule writes into the
//! timeline carries the rule's name ([`Notice`]), by which later iterations recognise it; its
//! words are for the model only.
//!
//! How rules are judged: designed on the tuning split of `eval/` (`eval/split.toml`), kept
//! only when they do not lower the held-out split, both reported each time
//! (`docs/benchmarks.md`). Most were measured before that split, in whole-suite rounds that
//! changed several things at once; their files say so. A rule that makes a mistake impossible
//! beats one that explains it afterwards: with the embedded model, code mode's grammar
//! (`crate::grammar`) leaves no room for most of what `not_a_program` catches (JSON, other
//! languages, code around prose).
//!
//! Checks that run inside the sandbox stay with the engine, which runs them: typed results
//! (`engine/typed.rs`: a read of a field the result does not declare throws at its line;
//! round 12 build A, tuning 13 → 14/17, held-out 3 → 3/9), refused absent values
//! (`engine/absent.rs`, see `empty_values`; a refused `NaN` names the conversion of text that
//! made it, `engine/numbers.rs`, round 28), data read wrong without a word (`engine/silent.rs`:
//! `parseFloat("48,250")` throws, an answer after a search that only matched in another case
//! is refused, round 17; a field read of a string or a number throws, round 18: tuning 13 →
//! 14/17 with every program checked, held-out 3/9), an object literal that gives one key
//! twice (`engine/source.rs`, round 18: neutral, met once), a value handed to one of the
//! program's own functions that never reads it (`engine/dropped.rs`, round 19: neutral, met
//! in no run), a caught mistake of the program shown, answered or written (`engine/caught.rs`,
//! round 32: refused at that line), a comparison of a declared choice with a value it never
//! has (`engine/compared.rs`), answers of `Infinity` and of zeros no conversion read
//! (`engine/absent.rs`, `engine/numbers.rs`; round 34, with a lower-case search that missed a
//! text in another case refused after matching others, `engine/silent.rs`; round 36, a search
//! for a word with marks the text does not give it, `"x "` over `- [x]` lines), and the explanations of Node's and browsers' globals
//! (`engine/explain.rs`, not measured alone) and of a name read after the block that declared
//! it (`explain_block_scoped`, round 17: neutral, it appeared in no run). The system prompt's
//! "look before you compute" paragraph and worked example (`prompt.rs`) came with round 3
//! (10 → 16/26, in a package of seven changes).

pub(crate) mod afresh;
pub(crate) mod data_review;
pub(crate) mod did_nothing;
pub(crate) mod empty_values;
pub(crate) mod fixed_answer;
pub(crate) mod input_advice;
pub(crate) mod not_a_program;
pub(crate) mod nothing_shown;
pub(crate) mod parameter_name;
pub(crate) mod repeated;
pub(crate) mod sampled_changes;
pub(crate) mod transient;
pub(crate) mod undeclared_call;
pub(crate) mod unsaid;
pub(crate) mod unwritten;

use agentic_core::{ErrorKind, ToolResult};

/// The rules' names in the timeline: an error a rule wrote carries its name
/// ([`ToolResult::notice`]), by which later iterations, and a process that resumes the
/// prompt, recognise it. The names are stored: never rename one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notice {
    /// A reply that is not a program (`not_a_program`), or prose after a failure.
    NotAProgram,
    /// A failed program sent again (`repeated`).
    Repeated,
    /// Asked for a new program in a fresh request (`afresh`).
    Afresh,
    /// Prose that left unsaid what the last program found (`unsaid`).
    Unsaid,
    /// A program sent again after it was told so: the turn ends with a plain answer.
    Stuck,
    /// `done()` in a turn that showed the user nothing (`nothing_shown`). The program ran.
    NothingShown,
    /// A program that ran and did nothing: no tool, no log, nothing shown, no value
    /// (`did_nothing`).
    DidNothing,
    /// The turn's end, while a file the user asked for was not written (`unwritten`). The
    /// program ran.
    Unwritten,
}

impl Notice {
    const ALL: [Notice; 8] = [
        Notice::NotAProgram,
        Notice::Repeated,
        Notice::Afresh,
        Notice::Unsaid,
        Notice::Stuck,
        Notice::NothingShown,
        Notice::DidNothing,
        Notice::Unwritten,
    ];

    /// The name stored with the error.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Notice::NotAProgram => "not_a_program",
            Notice::Repeated => "repeated",
            Notice::Afresh => "afresh",
            Notice::Unsaid => "unsaid",
            Notice::Stuck => "stuck",
            Notice::NothingShown => "nothing_shown",
            Notice::DidNothing => "did_nothing",
            Notice::Unwritten => "unwritten",
        }
    }

    /// The rule that wrote `result`, if one of these did.
    pub(crate) fn of(result: &ToolResult) -> Option<Notice> {
        let name = result.notice()?;
        Notice::ALL.into_iter().find(|notice| notice.name() == name)
    }

    /// How the execution that met this rule ended: not run, except for a program that ran
    /// and showed nothing.
    pub(crate) fn kind(self) -> ErrorKind {
        match self {
            Notice::NothingShown | Notice::DidNothing | Notice::Unwritten => ErrorKind::Failed,
            _ => ErrorKind::NotRun,
        }
    }

    /// The execution's result: `error`, the words the model reads, written by this rule.
    pub(crate) fn result(self, error: String) -> ToolResult {
        ToolResult::error(self.kind(), error).with_notice(self.name())
    }
}

/// Whether an execution was a reply that was not run (any rule's, or a person's refusal).
pub(crate) fn not_run(result: &ToolResult) -> bool {
    result.error_kind() == Some(ErrorKind::NotRun)
}

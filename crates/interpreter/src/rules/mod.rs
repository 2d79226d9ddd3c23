//! Code mode's feedback for small models, one rule per file: what mistake each fixes and what
//! it was measured to do, in its module's first lines. Every notice a rule writes into the
//! timeline starts with its own constant, by which later iterations recognise it.
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
//! (`engine/absent.rs`, see `empty_values`), and the explanations of Node's and browsers'
//! globals (`engine/explain.rs`, not measured alone). The system prompt's "look before you
//! compute" paragraph and worked example (`prompt.rs`) came with round 3 (10 → 16/26, in a
//! package of seven changes).

pub(crate) mod afresh;
pub(crate) mod empty_values;
pub(crate) mod not_a_program;
pub(crate) mod nothing_shown;
pub(crate) mod repeated;
pub(crate) mod transient;
pub(crate) mod unsaid;

/// How the error of every reply that was not run starts.
pub(crate) const NOT_RUN: &str = "not run:";

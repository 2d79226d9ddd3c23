//! Test support for agentic's crates and for plugin crates: only ever a `[dev-dependencies]`
//! entry, so none of it (insta, regex, tempfile) reaches the `agentic` binary.
//!
//! - [`TimelineRunner`] runs a prompt against scripted model turns and captures its whole
//!   timeline for an insta snapshot; [`assert_timelines!`] snapshots every
//!   `tests/timelines/*.yaml` case of a crate.
//! - [`test_databases`] gives a SQLite file and, when configured, a fresh PostgreSQL database,
//!   each removed when the test ends.
//! - [`ToolHarness`] calls tools as a user would from a prompt, on a runtime with every linked
//!   plugin and a database.
//!
//! ```no_run
//! use agentic_testing::TimelineRunner;
//!
//! #[test]
//! fn timelines() {
//!     agentic_testing::assert_timelines!(TimelineRunner::new());
//! }
//! ```
#![forbid(unsafe_code)]

mod database;
mod harness;
pub mod kit;
mod require;
mod timeline;

pub use database::{TestDatabase, test_databases};
pub use harness::ToolHarness;
pub use require::Requirement;
pub use timeline::{Expect, HistoryPrompt, Recording, Timeline, TimelineCase, TimelineRunner};

#[doc(hidden)]
pub use insta as __insta;

/// Runs every `tests/timelines/*.yaml` case of the calling crate with `runner` and snapshots
/// each timeline as YAML, one snapshot per file. A second argument, a closure taking
/// `&mut Timeline`, adjusts each timeline before its snapshot (joining streamed pieces,
/// shortening long arrays).
#[macro_export]
macro_rules! assert_timelines {
    ($runner:expr) => {
        $crate::assert_timelines!($runner, |_: &mut $crate::Timeline| {})
    };
    ($runner:expr, $adjust:expr) => {{
        let runner = &$runner;
        let adjust = $adjust;
        $crate::__insta::glob!("timelines/*.yaml", |path| {
            let mut timeline = runner
                .run_file_blocking(path)
                .unwrap_or_else(|error| panic!("{}: {error:#}", path.display()));
            adjust(&mut timeline);
            $crate::__insta::assert_yaml_snapshot!(timeline);
        });
    }};
}

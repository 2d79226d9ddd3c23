//! Code mode, scenario by scenario: each `timelines/*.yaml` file is a case, and its whole
//! timeline (prompt, events, model requests) is snapshotted. The runner masks the system
//! prompt in them, so rewording the rules or declaring another tool does not rewrite every
//! snapshot; `the_code_mode_system_prompt` snapshots it once, whole.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// The interpreter plugin registers itself through inventory; name the crate so it links.
use agentic_interpreter as _;
use agentic_testing::{TimelineRunner, kit};

#[test]
fn code_mode_timelines() {
    let runner = TimelineRunner::new().plugin(kit::plugin());
    agentic_testing::assert_timelines!(runner);
}

/// The rules, the worked example and the kit's declarations, as the model reads them.
#[test]
fn the_code_mode_system_prompt() {
    let runner = TimelineRunner::new()
        .plugin(kit::plugin())
        .keep_code_mode_system_prompt();
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/timelines/complete.yaml");
    let timeline = runner.run_file_blocking(&path).unwrap();
    let system = timeline.requests[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.starts_with("You work by writing JavaScript."),
        "{system}"
    );
    insta::assert_snapshot!(system);
}

/// Tools that do not fit their share of the context window are named, not declared; the
/// functions of a namespace are listed once under it.
#[test]
fn the_code_mode_system_prompt_names_tools_that_do_not_fit() {
    let runner = TimelineRunner::new()
        .plugin(kit::plugin())
        .keep_code_mode_system_prompt();
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/prompts/names_only.yaml");
    let timeline = runner.run_file_blocking(&path).unwrap();
    let system = timeline.requests[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let tools = &system[system.find("\n\nTools, by name only").expect(&system)..];
    insta::assert_snapshot!(tools);
}

/// Over their share, the tools the message speaks of (`sort`) are declared, within the
/// share, and the others named.
#[test]
fn the_code_mode_system_prompt_declares_the_tools_a_message_speaks_of() {
    let runner = TimelineRunner::new()
        .plugin(kit::plugin())
        .keep_code_mode_system_prompt();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/prompts/relevant.yaml");
    let timeline = runner.run_file_blocking(&path).unwrap();
    let system = timeline.requests[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let tools = &system[system.find("\n\nTools for this message").expect(&system)..];
    insta::assert_snapshot!(tools);
}

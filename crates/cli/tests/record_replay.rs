//! Record and replay, from outside: the real `agentic` binary records a prompt as a test case
//! (`prompt --record`, `export --test`), replays it in a folder where none of its tools could
//! run, and replays an edited program against the recording. The cases recorded with the
//! embedded model (`tests/recorded/`) replay ten times in a row to the same snapshot.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};

// The plugins the recorded cases call register through inventory; name them so they link.
use agentic_interpreter as _;
use agentic_plugin_fs as _;
use agentic_plugin_time as _;
use agentic_plugin_todo as _;
use agentic_testing::{TimelineCase, TimelineRunner};

/// A code-mode turn that reads a file, writes one (which needs approval) and answers.
const TURNS: &str = r#"- code: |
    const note = fs.read({ path: "note.txt" });
    fs.write({ path: "copy.txt", content: note.content.toUpperCase() });
    const now = timeNow({ timezone: "UTC" });
    output(`Copied ${note.size} bytes at ${now.timeOfDay}.`);
    done();
"#;

fn agentic(folder: &Path, args: &[&str], turns: Option<&Path>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentic"));
    command
        .args(args)
        .current_dir(folder)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("GEMINI_API_KEY")
        .env_remove("AGENTIC_PROVIDER")
        .env(
            "AGENTIC_DATABASE_URL",
            format!("sqlite://{}?mode=rwc", folder.join("agentic.db").display()),
        )
        .stdin(Stdio::null());
    if let Some(turns) = turns {
        command.env("AGENTIC_PROVIDER", format!("script:{}", turns.display()));
    }
    command.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `message` in code mode in `folder` with the model playing `turns`, recording it as
/// `<name>.yaml` there; `extra` are more arguments (`--yes`, `-c <id>`). Returns the run and
/// the case's path.
fn record_in(
    folder: &Path,
    name: &str,
    turns: &str,
    message: &str,
    extra: &[&str],
) -> (Output, std::path::PathBuf) {
    let script = folder.join(format!("{name}-turns.yaml"));
    std::fs::write(&script, turns).unwrap();
    let case = folder.join(format!("{name}.yaml"));
    let mut arguments = vec!["prompt", message, "-m", "code"];
    arguments.extend_from_slice(extra);
    arguments.extend_from_slice(&["--record", case.to_str().unwrap()]);
    let output = agentic(folder, &arguments, Some(&script));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    (output, case)
}

/// `agentic replay <case>` run in `folder`, which must succeed; its stdout.
fn replay_in(folder: &Path, case: &Path) -> String {
    let replayed = agentic(folder, &["replay", case.to_str().unwrap()], None);
    assert_eq!(
        replayed.status.code(),
        Some(0),
        "{}",
        text(&replayed.stderr)
    );
    text(&replayed.stdout)
}

/// Records the prompt of [`TURNS`] in a new folder; returns the folder and the case's path.
fn record() -> (tempfile::TempDir, std::path::PathBuf) {
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("note.txt"), "hello").unwrap();
    let (output, case) = record_in(
        folder.path(),
        "case",
        TURNS,
        "Copy note.txt in capitals",
        &["--yes"],
    );
    assert!(text(&output.stdout).contains("Copied 5 bytes at"));
    (folder, case)
}

#[test]
fn a_recorded_prompt_replays_elsewhere_without_running_a_tool() {
    let (_folder, case_path) = record();
    let case = TimelineCase::from_yaml(&std::fs::read_to_string(&case_path).unwrap()).unwrap();
    let recorded = case.recorded.as_ref().unwrap();
    let tools: Vec<&str> = recorded
        .calls
        .iter()
        .map(|call| call.tool.as_str())
        .collect();
    assert_eq!(tools, ["fs.read", "fs.write", "time.now"]);
    assert_eq!(case.turns.len(), 1);
    // `--yes` approved the write: the case answers its approval request the same way.
    assert_eq!(case.decisions, vec![agentic_core::Verdict::Approve]);
    assert!(
        case.turns[0]
            .code
            .as_deref()
            .unwrap()
            .contains("toUpperCase")
    );

    // A folder with no note.txt: a real run would fail to read it and would write copy.txt.
    let elsewhere = tempfile::tempdir().unwrap();
    let stdout = replay_in(elsewhere.path(), &case_path);
    let agentic_core::replay::RecordedResult::Output(now) = &recorded.calls[2].result else {
        panic!("time.now was recorded as {:?}", recorded.calls[2].result);
    };
    let original_answer = format!("Copied 5 bytes at {}.", now["timeOfDay"].as_str().unwrap());
    assert!(stdout.contains(&original_answer), "{stdout}");
    assert!(!elsewhere.path().join("copy.txt").exists());
}

#[test]
fn export_writes_the_case_prompt_record_wrote() {
    let (folder, case_path) = record();
    let case = std::fs::read_to_string(&case_path).unwrap();
    let prompt_id = case
        .lines()
        .find_map(|line| line.trim().strip_prefix("from: prompt "))
        .unwrap()
        .to_owned();
    let exported = folder.path().join("tests/timelines/exported.yaml");
    let output = agentic(
        folder.path(),
        &["export", &prompt_id, "--test", exported.to_str().unwrap()],
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(std::fs::read_to_string(&exported).unwrap(), case);

    let output = agentic(
        folder.path(),
        &["export", "00000000-0000-4000-8000-000000000000"],
        None,
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("not found"),
        "{}",
        text(&output.stderr)
    );
}

#[test]
fn an_edited_program_replays_against_the_recording_and_a_new_call_is_named() {
    let (folder, case_path) = record();
    // The same reads and writes, another answer: everything comes from the recording.
    let same = folder.path().join("same.js");
    std::fs::write(
        &same,
        "const note = fs.read({ path: \"note.txt\" });\n\
         fs.write({ path: \"copy.txt\", content: note.content.toUpperCase() });\n\
         const now = timeNow({ timezone: \"UTC\" });\n\
         output(`It was ${now.weekday}; the note says ${note.content}.`);\n\
         done();\n",
    )
    .unwrap();
    std::fs::remove_file(folder.path().join("copy.txt")).unwrap();
    let output = agentic(
        folder.path(),
        &[
            "replay",
            case_path.to_str().unwrap(),
            "--code",
            same.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("the note says hello."));
    assert!(
        !folder.path().join("copy.txt").exists(),
        "a replay wrote a file"
    );

    // Another file: not in the recording, so it fails without running, and is named.
    let other = folder.path().join("other.js");
    std::fs::write(
        &other,
        "output(fs.read({ path: \"secret.txt\" }).content);\ndone();\n",
    )
    .unwrap();
    let output = agentic(
        folder.path(),
        &[
            "replay",
            case_path.to_str().unwrap(),
            "--code",
            other.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stdout));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(
            "call 1: the run made fs.read({\"path\":\"secret.txt\"}); the recording has \
             fs.read({\"path\":\"note.txt\"}) next"
        ),
        "{stderr}"
    );
}

/// Every case in `tests/recorded/`, replayed ten times: the same timeline each time, and
/// that timeline is the snapshot.
#[test]
fn recorded_cases_replay_ten_times_the_same() {
    let runner = TimelineRunner::new().with_temporary_database();
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/recorded");
    let mut cases: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "yaml")
        })
        .collect();
    cases.sort();
    assert!(!cases.is_empty());
    for path in cases {
        let first = runner.run_file_blocking(&path).unwrap();
        for round in 2..=10 {
            let again = runner.run_file_blocking(&path).unwrap();
            assert!(again == first, "{}: replay {round} differs", path.display());
        }
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        agentic_testing::assert_timeline_snapshot!(name, first);
    }
}

/// What a program reads that is not a tool (the clock, `Math.random()`) replays as recorded,
/// also when it reads it after its last tool call.
#[test]
fn a_replay_reads_the_recorded_clock_and_random_numbers() {
    let folder = tempfile::tempdir().unwrap();
    let (output, case) = record_in(
        folder.path(),
        "case",
        "- code: |\n    const first = timeNow({ timezone: \"UTC\" });\n    \
         output(`${new Date().toISOString()} ${Math.random()} ${Date.now()}`);\n    done();\n",
        "Read the clock",
        &[],
    );
    let answer = text(&output.stdout).trim().to_owned();
    assert!(answer.contains('T') && answer.contains('Z'), "{answer}");
    std::thread::sleep(std::time::Duration::from_millis(20));
    for _ in 0..2 {
        let stdout = replay_in(folder.path(), &case);
        assert!(
            stdout.contains(&answer),
            "recorded {answer:?}, replayed:\n{stdout}"
        );
    }
}

/// Against a server (`--server`), `--record` goes through `GET /api/prompts/{id}/export?as=test`;
/// the case replays here, with no server and none of its files.
#[test]
fn a_prompt_run_on_a_server_is_recorded_through_its_api() {
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("note.txt"), "hello").unwrap();
    let config = folder.path().join("agentic.toml");
    std::fs::write(
        &config,
        format!("[fs]\nroot = \"{}\"\n", folder.path().display()),
    )
    .unwrap();
    let turns = support::script("record-remote", TURNS);
    let database = format!(
        "sqlite://{}?mode=rwc",
        folder.path().join("server.db").display()
    );
    let (mut server, url, _) = support::serve_with(
        &turns,
        &database,
        &["--config", config.to_str().unwrap()],
        &[],
    );
    let elsewhere = tempfile::tempdir().unwrap();
    let case = elsewhere.path().join("remote.yaml");
    let output = Command::new(env!("CARGO_BIN_EXE_agentic"))
        .args([
            "--server",
            &url,
            "prompt",
            "Copy note.txt in capitals",
            "-m",
            "code",
            "--yes",
            "--record",
            case.to_str().unwrap(),
        ])
        .current_dir(elsewhere.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(
        folder.path().join("copy.txt").exists(),
        "the server did not write"
    );
    let recorded = TimelineCase::from_yaml(&std::fs::read_to_string(&case).unwrap()).unwrap();
    assert_eq!(recorded.decisions, vec![agentic_core::Verdict::Approve]);
    assert!(replay_in(elsewhere.path(), &case).contains("Copied 5 bytes at"));
    assert!(!elsewhere.path().join("copy.txt").exists());
}

/// A prompt whose conversation had an earlier prompt with an approval: the case plays the
/// earlier one first, with its decision, then this one.
#[test]
fn a_case_replays_the_approvals_of_earlier_prompts_first() {
    let (folder, _) = record();
    let listed = text(&agentic(folder.path(), &["conversations"], None).stdout);
    let conversation = listed.split_whitespace().next().unwrap().to_owned();
    let (output, case) = record_in(
        folder.path(),
        "second-case",
        "- code: |\n    const copy = fs.read({ path: \"copy.txt\" });\n    \
         output(`The copy says ${copy.content}.`);\n    done();\n",
        "What does the copy say?",
        &["-c", &conversation],
    );
    assert!(text(&output.stdout).contains("The copy says HELLO."));
    let recorded = TimelineCase::from_yaml(&std::fs::read_to_string(&case).unwrap()).unwrap();
    assert_eq!(recorded.history.len(), 1);
    assert_eq!(recorded.decisions, vec![agentic_core::Verdict::Approve]);
    let elsewhere = tempfile::tempdir().unwrap();
    assert!(replay_in(elsewhere.path(), &case).contains("The copy says HELLO."));
}

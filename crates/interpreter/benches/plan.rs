//! `cargo xtask bench plan`: what planning first costs. A read-heavy program (it reads 200
//! files of 4 KB through a read-only tool, sums their lines, and writes one report that needs
//! approval) runs in code mode two ways, round by round side by side: its real run alone
//! (calls approved by the configuration, no dry run), and its dry run (from the prompt's start
//! to the plan waiting for a person). Reports medians and the ratio; the target is ≤ 1.3×.
//! Two more programs write a header before their reads, so they go on calling tools after a
//! call answered with a placeholder. The first never looks at the header's result: one pass.
//! The second checks it, so its dry run takes a second pass (its reads answered from the
//! first's) to see whether it branches on the placeholder.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentic_core::{
    Config, Plugin, PrepareContext, PromptOptions, PromptState, Runtime, ToolError, define_tool,
};
use agentic_interpreter as _;
use agentic_plugin_script::{ScriptedProvider, Turn};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

const FILES: usize = 200;
const ROUNDS: usize = 15;

const PROGRAM: &str = r#"
let lines = 0;
for (let i = 0; i < 200; i++) {
  lines += disk.read({ path: "f" + i + ".txt" }).content.split("\n").length;
}
disk.write({ path: "report.txt", content: "lines: " + lines });
done("lines: " + lines);
"#;

const HEADER_FIRST: &str = r#"
disk.write({ path: "report.txt", content: "counting" });
let lines = 0;
for (let i = 0; i < 200; i++) {
  lines += disk.read({ path: "f" + i + ".txt" }).content.split("\n").length;
}
disk.write({ path: "report.txt", content: "lines: " + lines });
done("lines: " + lines);
"#;

const HEADER_CHECKED: &str = r#"
const header = disk.write({ path: "report.txt", content: "counting" });
if (header !== "written") { log("no header yet"); }
let lines = 0;
for (let i = 0; i < 200; i++) {
  lines += disk.read({ path: "f" + i + ".txt" }).content.split("\n").length;
}
disk.write({ path: "report.txt", content: "lines: " + lines });
done("lines: " + lines);
"#;

struct Disk(PathBuf);

#[derive(Deserialize, JsonSchema)]
struct Path {
    path: String,
}

#[derive(Deserialize, JsonSchema)]
struct Write {
    path: String,
    content: String,
}

#[derive(serde::Serialize, JsonSchema)]
struct Read {
    content: String,
}

#[async_trait]
impl Plugin for Disk {
    fn id(&self) -> &str {
        "disk"
    }

    async fn prepare(&self, context: &mut PrepareContext) -> anyhow::Result<()> {
        let root = self.0.clone();
        context.add_tool(
            define_tool("disk.read", "Reads a file", move |_cx, input: Path| {
                let path = root.join(input.path);
                async move {
                    let content = tokio::fs::read_to_string(path)
                        .await
                        .map_err(|error| ToolError::failed(error.to_string()))?;
                    Ok::<_, ToolError>(Read { content })
                }
            })
            .read_only()
            .into_arc(),
        );
        let root = self.0.clone();
        context.add_tool(
            define_tool("disk.write", "Writes a file", move |_cx, input: Write| {
                let path = root.join(input.path);
                async move {
                    tokio::fs::write(path, input.content)
                        .await
                        .map_err(|error| ToolError::failed(error.to_string()))?;
                    Ok::<_, ToolError>("written".to_owned())
                }
            })
            .require_approval("writes a file")
            .into_arc(),
        );
        Ok(())
    }
}

/// The time of one prompt, to its end (the real run) or to its plan (the dry run).
async fn once(root: &std::path::Path, program: &str, dry: bool) -> Duration {
    let provider = Arc::new(ScriptedProvider::new(vec![Turn {
        code: Some(program.to_owned()),
        ..Turn::default()
    }]));
    let interpreter = if dry {
        json!({ "plan": true })
    } else {
        json!({ "plan": false, "autoApprove": true })
    };
    let runtime = Runtime::builder()
        .config(Config::from_value(json!({ "interpreter": interpreter })))
        .registered_plugins()
        .plugin(Arc::new(Disk(root.to_owned())))
        .provider(provider)
        .build()
        .await
        .unwrap();
    let started = Instant::now();
    let prompt = runtime
        .prompts()
        .create_and_run(PromptOptions {
            user_id: "alice".into(),
            input: Some("count the lines".into()),
            mode: Some("code".into()),
            ..PromptOptions::default()
        })
        .await
        .unwrap();
    let took = started.elapsed();
    let expected = if dry {
        PromptState::WaitingForApproval
    } else {
        PromptState::Completed
    };
    assert_eq!(prompt.state, expected, "{:?}", prompt.error);
    took
}

fn median(times: &mut [Duration]) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1000.0
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let line = "x".repeat(63);
    let content = vec![line; 64].join("\n");
    for i in 0..FILES {
        std::fs::write(dir.path().join(format!("f{i}.txt")), &content).unwrap();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    for (program, what) in [
        (PROGRAM, "reads 200 files of 4 KB and writes one report"),
        (
            HEADER_FIRST,
            "writes a header, reads 200 files of 4 KB, and writes the report",
        ),
        (
            HEADER_CHECKED,
            "writes a header and checks its result, reads 200 files of 4 KB, and writes the \
             report (two passes)",
        ),
    ] {
        // Warm the sandbox's workers and the files' pages.
        runtime.block_on(once(dir.path(), program, false));
        runtime.block_on(once(dir.path(), program, true));
        let (mut real, mut dry) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            real.push(runtime.block_on(once(dir.path(), program, false)));
            dry.push(runtime.block_on(once(dir.path(), program, true)));
        }
        let (real, dry) = (median(&mut real), median(&mut dry));
        println!("A program that {what}, {ROUNDS} rounds side by side (medians)");
        println!("| run | ms |");
        println!("| --- | --- |");
        println!("| real run (no plan, approved by the configuration) | {real:.1} |");
        println!("| dry run, to the plan waiting | {dry:.1} |");
        println!("| dry run / real run | {:.2}x |", dry / real);
        println!();
    }
}

//! Hostile code against the isolated sandbox. After each attack the host is fine, the attack
//! ends in an error that says what happened, and the next script runs normally. Honest code
//! near the limits still works.

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentic_interpreter::protocol::{
    ExecuteRequest, ExecutionOutcome, HostReply, HostRequest, ScriptErrorKind, ToolBinding,
};
use agentic_interpreter::{Backend, Sandbox, SandboxConfig, SandboxEvent};
use serde_json::{Value, json};

fn sandbox(backend: Backend) -> Arc<Sandbox> {
    Sandbox::new(SandboxConfig {
        backend,
        wall_time_ms: 3_000,
        memory_bytes: 256 * 1024 * 1024,
        pool_size: 1,
        ..SandboxConfig::default()
    })
}

/// Runs a script whose only tool, `kit.add`, adds `a` and `b`.
async fn run(sandbox: &Arc<Sandbox>, code: &str) -> ExecutionOutcome {
    let mut execution = sandbox
        .start(ExecuteRequest {
            code: code.to_owned(),
            tools: vec![ToolBinding {
                id: "kit.add".to_owned(),
                function: Some("kitAdd".to_owned()),
                aliases: Vec::new(),
                member: None,
                description: "Adds".to_owned(),
                result: Default::default(),
            }],
            input: None,
            store: serde_json::Map::new(),
            limits: sandbox.config().script_limits(),
            same_tools_as_before: false,
            determinism: Default::default(),
        })
        .await;
    loop {
        match execution.next().await {
            SandboxEvent::Request { id, request, .. } => {
                let reply = match request {
                    HostRequest::CallTool { input, .. } => HostReply::Value {
                        value: json!(input["a"].as_i64().unwrap() + input["b"].as_i64().unwrap()),
                    },
                    other => panic!("unexpected request {other:?}"),
                };
                execution.reply(id, reply).await;
            }
            SandboxEvent::Output(_) | SandboxEvent::Log(_) => {}
            SandboxEvent::Finished(outcome) => return *outcome,
        }
    }
}

async fn value_of(sandbox: &Arc<Sandbox>, code: &str) -> Value {
    match run(sandbox, code).await.result {
        Ok(value) => value,
        Err(error) => panic!("{code:?} failed: {}", error.describe()),
    }
}

/// The attack fails with an error containing `expected`, and the sandbox still works.
async fn check_contained(sandbox: &Arc<Sandbox>, code: &str, expected: &[&str]) {
    let outcome = run(sandbox, code).await;
    let error = match outcome.result {
        Ok(value) => panic!("{code:?} should fail, gave {value}"),
        Err(error) => error,
    };
    let text = error.describe();
    assert!(
        expected.iter().any(|part| text.contains(part)),
        "{code:?} failed with {text:?}, expected one of {expected:?}"
    );
    assert_eq!(
        value_of(sandbox, "kitAdd({a: 1, b: 1})").await,
        json!(2),
        "after {code:?}"
    );
}

const TIME_LIMIT: &str = "time limit";

#[tokio::test]
async fn an_endless_loop_is_killed_at_the_deadline() {
    let sandbox = sandbox(Backend::Isolated);
    check_contained(&sandbox, "while (true) {}", &[TIME_LIMIT]).await;
}

#[tokio::test]
async fn unbounded_recursion_is_stopped_in_every_shape() {
    let sandbox = sandbox(Backend::Isolated);
    // Plain recursion and recursion through a getter hit the call-depth limit.
    for code in [
        "function f() { return f(); } f()",
        "const o = { get x() { return this.x; } }; o.x",
    ] {
        let error = run(&sandbox, code).await.result.expect_err(code);
        assert!(
            error.describe().contains("recursive calls"),
            "{code:?}: {}",
            error.describe()
        );
        assert_eq!(
            value_of(&sandbox, "1 + 1").await,
            json!(2),
            "after {code:?}"
        );
    }
    // An async function that calls itself before its first `await` makes Boa panic inside
    // `await` (it holds that step cannot fail): the script gets an error, in both backends.
    for backend in [Backend::Isolated, Backend::InProcess] {
        let sandbox = self::sandbox(backend);
        let code = "const f = async (n) => { const r = await f(n + 1); return r; };\nawait f(0);";
        let error = run(&sandbox, code).await.result.expect_err(code);
        assert!(
            error.describe().contains("recursed too deeply"),
            "{backend:?}: {}",
            error.describe()
        );
        assert_eq!(value_of(&sandbox, "1 + 1").await, json!(2), "{backend:?}");
    }
    // Recursion through `valueOf` and sort comparators re-enters the engine from native code;
    // whatever Boa makes of it (an error, a value, or a crashed worker), the host carries on.
    for code in [
        "const o = { valueOf() { return o + 1; } }; o + 1",
        "[3, 2, 1].sort(function compare(a, b) { [a, b].sort(compare); return 0; })",
    ] {
        let _ = run(&sandbox, code).await;
        assert_eq!(
            value_of(&sandbox, "1 + 1").await,
            json!(2),
            "after {code:?}"
        );
    }
}

#[tokio::test]
async fn huge_allocations_hit_the_memory_cap() {
    let sandbox = sandbox(Backend::Isolated);
    check_contained(
        &sandbox,
        r#""x".repeat(2 ** 28)"#,
        &["memory limit", "RangeError", "Invalid string length"],
    )
    .await;
    // Arrays of big strings: the worker's allocator hits the address-space cap and aborts.
    check_contained(
        &sandbox,
        r#"const all = []; while (true) { all.push("x".repeat(10000000) + all.length); }"#,
        &["256 MiB memory limit"],
    )
    .await;
    // Arrays of typed arrays: Boa reports the failed allocation as a RangeError.
    check_contained(
        &sandbox,
        "const all = []; while (true) { all.push(new Float64Array(4000000)); }",
        &["256 MiB memory limit", "RangeError"],
    )
    .await;
}

#[tokio::test]
async fn catastrophic_regex_backtracking_is_killed() {
    let sandbox = sandbox(Backend::Isolated);
    check_contained(
        &sandbox,
        r#"/(a+)+$/.test("a".repeat(30) + "!")"#,
        &[TIME_LIMIT],
    )
    .await;
}

#[tokio::test]
async fn a_self_requeuing_promise_chain_is_killed() {
    let sandbox = sandbox(Backend::Isolated);
    check_contained(
        &sandbox,
        "function again() { Promise.resolve().then(again); } again(); 1",
        &[TIME_LIMIT],
    )
    .await;
}

#[tokio::test]
async fn deeply_nested_source_is_refused_before_parsing() {
    let sandbox = sandbox(Backend::Isolated);
    let outcome = run(&sandbox, &"[".repeat(100_000)).await;
    let error = outcome.result.unwrap_err();
    assert_eq!(error.kind, ScriptErrorKind::Syntax);
    assert!(
        error.message.contains("nested 100000 levels deep"),
        "{}",
        error.message
    );
    assert_eq!(value_of(&sandbox, "1 + 1").await, json!(2));
}

#[tokio::test]
async fn the_global_object_holds_only_what_the_sandbox_exposes() {
    let sandbox = sandbox(Backend::Isolated);
    let exposed = value_of(
        &sandbox,
        r#"
        const global = (function () {}).constructor("return this")();
        ({
          sameGlobal: global === globalThis,
          host: ["process", "setTimeout", "setInterval", "fetch", "Deno", "Bun",
                 "XMLHttpRequest", "WebSocket"].filter((name) => typeof global[name] !== "undefined"),
          // The sandbox's own `require` gives a tool namespace and nothing of the host's.
          required: ["fs", "node:fs", "child_process", "os"].map((name) => {
            try { return typeof require(name); } catch (error) { return error.name; }
          }),
          sandbox: ["output", "done", "kitAdd", "tools"].map((name) => typeof global[name]),
          // Not the host's console: the sandbox's `log` under the names models use.
          console: Object.keys(console),
        })
        "#,
    )
    .await;
    assert_eq!(
        exposed,
        json!({
            "sameGlobal": true,
            "host": [],
            "required": ["ReferenceError", "ReferenceError", "ReferenceError", "ReferenceError"],
            "sandbox": ["function", "function", "function", "object"],
            "console": ["log", "info", "warn", "error", "debug"],
        })
    );
    check_contained(
        &sandbox,
        r#"await import("fs")"#,
        &["fs", "import", "module"],
    )
    .await;
}

#[tokio::test]
async fn prototype_pollution_does_not_reach_the_next_script() {
    let sandbox = sandbox(Backend::Isolated);
    assert_eq!(
        value_of(&sandbox, "Object.prototype.polluted = 'yes'; ({}).polluted").await,
        json!("yes")
    );
    for _ in 0..3 {
        assert_eq!(
            value_of(&sandbox, "typeof ({}).polluted").await,
            json!("undefined")
        );
    }
}

#[tokio::test]
async fn too_much_code_is_refused() {
    let sandbox = sandbox(Backend::Isolated);
    let code = format!("// {}\n1", "x".repeat(200 * 1024));
    check_contained(&sandbox, &code, &["the limit is 102400 bytes"]).await;
}

#[tokio::test]
async fn output_past_the_cap_is_cut_with_a_marker() {
    let sandbox = sandbox(Backend::Isolated);
    let mut execution = sandbox
        .start(ExecuteRequest {
            code: r#"output("x".repeat(60000)); output("more")"#.to_owned(),
            tools: vec![],
            input: None,
            store: serde_json::Map::new(),
            limits: sandbox.config().script_limits(),
            same_tools_as_before: false,
            determinism: Default::default(),
        })
        .await;
    let mut outputs = Vec::new();
    loop {
        match execution.next().await {
            SandboxEvent::Output(text) => outputs.push(text),
            SandboxEvent::Finished(outcome) => {
                assert!(outcome.result.is_ok());
                break;
            }
            _ => {}
        }
    }
    assert_eq!(outputs.len(), 1, "output after the cap is dropped");
    assert!(outputs[0].starts_with(&"x".repeat(50_000)));
    assert!(
        outputs[0].ends_with("[output truncated: the limit is 50000 characters per execution]")
    );
}

#[tokio::test]
async fn tool_calls_past_the_limit_throw() {
    let sandbox = sandbox(Backend::Isolated);
    let value = value_of(
        &sandbox,
        "let calls = 0; try { while (true) { kitAdd({a: 1, b: 1}); calls++; } } catch (e) { [calls, e.message] }",
    )
    .await;
    assert_eq!(
        value,
        json!([
            1000,
            "tool call limit reached: at most 1000 calls per execution"
        ])
    );
}

#[tokio::test]
async fn honest_code_near_the_limits_works_in_both_backends() {
    for backend in [Backend::Isolated, Backend::InProcess] {
        let sandbox = sandbox(backend);
        assert_eq!(
            value_of(
                &sandbox,
                "function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); } fib(25)"
            )
            .await,
            json!(75025),
            "{backend:?}"
        );
        let walk = r#"
            function build(depth) { return depth === 0 ? null : { value: depth, child: build(depth - 1) }; }
            function sum(node) { return node === null ? 0 : node.value + sum(node.child); }
            sum(build(1000))
        "#;
        assert_eq!(value_of(&sandbox, walk).await, json!(500500), "{backend:?}");
        let transform = r#"
            const items = Array.from({ length: 100000 }, (_, i) => i);
            const result = items.map((x) => x * 2).filter((x) => x % 3 === 0).reduce((a, b) => a + b, 0);
            result
        "#;
        assert_eq!(
            value_of(&sandbox, transform).await,
            json!(3333366666i64),
            "{backend:?}"
        );
    }
}

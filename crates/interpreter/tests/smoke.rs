#![allow(clippy::unwrap_used, clippy::expect_used)]
use agentic_interpreter::protocol::*;
use agentic_interpreter::*;
use serde_json::json;

async fn run(sandbox: &std::sync::Arc<Sandbox>, code: &str) -> (ExecutionOutcome, Vec<String>) {
    let request = ExecuteRequest {
        code: code.to_owned(),
        tools: vec![ToolBinding { id: "kit.add".into(), function: Some("kitAdd".into()), description: "adds".into() }],
        input: Some(json!({"n": 3})),
        store: Default::default(),
        limits: sandbox.config().script_limits(),
        allow_prose: true,
    };
    let mut execution = sandbox.start(request).await;
    let mut notes = Vec::new();
    loop {
        match execution.next().await {
            SandboxEvent::Request { id, request } => {
                notes.push(format!("request {request:?}"));
                let reply = match request {
                    HostRequest::CallTool { input, .. } => HostReply::Value { value: json!(input["a"].as_i64().unwrap_or(0) + input["b"].as_i64().unwrap_or(0)) },
                    _ => HostReply::Error { message: "nope".into() },
                };
                execution.reply(id, reply).await;
            }
            SandboxEvent::Output(text) => notes.push(format!("output {text}")),
            SandboxEvent::Log(text) => notes.push(format!("log {text}")),
            SandboxEvent::Finished(outcome) => return (*outcome, notes),
        }
    }
}

#[tokio::test]
async fn smoke() {
    for backend in [Backend::InProcess, Backend::Isolated] {
        let sandbox = Sandbox::new(SandboxConfig { backend, wall_time_ms: 3000, ..SandboxConfig::default() });
        for code in [
            "1 + 2",
            "const x = kitAdd({a: 1, b: 2});\noutput('x=' + x);\nx * 10",
            "const y = await kitAdd({a: 5, b: 5}); return y",
            "log('hi', {a: 1}); done()",
            "let a = 1;\nnull.foo",
            "const a = ;",
            "The answer is 42.",
            "try { tools['kit.add']({a:1,b:1}); throw new Error('boom') } catch (e) { e.message }",
            "input.n * 2",
            "function fib(n) { return n < 2 ? n : fib(n-1) + fib(n-2) } fib(20)",
            "(function(){}).constructor('return this')().output === output",
            "while(true){}",
        ] {
            let started = std::time::Instant::now();
            let (outcome, notes) = run(&sandbox, code).await;
            println!("{backend:?} {code:?} -> {:?} {notes:?} done={} in {:?}", outcome.result, outcome.done, started.elapsed());
        }
    }
}

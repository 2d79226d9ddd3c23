//! Code mode with a sandbox limit of your own: a program that runs too long is stopped, and
//! the model reads why and writes another.
//!
//! `cargo run -p agentic --example sandbox_limit`

use agentic::Agent;
use agentic::serde_json::json;

#[agentic::main]
async fn main() -> agentic::Result<()> {
    let agent = Agent::builder()
        .mode(agentic::mode::CODE)
        // Each program may run for 1 s of wall time and make 20 tool calls at most.
        .section("interpreter", json!({ "sandbox": { "wallTimeMs": 1000, "maxToolCalls": 20 } }))
        .without(&["shell", "web"])
        .build()
        .await?;
    let reply = agent.run("Count to a billion, then say done.").await?;
    for output in reply.timeline() {
        if let agentic::PromptOutput::Tool(call) = output
            && let agentic::ToolResult::Error { error, .. } = &call.result
        {
            println!("a program failed: {error}");
        }
    }
    println!("{}", reply.answer());
    Ok(())
}

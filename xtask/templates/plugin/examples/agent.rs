//! An agent that has the `{{name}}` plugin's tools, in code mode.
//!
//! `cargo run --example agent -- "Say hello to Ada"` asks the embedded model (the first run
//! downloads it); `AGENTIC_PROVIDER=script:turns/hello.yaml cargo run --example agent` plays
//! scripted turns instead, and `OPENAI_BASE_URL` or `OPENAI_API_KEY` point it at a server of
//! your own.

use agentic::Agent;
use agentic_plugin_{{name}}::{{Title}}Plugin;

#[agentic::main]
async fn main() -> agentic::Result<()> {
    let message = std::env::args().nth(1).unwrap_or_else(|| "Say hello to Ada".to_owned());
    let agent = Agent::builder().mode("code").plugin({{Title}}Plugin).build().await?;
    println!("{}", agent.run(&message).await?.answer());
    Ok(())
}

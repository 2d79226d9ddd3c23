//! A conversation kept in a SQLite file and continued by id: the model sees what was said
//! before, in this process or a later one.
//!
//! `cargo run -p agentic --example conversation -- agent.db`

use agentic::Agent;

#[agentic::main]
async fn main() -> agentic::Result<()> {
    let file = std::env::args().nth(1).unwrap_or_else(|| "agent.db".to_owned());
    let agent = Agent::builder()
        .store(&format!("sqlite://{file}?mode=rwc"))
        .without(&["shell", "web"])
        .build()
        .await?;
    let first = agent.run("My name is Ada. Please remember it.").await?;
    println!("{}", first.answer());
    let second = agent.continue_with(&first.conversation_id, "What is my name?").await?;
    println!("{}", second.answer());
    println!("conversation {}", second.conversation_id);
    Ok(())
}

//! An agent in ten lines: code mode, one tool of your own, an answer.
//!
//! `cargo run -p agentic --example ten_lines` (the embedded model; the first run downloads
//! it), or with `AGENTIC_PROVIDER=openai` and `OPENAI_BASE_URL` for a server of your own.

/// Today's weather in a city.
#[agentic::tool(id = "weather.today")]
async fn weather(city: String) -> String {
    format!("sunny, 21 °C in {city}")
}

#[agentic::main]
async fn main() -> agentic::Result<()> {
    let agent = agentic::Agent::builder().mode("code").tool(weather()).build().await?;
    println!("{}", agent.run("What is the weather in Lyon today?").await?.answer());
    Ok(())
}

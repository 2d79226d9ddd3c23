//! A tool with typed input and output: serde and schemars types, a JSON Schema the model is
//! shown, input checked against it before the tool runs, and an error the model can read.
//!
//! `cargo run -p agentic --example typed_tool`

use agentic::schemars::JsonSchema;
use agentic::serde::{Deserialize, Serialize};
use agentic::{Agent, ToolError, define_tool};

/// What the model sends.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "agentic::serde")]
#[schemars(crate = "agentic::schemars")]
struct Order {
    /// The product's SKU, e.g. `KB-101`.
    sku: String,
    /// How many, at least 1.
    #[schemars(range(min = 1))]
    quantity: u32,
}

/// What the tool answers.
#[derive(Serialize, JsonSchema)]
#[serde(crate = "agentic::serde")]
#[schemars(crate = "agentic::schemars")]
struct Quote {
    sku: String,
    total_cents: u64,
}

#[agentic::main]
async fn main() -> agentic::Result<()> {
    let quote = define_tool(
        "shop.quote",
        "Prices an order of one product",
        |_context, order: Order| async move {
            let unit_cents = match order.sku.as_str() {
                "KB-101" => 4_990,
                "MS-200" => 2_490,
                other => {
                    return Err(ToolError::failed(format!(
                        "no product {other}; try KB-101 or MS-200"
                    )));
                }
            };
            Ok(Quote { total_cents: unit_cents * u64::from(order.quantity), sku: order.sku })
        },
    );
    let agent = Agent::builder().tool(quote).without(&["shell", "web"]).build().await?;
    let reply = agent.run("How much are three KB-101 keyboards?").await?;
    for output in reply.timeline() {
        if let agentic::PromptOutput::Tool(call) = output {
            match &call.result {
                agentic::ToolResult::Success { output } => {
                    println!("{} -> {output}", call.function)
                }
                agentic::ToolResult::Error { error, .. } => {
                    println!("{} refused: {error}", call.function);
                }
                agentic::ToolResult::Pending { .. } => {}
            }
        }
    }
    println!("{}", reply.answer());
    Ok(())
}

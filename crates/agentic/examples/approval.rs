//! A tool that waits for a person. Code decides what it can as calls come (`on_approval`);
//! what it leaves waits in the reply until someone decides it (`Agent::decide`).
//!
//! `cargo run -p agentic --example approval`

use agentic::{Agent, PromptState, ToolError, Verdict, define_tool};

#[derive(agentic::serde::Deserialize, agentic::schemars::JsonSchema)]
#[serde(crate = "agentic::serde")]
#[schemars(crate = "agentic::schemars")]
struct Refund {
    order: String,
    cents: u64,
}

#[agentic::main]
async fn main() -> agentic::Result<()> {
    let refund =
        define_tool("shop.refund", "Refunds an order", |_context, refund: Refund| async move {
            Ok::<_, ToolError>(format!("refunded {} cents on {}", refund.cents, refund.order))
        })
        .require_approval("it sends money back to a customer");
    let agent = Agent::builder()
        .tool(refund)
        .without(&["shell", "web"])
        // Refunds up to 50.00 go through; larger ones wait for a manager.
        .on_approval(|request| {
            let cents = request.call.input["cents"].as_u64().unwrap_or(u64::MAX);
            println!("asked: {} ({}), {cents} cents", request.call.function, request.reason);
            (cents <= 5_000).then_some(Verdict::Approve)
        })
        .build()
        .await?;

    let mut reply = agent.run("Refund 120.00 on order A-17").await?;
    while reply.state() == PromptState::WaitingForApproval {
        let call = reply.waiting()[0].clone();
        println!("waiting for a manager: {} {}", call.function, call.input);
        // A manager says yes (in a real program: a button, a chat message, an API call).
        reply = agent.decide(&reply, &call.id, Verdict::Approve).await?;
    }
    println!("{:?}: {}", reply.state(), reply.answer());

    let reply = agent.run("Refund 20.00 on order B-3").await?;
    println!("{:?}: {}", reply.state(), reply.answer());
    Ok(())
}

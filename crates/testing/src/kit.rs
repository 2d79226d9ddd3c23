//! Tools for exercising execution modes: one of each way a tool can behave (a value, an
//! error, a panic, an approval, a long result). Mode authors use them in timeline tests.

use std::sync::Arc;

use agentic_core::{Plugin, PrepareContext, ToolError, define_tool};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

/// The `kit` plugin: `kit.echo` and `kit.add` (idempotent), `kit.fail`, `kit.panic`,
/// `kit.delete` (needs approval), `kit.big`, `kit.sort` (an enum field) and `kit.list` (a
/// result with a list field, as list tools return).
pub fn plugin() -> Arc<dyn Plugin> {
    Arc::new(Kit)
}

struct Kit;

#[derive(Deserialize, JsonSchema)]
struct Text {
    text: String,
}

#[derive(Deserialize, JsonSchema)]
struct Numbers {
    a: i64,
    b: i64,
}

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

#[derive(Deserialize, JsonSchema)]
struct Path {
    path: String,
}

#[derive(Deserialize, JsonSchema)]
struct Size {
    size: usize,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Sort {
    items: Vec<String>,
    /// Which way to sort.
    order: Order,
}

#[derive(Deserialize, JsonSchema)]
struct Count {
    count: usize,
}

/// What `kit.list` returns.
#[derive(serde::Serialize, JsonSchema)]
struct Listing {
    items: Vec<Item>,
    total: usize,
}

/// One numbered item.
#[derive(serde::Serialize, JsonSchema)]
struct Item {
    n: usize,
    even: bool,
}

/// A sort order.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Order {
    /// A to Z.
    Asc,
    /// Z to A.
    Desc,
}

#[async_trait]
impl Plugin for Kit {
    fn id(&self) -> &str {
        "kit"
    }

    async fn prepare(&self, context: &mut PrepareContext) -> anyhow::Result<()> {
        context.add_tool(
            define_tool(
                "kit.echo",
                "Returns its text",
                |_cx, input: Text| async move { Ok::<_, ToolError>(input.text) },
            )
            .idempotent()
            .into_arc(),
        );
        context.add_tool(
            define_tool(
                "kit.add",
                "Adds two integers",
                |_cx, input: Numbers| async move { Ok::<_, ToolError>(input.a + input.b) },
            )
            .idempotent()
            .into_arc(),
        );
        context.add_tool(
            define_tool(
                "kit.fail",
                "Always fails with its text",
                |_cx, input: Text| async move { Err::<String, _>(ToolError::failed(input.text)) },
            )
            .into_arc(),
        );
        context.add_tool(
            define_tool("kit.panic", "Panics", |_cx, _input: Nothing| async move {
                if true {
                    panic!("the tool fell over");
                }
                Ok::<String, ToolError>(String::new())
            })
            .into_arc(),
        );
        context.add_tool(
            define_tool("kit.delete", "Deletes a file", |_cx, input: Path| async move {
                Ok::<_, ToolError>(format!("deleted {}", input.path))
            })
            .approval_when(|input: &Path| Some(format!("deletes {}", input.path)))
            .into_arc(),
        );
        context.add_tool(
            define_tool(
                "kit.big",
                "Returns a long text",
                |_cx, input: Size| async move { Ok::<_, ToolError>("x".repeat(input.size)) },
            )
            .into_arc(),
        );
        context.add_tool(
            define_tool("kit.sort", "Sorts texts", |_cx, input: Sort| async move {
                let mut items = input.items;
                items.sort();
                if matches!(input.order, Order::Desc) {
                    items.reverse();
                }
                Ok::<_, ToolError>(items)
            })
            .into_arc(),
        );
        context.add_tool(
            define_tool(
                "kit.list",
                "Lists numbered items",
                |_cx, input: Count| async move {
                    let items = (1..=input.count)
                        .map(|n| Item {
                            n,
                            even: n % 2 == 0,
                        })
                        .collect();
                    Ok::<_, ToolError>(Listing {
                        items,
                        total: input.count,
                    })
                },
            )
            .read_only()
            .into_arc(),
        );
        context.add_context("Test context", "The kit plugin is loaded.");
        Ok(())
    }
}

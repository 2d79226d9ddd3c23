//! The `{{name}}` plugin for agentic: the tools it offers every prompt.
//!
//! Give it to an agent with `Agent::builder().plugin({{Title}}Plugin)`. Its one tool,
//! `{{name}}.hello`, is where to start: change it, add tools beside it, and let
//! `tests/timelines/` show what a model sees when it calls them.

use agentic::schemars::JsonSchema;
use agentic::serde::{Deserialize, Serialize};
use agentic::{Plugin, PrepareContext, ToolError, async_trait, define_tool};

/// The plugin: its id is the prefix of its tools' names.
#[derive(Debug, Default, Clone, Copy)]
pub struct {{Title}}Plugin;

/// What the model sends to `{{name}}.hello`. Each field's doc comment is its description in
/// the JSON Schema the model is shown; input that does not fit is refused before the tool runs.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(crate = "agentic::serde", deny_unknown_fields)]
#[schemars(crate = "agentic::schemars")]
pub struct HelloInput {
    /// Who to greet, e.g. `Ada`.
    pub name: String,
}

/// What `{{name}}.hello` answers. In code mode the program reads these fields, and reading
/// any other fails at that line.
#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(crate = "agentic::serde")]
#[schemars(crate = "agentic::schemars")]
pub struct HelloOutput {
    /// The greeting.
    pub greeting: String,
}

/// The tool's work, apart from the plugin so that a unit test can call it.
pub fn hello(input: HelloInput) -> Result<HelloOutput, ToolError> {
    let name = input.name.trim();
    if name.is_empty() {
        // The model reads this and can call again.
        return Err(ToolError::failed("name is empty; say who to greet, e.g. \"Ada\""));
    }
    Ok(HelloOutput { greeting: format!("Hello, {name}!") })
}

#[async_trait]
impl Plugin for {{Title}}Plugin {
    fn id(&self) -> &str {
        "{{name}}"
    }

    async fn prepare(&self, context: &mut PrepareContext) -> agentic::Result<()> {
        context.add_tool(
            define_tool("{{name}}.hello", "Greets someone by name", |_context, input| async move {
                hello(input)
            })
            .into_arc(),
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greets_by_name_and_refuses_an_empty_name() {
        let greeting = hello(HelloInput { name: "Ada".into() }).map(|output| output.greeting);
        assert_eq!(greeting.ok().as_deref(), Some("Hello, Ada!"));
        assert!(hello(HelloInput { name: " ".into() }).is_err());
    }
}

//! `cargo xtask new-plugin <name>`: a new tool plugin crate in the shape of `time`, registered
//! in the workspace and linked into the `agentic` binary.

use std::path::Path;

use anyhow::{Context as _, bail, ensure};

/// Creates `crates/plugins/<name>` under `root` and wires it in.
pub(crate) fn new_plugin(root: &Path, name: &str) -> anyhow::Result<()> {
    check_name(name)?;
    let directory = root.join("crates/plugins").join(name);
    if directory.exists() {
        bail!("{} already exists", directory.display());
    }
    let crate_name = format!("agentic_plugin_{name}");
    let package = format!("agentic-plugin-{name}");
    let title = title(name);

    std::fs::create_dir_all(directory.join("src"))?;
    std::fs::create_dir_all(directory.join("tests"))?;
    std::fs::write(
        directory.join("README.md"),
        format!(
            "# {package}\n\nThe `{name}` plugin for agentic: its tools, offered to every prompt.\n"
        ),
    )?;
    std::fs::write(
        directory.join("Cargo.toml"),
        format!(
            r#"[package]
name = "{package}"
description = "The {name} plugin for agentic."
version.workspace = true
edition.workspace = true
rust-version.workspace = true
license.workspace = true
keywords = ["agent", "llm", "tools"]
readme = "README.md"

[dependencies]
agentic-core.workspace = true
anyhow.workspace = true
async-trait.workspace = true
schemars.workspace = true
serde.workspace = true

[dev-dependencies]
# By path alone: cargo leaves it out of the published manifest.
agentic-testing = {{ path = "../../testing" }}
serde_json.workspace = true
tokio.workspace = true

[lints]
workspace = true
"#
        ),
    )?;
    std::fs::write(
        directory.join("src/lib.rs"),
        format!(
            r#"//! The {name} plugin. Start from `{name}.hello` and see `docs/plugins.md`.
#![forbid(unsafe_code)]

use std::sync::Arc;

use agentic_core::{{Plugin, PluginRegistration, PrepareContext, ToolError, define_tool}};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{{Deserialize, Serialize}};

agentic_core::inventory::submit! {{
    PluginRegistration {{ id: "{name}", create: create_plugin }}
}}

fn create_plugin() -> Arc<dyn Plugin> {{
    Arc::new({title}Plugin)
}}

#[derive(Debug, Default)]
pub struct {title}Plugin;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HelloInput {{
    /// Who to greet.
    pub name: String,
}}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct HelloOutput {{
    pub greeting: String,
}}

/// The tool's work, kept apart from the plugin so it is easy to test.
pub fn hello(input: HelloInput) -> Result<HelloOutput, ToolError> {{
    let name = input.name.trim();
    if name.is_empty() {{
        return Err(ToolError::failed("name must not be empty"));
    }}
    Ok(HelloOutput {{
        greeting: format!("Hello, {{name}}!"),
    }})
}}

#[async_trait]
impl Plugin for {title}Plugin {{
    fn id(&self) -> &str {{
        "{name}"
    }}

    async fn prepare(&self, context: &mut PrepareContext) -> anyhow::Result<()> {{
        context.add_tool(
            define_tool("{name}.hello", "Greets someone by name", |_context, input: HelloInput| async move {{
                hello(input)
            }})
            .into_arc(),
        );
        Ok(())
    }}
}}

#[cfg(test)]
mod tests {{
    use super::*;

    #[test]
    fn greets_by_name_and_refuses_an_empty_one() {{
        let greeting = hello(HelloInput {{ name: "Ada".into() }}).map(|output| output.greeting);
        assert_eq!(greeting.ok().as_deref(), Some("Hello, Ada!"));
        assert!(hello(HelloInput {{ name: " ".into() }}).is_err());
    }}
}}
"#
        ),
    )?;
    std::fs::write(
        directory.join("tests/prompt.rs"),
        format!(
            r#"//! `{name}.hello` used from a prompt, through the timeline helper.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// Integration tests are a separate crate: name the plugin so the linker keeps it.
use {crate_name} as _;

use agentic_testing::{{TimelineCase, TimelineRunner}};

#[tokio::test]
async fn the_model_can_call_hello() {{
    let case: TimelineCase = case();
    let timeline = TimelineRunner::new().run(&case).await.unwrap();
    let text = serde_json::to_string(&timeline).unwrap();
    assert!(text.contains("Hello, Ada!"), "{{text}}");
}}

fn case() -> TimelineCase {{
    serde_json::from_value(serde_json::json!({{
        "input": "Say hello to Ada",
        "turns": [
            {{ "toolCalls": [{{ "name": "{name}.hello", "input": {{ "name": "Ada" }} }}] }},
            {{ "text": "Done." }}
        ]
    }}))
    .unwrap()
}}
"#
        ),
    )?;

    // The workspace: `crates/plugins/*` makes it a member; it gets a dependency entry.
    let manifest_path = root.join("Cargo.toml");
    edit_manifest(&manifest_path, |manifest| {
        // Workspace crates are released together: each names the others' exact version.
        let version = manifest["workspace"]["package"]["version"]
            .as_str()
            .context("the workspace manifest has no [workspace.package] version")?
            .to_owned();
        let dependencies = manifest["workspace"]["dependencies"]
            .as_table_mut()
            .context("the workspace manifest has no [workspace.dependencies]")?;
        let mut entry = toml_edit::InlineTable::new();
        entry.insert("version", format!("={version}").into());
        entry.insert("path", format!("crates/plugins/{name}").into());
        dependencies.insert(&package, toml_edit::value(entry));
        Ok(())
    })?;

    // The binary: a dependency and a `use` so the linker keeps the registration.
    edit_manifest(&root.join("crates/cli/Cargo.toml"), |manifest| {
        let dependencies = manifest["dependencies"]
            .as_table_mut()
            .context("crates/cli/Cargo.toml has no [dependencies]")?;
        let mut entry = toml_edit::Table::new();
        entry.set_dotted(true);
        entry.insert("workspace", toml_edit::value(true));
        dependencies.insert(&package, toml_edit::Item::Table(entry));
        Ok(())
    })?;
    let main_path = root.join("crates/cli/src/main.rs");
    let main = std::fs::read_to_string(&main_path)?;
    let marker = "use agentic_plugin_time as _;\n";
    ensure!(
        main.contains(marker),
        "no `use agentic_plugin_time as _;` in crates/cli/src/main.rs"
    );
    std::fs::write(
        &main_path,
        main.replacen(marker, &format!("{marker}use {crate_name} as _;\n"), 1),
    )
    .context("could not link the plugin into the binary")?;

    // Tidy what we wrote (and the `use` we added) the way `cargo fmt --check` wants it.
    let formatted = std::process::Command::new("cargo")
        .current_dir(root)
        .args(["fmt", "-p", &package, "-p", "agentic-cli"])
        .status()
        .context("could not run cargo fmt")?;
    ensure!(formatted.success(), "cargo fmt failed on the new crate");

    println!(
        "created crates/plugins/{name} ({package}) with the tool `{name}.hello`;\n\
         it is a workspace member and linked into `agentic`: try `cargo run -p agentic-cli -- tools`\n\
         and `cargo test -p {package}`. docs/plugins.md walks through the rest."
    );
    Ok(())
}

/// Reads a manifest, lets `edit` change it, and writes it back with its comments and layout.
fn edit_manifest(
    path: &Path,
    edit: impl FnOnce(&mut toml_edit::DocumentMut) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("could not read {}", path.display()))?;
    let mut manifest: toml_edit::DocumentMut = text
        .parse()
        .with_context(|| format!("{} is not valid TOML", path.display()))?;
    edit(&mut manifest)?;
    std::fs::write(path, manifest.to_string())
        .with_context(|| format!("could not write {}", path.display()))
}

/// A plugin's name becomes its tools' prefix and its crate's name: lowercase letters and
/// digits.
pub(crate) fn check_name(name: &str) -> anyhow::Result<()> {
    ensure!(
        name.len() <= 32
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
        "a plugin name is 1 to 32 lowercase letters and digits, starting with a letter \
         (it becomes the tool prefix, e.g. `{name}.hello`)"
    );
    Ok(())
}

/// The name with its first letter in capitals: `weather` is `WeatherPlugin`.
pub(crate) fn title(name: &str) -> String {
    let mut chars = name.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_ascii_uppercase().to_string() + chars.as_str()
    })
}

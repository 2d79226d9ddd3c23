//! The `[mcp]` config section: one table per server under `[mcp.servers.<name>]`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;

/// The `mcp` config section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct McpConfig {
    /// The servers, by name. A server's tools are named `<name>.<tool>`.
    pub servers: BTreeMap<String, ServerConfig>,
    /// Where `agentic mcp login` keeps each server's OAuth tokens (default:
    /// `<data dir>/agentic/mcp-credentials`).
    pub credentials_dir: Option<String>,
}

/// OAuth settings of a `url` server, for `agentic mcp login`. All optional: without them
/// agentic registers itself with the authorization server (dynamic client registration).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct OAuthConfig {
    /// A client registered with the authorization server beforehand.
    pub client_id: Option<String>,
    /// That client's secret, e.g. `${TRACKER_CLIENT_SECRET}`.
    pub client_secret: Option<String>,
    /// Scopes to ask for (default: what the server's challenge or metadata names).
    pub scopes: Vec<String>,
    /// The HTTPS URL of a client ID metadata document describing agentic, used when the
    /// authorization server supports those.
    pub client_metadata_url: Option<String>,
}

/// One MCP server: a command to start (stdio) or a URL (streamable HTTP).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerConfig {
    /// The program to start; the server speaks MCP on its stdin and stdout.
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments. `${VAR}` is replaced by the environment variable `VAR`.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables for the program, besides agentic's own. `${VAR}` is replaced.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The program's working directory.
    #[serde(default)]
    pub cwd: Option<String>,
    /// A streamable HTTP endpoint, e.g. `https://tracker.example/mcp`.
    #[serde(default)]
    pub url: Option<String>,
    /// HTTP headers sent with every request, e.g. `Authorization = "Bearer ${TOKEN}"`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// OAuth for a `url` server (see `agentic mcp login`).
    #[serde(default)]
    pub oauth: Option<OAuthConfig>,
    /// Which calls need a person's approval: `destructive` (the default: tools the server
    /// marks `destructiveHint` and not `readOnlyHint`), `always` or `never`.
    /// `requireApproval` patterns apply as well, as for any tool.
    #[serde(default)]
    pub approval: ApprovalPolicy,
    /// Milliseconds a tool call may take in all, progress or not.
    #[serde(default = "default_call_timeout_ms")]
    pub timeout_ms: u64,
    /// Bytes one message of a `command` server may have (a reply to a call, JSON-encoded);
    /// a larger one fails the calls in flight at once, naming the limit.
    #[serde(default = "default_max_message_bytes")]
    pub max_message_bytes: usize,
    /// Milliseconds to wait for the server to start and list its tools.
    #[serde(default = "default_startup_timeout_ms")]
    pub startup_timeout_ms: u64,
    /// Set to false to keep the server configured but not started.
    #[serde(default = "default_true")]
    pub enabled: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalPolicy {
    #[default]
    Destructive,
    Always,
    Never,
}

fn default_call_timeout_ms() -> u64 {
    60_000
}

fn default_max_message_bytes() -> usize {
    128 * 1024 * 1024
}

fn default_startup_timeout_ms() -> u64 {
    30_000
}

fn default_true() -> bool {
    true
}

/// How a server is reached, checked and with `${VAR}` expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<String>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

impl ServerConfig {
    /// The transport, or why the config cannot give one (both or neither of `command` and
    /// `url`, an unset variable).
    pub fn transport(&self, name: &str) -> anyhow::Result<Transport> {
        match (&self.command, &self.url) {
            (Some(command), None) => {
                if !self.headers.is_empty() || self.oauth.is_some() {
                    anyhow::bail!(
                        "MCP server \"{name}\": `headers` and `oauth` only apply to a `url` server, not a `command`"
                    );
                }
                Ok(Transport::Stdio {
                    command: expand(command)?,
                    args: self
                        .args
                        .iter()
                        .map(|arg| expand(arg))
                        .collect::<Result<_, _>>()?,
                    env: self
                        .env
                        .iter()
                        .map(|(key, value)| Ok((key.clone(), expand(value)?)))
                        .collect::<anyhow::Result<_>>()?,
                    cwd: self.cwd.as_deref().map(expand).transpose()?,
                })
            }
            (None, Some(url)) => {
                if !self.args.is_empty() || !self.env.is_empty() || self.cwd.is_some() {
                    anyhow::bail!(
                        "MCP server \"{name}\": `args`, `env` and `cwd` only apply to a `command` server, not a `url`"
                    );
                }
                Ok(Transport::Http {
                    url: expand(url)?,
                    headers: self
                        .headers
                        .iter()
                        .map(|(key, value)| Ok((key.clone(), expand(value)?)))
                        .collect::<anyhow::Result<_>>()?,
                })
            }
            (Some(_), Some(_)) => anyhow::bail!(
                "MCP server \"{name}\" has both `command` and `url`; give one: a command to start, or the URL of a running server"
            ),
            (None, None) => anyhow::bail!(
                "MCP server \"{name}\" needs `command` (a program speaking MCP on stdio) or `url` (a streamable HTTP endpoint)"
            ),
        }
    }
}

/// `text` with every `${VAR}` replaced by the environment variable's value; `$${` stays a
/// literal `${`. An unset variable is an error naming it.
pub fn expand(text: &str) -> anyhow::Result<String> {
    expand_with(text, |name| std::env::var(name).ok())
}

fn expand_with(text: &str, lookup: impl Fn(&str) -> Option<String>) -> anyhow::Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('$') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        if let Some(literal) = after.strip_prefix("${") {
            out.push_str("${");
            rest = literal;
            continue;
        }
        let Some(body) = after.strip_prefix('{') else {
            out.push('$');
            rest = after;
            continue;
        };
        let Some(end) = body.find('}') else {
            anyhow::bail!("unclosed `${{` in \"{text}\"");
        };
        let name = &body[..end];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            anyhow::bail!("`${{{name}}}` in \"{text}\" is not a variable name");
        }
        match lookup(name) {
            Some(value) => out.push_str(&value),
            None => anyhow::bail!("the environment variable {name} is not set"),
        }
        rest = &body[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cret".to_owned())
    }

    #[test]
    fn variables_are_expanded_and_unset_ones_named() {
        assert_eq!(
            expand_with("Bearer ${TOKEN}", lookup).ok().as_deref(),
            Some("Bearer s3cret")
        );
        assert_eq!(
            expand_with("cost: $5, $${TOKEN}", lookup).ok().as_deref(),
            Some("cost: $5, ${TOKEN}")
        );
        let error = expand_with("${MISSING}", lookup)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("the environment variable MISSING is not set")
        );
        assert!(expand_with("${TOKEN", lookup).is_err());
        assert!(expand_with("${A B}", lookup).is_err());
    }

    #[test]
    fn a_server_is_a_command_or_a_url() {
        let parse = |value: serde_json::Value| -> ServerConfig {
            serde_json::from_value(value).unwrap_or_else(|error| panic!("{error}"))
        };
        let stdio = parse(serde_json::json!({ "command": "npx", "args": ["-y", "x"] }));
        assert!(matches!(stdio.transport("a"), Ok(Transport::Stdio { .. })));
        assert_eq!(stdio.timeout_ms, 60_000);
        assert_eq!(stdio.approval, ApprovalPolicy::Destructive);
        let http =
            parse(serde_json::json!({ "url": "http://127.0.0.1:1/mcp", "approval": "never" }));
        assert!(matches!(http.transport("b"), Ok(Transport::Http { .. })));
        assert_eq!(http.approval, ApprovalPolicy::Never);
        let both = parse(serde_json::json!({ "command": "x", "url": "http://h/mcp" }));
        assert!(both.transport("c").is_err());
        let neither = parse(serde_json::json!({}));
        let error = neither
            .transport("d")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("needs `command`"), "{error}");
        let misplaced = parse(serde_json::json!({ "url": "http://h/mcp", "args": ["x"] }));
        assert!(misplaced.transport("e").is_err());
        assert!(
            serde_json::from_value::<ServerConfig>(serde_json::json!({ "comand": "x" })).is_err()
        );
    }
}

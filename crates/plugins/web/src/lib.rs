//! The web plugin: `web.fetch {url}` returns the status, content type and text of a page, with
//! HTML turned into readable text.
//!
//! Every hop is checked before it is made: only `http` and `https`; the host is resolved and
//! each address must be public (no loopback, private, link-local, CGNAT, multicast or
//! unspecified address, IPv4 or IPv6) unless `[web] allowPrivate = true`; the connection then
//! goes to the address that was checked (no second lookup to rebind). Redirects are followed
//! by hand, at most 5, each checked the same way. Bodies are capped (1 MB by default, cut and
//! flagged) and the whole fetch is timed (20 s).
#![forbid(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agentic_core::{
    Plugin, PluginRegistration, PrepareContext, SetupContext, ToolError, define_tool,
};
use async_trait::async_trait;
use futures::StreamExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

agentic_core::inventory::submit! {
    PluginRegistration { id: "web", create: create_plugin }
}

/// The plugin, as the runtime creates it; the `agentic` crate links it by feature.
pub fn create_plugin() -> Arc<dyn Plugin> {
    Arc::new(WebPlugin::default())
}

const MAX_REDIRECTS: usize = 5;

/// The `web` config section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct WebConfig {
    /// Allow loopback, private and link-local addresses (for local services and tests).
    pub allow_private: bool,
    /// Bytes of a body read at most.
    pub max_bytes: usize,
    /// Time for the whole fetch, redirects included.
    pub timeout_ms: u64,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            allow_private: false,
            max_bytes: 1_000_000,
            timeout_ms: 20_000,
        }
    }
}

#[derive(Debug, Default)]
pub struct WebPlugin {
    config: OnceLock<WebConfig>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FetchInput {
    /// An http or https URL.
    pub url: String,
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FetchOutput {
    /// The URL of the page returned, after redirects.
    pub url: String,
    pub status: u16,
    pub content_type: String,
    /// The body as text; HTML is turned into readable text.
    pub text: String,
    /// True when the body was cut at the size limit.
    pub truncated: bool,
}

#[async_trait]
impl Plugin for WebPlugin {
    fn id(&self) -> &str {
        "web"
    }

    fn everyday(&self) -> bool {
        true
    }

    fn config_schema(&self) -> serde_json::Value {
        agentic_core::schema_of::<WebConfig>()
    }

    async fn setup(&self, context: &mut SetupContext<'_>) -> anyhow::Result<()> {
        let config: WebConfig = context.config.plugin("web")?;
        let _ = self.config.set(config);
        Ok(())
    }

    async fn prepare(&self, context: &mut PrepareContext) -> anyhow::Result<()> {
        let config = self.config.get().cloned().unwrap_or_default();
        context.add_tool(
            define_tool(
                "web.fetch",
                "Fetch a web page (http/https) and return its text",
                move |_context, input: FetchInput| {
                    let config = config.clone();
                    async move { fetch(&config, &input.url).await }
                },
            )
            .read_only()
            .into_arc(),
        );
        Ok(())
    }
}

/// Whether an address is one a fetch may reach without `allowPrivate`.
pub fn is_public(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local
                || (first & 0xffc0) == 0xfe80 // link-local
                || (first == 0x2001 && v6.segments()[1] == 0x0db8)) // documentation
        }
    }
}

fn is_public_v4(v4: Ipv4Addr) -> bool {
    let [a, b, ..] = v4.octets();
    !(v4.is_loopback()
        || v4.is_private()
        || v4.is_link_local()
        || v4.is_unspecified()
        || v4.is_broadcast()
        || v4.is_multicast()
        || v4.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // carrier-grade NAT
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240)
}

/// Checks a URL and resolves its host to one allowed address.
async fn check(config: &WebConfig, url: &reqwest::Url) -> Result<SocketAddr, ToolError> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ToolError::failed(format!(
            "only http and https URLs can be fetched, not \"{}:\"",
            url.scheme()
        )));
    }
    let host = url
        .host_str()
        .ok_or_else(|| ToolError::failed(format!("\"{url}\" has no host")))?;
    let port = url.port_or_known_default().unwrap_or(80);
    let host_for_lookup = host.trim_start_matches('[').trim_end_matches(']');
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host_for_lookup, port))
        .await
        .map_err(|error| ToolError::failed(format!("cannot resolve \"{host}\": {error}")))?
        .collect();
    let first = *addresses
        .first()
        .ok_or_else(|| ToolError::failed(format!("\"{host}\" has no address")))?;
    if !config.allow_private
        && let Some(blocked) = addresses.iter().find(|address| !is_public(address.ip()))
    {
        return Err(ToolError::failed(format!(
            "\"{host}\" resolves to {}, a private, loopback or link-local address; \
             fetching it is not allowed (set [web] allowPrivate = true to allow it)",
            blocked.ip()
        )));
    }
    Ok(first)
}

/// Fetches `url`, following checked redirects, within the time and size limits.
pub async fn fetch(config: &WebConfig, url: &str) -> Result<FetchOutput, ToolError> {
    let timeout = Duration::from_millis(config.timeout_ms);
    tokio::time::timeout(timeout, fetch_inner(config, url))
        .await
        .map_err(|_| {
            ToolError::failed(format!(
                "fetching {url} took longer than {} s",
                timeout.as_secs_f64()
            ))
        })?
}

async fn fetch_inner(config: &WebConfig, url: &str) -> Result<FetchOutput, ToolError> {
    let mut current = reqwest::Url::parse(url.trim())
        .map_err(|error| ToolError::failed(format!("\"{url}\" is not a valid URL: {error}")))?;
    for _ in 0..=MAX_REDIRECTS {
        let address = check(config, &current).await?;
        let host = current.host_str().unwrap_or_default().to_owned();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .resolve(&host, address)
            .user_agent(concat!("agentic/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| ToolError::failed(format!("cannot fetch: {error}")))?;
        let response =
            client.get(current.clone()).send().await.map_err(|error| {
                ToolError::failed(format!("fetching {current} failed: {error}"))
            })?;
        let status = response.status();
        if status.is_redirection() {
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|value| value.to_str().ok())
                .ok_or_else(|| {
                    ToolError::failed(format!("{current} redirects without a location"))
                })?;
            current = current.join(location).map_err(|error| {
                ToolError::failed(format!("bad redirect to \"{location}\": {error}"))
            })?;
            continue;
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let mut body = Vec::new();
        let mut truncated = false;
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk
                .map_err(|error| ToolError::failed(format!("reading {current} failed: {error}")))?;
            let room = config.max_bytes.saturating_sub(body.len());
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        let raw = String::from_utf8_lossy(&body).into_owned();
        let text = if content_type.contains("html") {
            html2text::from_read(raw.as_bytes(), 100).unwrap_or(raw)
        } else {
            raw
        };
        return Ok(FetchOutput {
            url: current.to_string(),
            status: status.as_u16(),
            content_type,
            text,
            truncated,
        });
    }
    Err(ToolError::failed(format!(
        "more than {MAX_REDIRECTS} redirects from {url}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_loopback_and_link_local_addresses_are_not_public() {
        for blocked in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
        ] {
            assert!(!is_public(blocked.parse().unwrap()), "{blocked}");
        }
        for allowed in ["93.184.216.34", "1.1.1.1", "2606:4700::1111"] {
            assert!(is_public(allowed.parse().unwrap()), "{allowed}");
        }
    }

    #[tokio::test]
    async fn other_schemes_and_private_hosts_are_refused_before_any_connection() {
        let config = WebConfig::default();
        let file = fetch(&config, "file:///etc/passwd").await.unwrap_err();
        assert!(file.to_string().contains("only http and https"), "{file}");
        for url in [
            "http://127.0.0.1:9/",
            "http://localhost:9/",
            "http://169.254.169.254/latest/meta-data/",
            "http://[::1]:9/",
        ] {
            let error = fetch(&config, url).await.unwrap_err().to_string();
            assert!(error.contains("not allowed"), "{url}: {error}");
        }
        let bad = fetch(&config, "not a url").await.unwrap_err();
        assert!(bad.to_string().contains("not a valid URL"));
    }
}

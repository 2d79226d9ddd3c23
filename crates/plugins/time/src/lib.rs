//! The time plugin: `time.now`, the current time in UTC or any IANA timezone.
//!
//! It is the template for tool plugins: typed input and output (schemas derived with
//! schemars), a clear error for bad input, and link-time registration through `inventory`.
#![forbid(unsafe_code)]

use std::sync::Arc;

use agentic_core::{Plugin, PluginRegistration, PrepareContext, ToolError, define_tool};
use async_trait::async_trait;
use chrono::{DateTime, SecondsFormat, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

agentic_core::inventory::submit! {
    PluginRegistration { id: "time", create: create_plugin }
}

/// The plugin, as the runtime creates it; the `agentic` crate links it by feature.
pub fn create_plugin() -> Arc<dyn Plugin> {
    Arc::new(TimePlugin)
}

#[derive(Debug, Default)]
pub struct TimePlugin;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NowInput {
    /// An IANA timezone such as `Europe/Oslo`; UTC when absent.
    #[serde(default)]
    pub timezone: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NowOutput {
    /// RFC 3339 time with the timezone's offset.
    pub iso: String,
    /// The date in the timezone, `YYYY-MM-DD`.
    pub date: String,
    /// The time of day in the timezone, 24-hour `HH:MM:SS`.
    pub time_of_day: String,
    pub timezone: String,
    pub weekday: String,
    /// Milliseconds since the Unix epoch.
    pub unix_ms: i64,
}

#[async_trait]
impl Plugin for TimePlugin {
    fn id(&self) -> &str {
        "time"
    }

    fn everyday(&self) -> bool {
        true
    }

    async fn prepare(&self, context: &mut PrepareContext) -> anyhow::Result<()> {
        context.add_tool(
            define_tool(
                "time.now",
                "Current date and time, in UTC or a given IANA timezone",
                |_context, input: NowInput| async move { now_in(Utc::now(), input.timezone.as_deref()) },
            )
            .read_only()
            .into_arc(),
        );
        Ok(())
    }
}

/// The reading of `now` in `timezone` (UTC when `None`).
pub fn now_in(now: DateTime<Utc>, timezone: Option<&str>) -> Result<NowOutput, ToolError> {
    let name = timezone
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .unwrap_or("UTC");
    let zone: chrono_tz::Tz = name.parse().map_err(|_| {
        ToolError::failed(format!(
            "unknown timezone \"{name}\"; use an IANA name such as Europe/Oslo or America/New_York"
        ))
    })?;
    let local = now.with_timezone(&zone);
    Ok(NowOutput {
        iso: local.to_rfc3339_opts(SecondsFormat::Millis, true),
        date: local.format("%Y-%m-%d").to_string(),
        time_of_day: local.format("%H:%M:%S").to_string(),
        timezone: zone.name().to_owned(),
        weekday: local.format("%A").to_string(),
        unix_ms: now.timestamp_millis(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-21T22:30:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn utc_is_the_default() {
        let now = now_in(fixed(), None).unwrap();
        assert_eq!(now.iso, "2026-11-21T22:30:00.000Z");
        assert_eq!(
            (now.date.as_str(), now.time_of_day.as_str()),
            ("2026-11-21", "22:30:00")
        );
        assert_eq!(now.timezone, "UTC");
        assert_eq!(now.weekday, "Saturday");
        assert_eq!(now.unix_ms, 1_795_300_200_000);
    }

    #[test]
    fn a_timezone_shifts_the_reading_not_the_instant() {
        let now = now_in(fixed(), Some("Asia/Tokyo")).unwrap();
        assert_eq!(now.iso, "2026-11-22T07:30:00.000+09:00");
        assert_eq!(
            (now.date.as_str(), now.time_of_day.as_str()),
            ("2026-11-22", "07:30:00")
        );
        assert_eq!(now.weekday, "Sunday");
        assert_eq!(now.unix_ms, 1_795_300_200_000);
    }

    #[test]
    fn an_unknown_timezone_is_a_clear_error() {
        let error = now_in(fixed(), Some("Mars/Olympus")).unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown timezone \"Mars/Olympus\"; use an IANA name such as Europe/Oslo or America/New_York"
        );
    }
}

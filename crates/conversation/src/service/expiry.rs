//! Waiting has a limit: with `[approval] timeout` set, a call that has waited longer for a
//! person is rejected with a reason the model reads, through the same stored decision as a
//! person's, and the prompt goes on. None by default.

use std::time::Duration;

use chrono::Utc;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QuerySelect};
use serde::Deserialize;

use super::{ConversationError, ConversationService, Inner};
use crate::entity::prompt;

/// The rule's name in the decisions it takes.
use agentic_core::mode::TIMEOUT_POLICY;

/// The `[approval]` section of the config.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ApprovalSection {
    /// How long a call may wait for a person: seconds, or `"90s"`, `"10m"`, `"2h"`.
    timeout: Option<Wait>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Wait {
    Seconds(u64),
    Written(String),
}

/// The configured limit on waiting for a person, if any.
pub(super) fn approval_timeout(config: &agentic_core::Config) -> anyhow::Result<Option<Duration>> {
    let section: ApprovalSection = config
        .plugin("approval")
        .map_err(|error| anyhow::anyhow!("[approval] is invalid: {error}"))?;
    let limit = match section.timeout {
        None => return Ok(None),
        Some(Wait::Seconds(seconds)) => Duration::from_secs(seconds),
        Some(Wait::Written(text)) => parse_duration(&text).ok_or_else(|| {
            anyhow::anyhow!(
                "[approval] timeout = \"{text}\" is not a duration: write seconds (300) or a \
                 number with s, m or h (\"90s\", \"10m\", \"2h\")"
            )
        })?,
    };
    if limit.is_zero() {
        anyhow::bail!("[approval] timeout must be more than 0 (leave it out for no limit)");
    }
    Ok(Some(limit))
}

fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit())?);
    let number: u64 = number.parse().ok()?;
    let seconds = match unit.trim() {
        "s" => number,
        "m" => number.checked_mul(60)?,
        "h" => number.checked_mul(3600)?,
        _ => return None,
    };
    Some(Duration::from_secs(seconds))
}

/// `10m`, `90s`, `2h`: the limit as the reason says it.
fn written(limit: Duration) -> String {
    let seconds = limit.as_secs();
    match seconds {
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// Rejects, every `limit / 4` (between 250 ms and 5 s), the calls that waited longer than
/// `limit`; ends with the service.
pub(super) async fn expire_loop(inner: std::sync::Weak<Inner>, limit: Duration) {
    let every = (limit / 4).clamp(Duration::from_millis(250), Duration::from_secs(5));
    let mut ticks = tokio::time::interval(every);
    loop {
        ticks.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let service = ConversationService { inner };
        if let Err(error) = service.expire_waiting(limit).await {
            tracing::warn!(error = %format!("{error:#}"), "could not reject calls that waited too long");
        }
    }
}

impl ConversationService {
    /// Rejects every call that has waited for a person longer than `limit` (since its prompt
    /// began to wait), saying why; each prompt goes on where its process holds it.
    async fn expire_waiting(&self, limit: Duration) -> anyhow::Result<()> {
        let cutoff = Utc::now() - chrono::Duration::from_std(limit)?;
        let waiting: Vec<(String, String)> = prompt::Entity::find()
            .select_only()
            .column(prompt::Column::Id)
            .column(prompt::Column::UserId)
            .filter(
                prompt::Column::State.eq(agentic_core::PromptState::WaitingForApproval.as_str()),
            )
            .filter(prompt::Column::UpdatedAt.lt(cutoff))
            .into_tuple()
            .all(self.inner.store.connection())
            .await?;
        let verdict = agentic_core::mode::timed_out(&written(limit));
        for (prompt_id, user_id) in waiting {
            let stored = match self.prompt(&user_id, &prompt_id).await {
                Ok(stored) => stored,
                Err(ConversationError::PromptNotFound(_)) => continue,
                Err(error) => return Err(error.into()),
            };
            for call in stored.prompt.calls_awaiting_approval() {
                let decided = self
                    .decide_by_policy(
                        &user_id,
                        &prompt_id,
                        &call.id,
                        verdict.clone(),
                        TIMEOUT_POLICY,
                    )
                    .await;
                match decided {
                    // Another server, or a person, decided first.
                    Ok(_)
                    | Err(ConversationError::AlreadyDecided { .. })
                    | Err(ConversationError::NotWaiting { .. }) => {}
                    Err(error) => return Err(error.into()),
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_is_seconds_or_a_number_with_a_unit() {
        let of = |value: serde_json::Value| {
            approval_timeout(&agentic_core::Config::from_value(
                serde_json::json!({ "approval": { "timeout": value } }),
            ))
        };
        assert_eq!(
            of(serde_json::json!(300)).unwrap(),
            Some(Duration::from_secs(300))
        );
        assert_eq!(
            of(serde_json::json!("90s")).unwrap(),
            Some(Duration::from_secs(90))
        );
        assert_eq!(
            of(serde_json::json!("10m")).unwrap(),
            Some(Duration::from_secs(600))
        );
        assert_eq!(
            of(serde_json::json!("2h")).unwrap(),
            Some(Duration::from_secs(7200))
        );
        assert!(
            of(serde_json::json!("soon"))
                .unwrap_err()
                .to_string()
                .contains("not a duration")
        );
        assert!(of(serde_json::json!(0)).is_err());
        assert_eq!(
            approval_timeout(&agentic_core::Config::default()).unwrap(),
            None
        );
        assert_eq!(written(Duration::from_secs(600)), "10m");
        assert_eq!(written(Duration::from_secs(90)), "90s");
    }
}

//! When a trigger fires: a standard 5-field cron expression (evaluated in UTC) or one RFC 3339
//! time. Every time is kept to whole seconds, so a stored time reads back exactly as written
//! (the scheduler's claim compares it for equality).

use chrono::{DateTime, SubsecRound as _, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

/// A parsed schedule.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// Fires at every time the expression matches.
    Cron(Box<Cron>),
    /// Fires once, at this time.
    Once(DateTime<Utc>),
}

/// How a trigger's schedule is stored: `cron` or `once`.
pub const KIND_CRON: &str = "cron";
pub const KIND_ONCE: &str = "once";

impl Schedule {
    /// Parses what a user or model wrote. A time must be later than `now`; a cron expression
    /// must match some time after `now`.
    pub fn parse(text: &str, now: DateTime<Utc>) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err(
                "schedule must not be empty: give a cron expression such as \
                        \"0 9 * * MON-FRI\" or a time such as \"2026-12-01T09:00:00Z\""
                    .to_owned(),
            );
        }
        if looks_like_a_time(text) {
            let at = DateTime::parse_from_rfc3339(text)
                .map_err(|error| {
                    format!(
                        "\"{text}\" is not an RFC 3339 time ({error}): write a date, a time and \
                         an offset, e.g. \"2026-12-01T09:00:00Z\" or \"2026-12-01T10:00:00+01:00\""
                    )
                })?
                .with_timezone(&Utc)
                .trunc_subsecs(0);
            if at <= now {
                return Err(format!(
                    "\"{text}\" is in the past (it is now {}); give a later time",
                    now.trunc_subsecs(0).to_rfc3339()
                ));
            }
            return Ok(Self::Once(at));
        }
        let cron = parse_cron(text)?;
        let schedule = Self::Cron(Box::new(cron));
        schedule.next_after(now).map_err(|error| {
            format!("cron expression \"{text}\" never fires after now: {error}")
        })?;
        Ok(schedule)
    }

    /// `cron` or `once`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Cron(_) => KIND_CRON,
            Self::Once(_) => KIND_ONCE,
        }
    }

    /// The first time this schedule fires after `now`: `None` for a one-shot whose time is not
    /// after `now` (it has fired, or is firing now).
    pub fn next_after(&self, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, String> {
        match self {
            Self::Once(at) => Ok((*at > now).then_some(*at)),
            Self::Cron(cron) => cron
                .find_next_occurrence(&now, false)
                .map(|next| Some(next.trunc_subsecs(0)))
                .map_err(|error| error.to_string()),
        }
    }

    /// The schedule as stored: the cron expression as given, or the time in RFC 3339 (UTC).
    pub fn stored_text(&self, given: &str) -> String {
        match self {
            Self::Cron(_) => given.trim().to_owned(),
            Self::Once(at) => at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        }
    }

    /// A stored schedule, read back: no check against the clock.
    pub fn from_stored(kind: &str, text: &str) -> Result<Self, String> {
        match kind {
            KIND_ONCE => DateTime::parse_from_rfc3339(text)
                .map(|at| Self::Once(at.with_timezone(&Utc)))
                .map_err(|error| format!("stored time \"{text}\" is unreadable: {error}")),
            KIND_CRON => parse_cron(text).map(|cron| Self::Cron(Box::new(cron))),
            other => Err(format!("unknown schedule kind \"{other}\"")),
        }
    }
}

/// A standard 5-field cron expression (minute, hour, day of month, month, day of week), with
/// names (`MON`, `JAN`), ranges, lists, steps and nicknames such as `@daily`.
fn parse_cron(text: &str) -> Result<Cron, String> {
    // Plain `Cron::from_str` would also take seconds and years; triggers keep to the common
    // form.
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(text)
        .map_err(|error| {
            format!(
                "invalid cron expression \"{text}\": {error} (use 5 fields: minute hour \
                 day-of-month month day-of-week, e.g. \"*/15 * * * *\" or \"0 9 * * MON-FRI\")"
            )
        })
}

/// `2026-…`: a date, meant as a one-shot time (no cron expression starts with four digits and
/// a dash).
fn looks_like_a_time(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() > 4 && bytes[..4].iter().all(u8::is_ascii_digit) && bytes[4] == b'-'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-22T10:30:20Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn next(text: &str) -> String {
        match Schedule::parse(text, now()) {
            Ok(schedule) => schedule
                .next_after(now())
                .unwrap()
                .map(|at| at.to_rfc3339())
                .unwrap_or_default(),
            Err(error) => format!("error: {error}"),
        }
    }

    #[test]
    fn cron_expressions_fire_at_their_next_slot_in_utc() {
        assert_eq!(next("* * * * *"), "2026-11-22T10:31:00+00:00");
        assert_eq!(next("*/15 * * * *"), "2026-11-22T10:45:00+00:00");
        assert_eq!(next("0 9 * * MON-FRI"), "2026-11-23T09:00:00+00:00");
        assert_eq!(next("  @daily "), "2026-11-23T00:00:00+00:00");
        assert_eq!(next("0 0 1 jan *"), "2027-01-01T00:00:00+00:00");
    }

    #[test]
    fn iso_times_fire_once_and_must_be_in_the_future() {
        assert_eq!(next("2026-12-01T09:00:00Z"), "2026-12-01T09:00:00+00:00");
        assert_eq!(
            next("2026-12-01T10:00:00.75+01:00"),
            "2026-12-01T09:00:00+00:00"
        );
        let once = Schedule::parse("2026-12-01T10:00:00+01:00", now()).unwrap();
        assert_eq!(once.kind(), KIND_ONCE);
        assert_eq!(
            once.stored_text("ignored"),
            "2026-12-01T09:00:00Z",
            "kept in UTC, whole seconds"
        );
        let at = DateTime::parse_from_rfc3339("2026-12-01T09:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(once.next_after(at).unwrap(), None, "fired: no next time");
        let past = next("2026-11-22T10:30:20Z");
        assert!(past.contains("is in the past"), "{past}");
        assert!(past.contains("2026-11-22T10:30:20+00:00"), "{past}");
    }

    #[test]
    fn bad_schedules_say_what_is_wrong() {
        let six = next("0 * * * * *");
        assert!(
            six.starts_with("error: invalid cron expression \"0 * * * * *\""),
            "{six}"
        );
        assert!(six.contains("5 fields"), "{six}");
        let range = next("61 * * * *");
        assert!(range.contains("\"61 * * * *\""), "{range}");
        let words = next("every morning");
        assert!(
            words.contains("invalid cron expression \"every morning\""),
            "{words}"
        );
        let no_offset = next("2026-12-01T09:00:00");
        assert!(no_offset.contains("is not an RFC 3339 time"), "{no_offset}");
        let date_only = next("2026-12-01");
        assert!(date_only.contains("is not an RFC 3339 time"), "{date_only}");
        assert!(next(" ").contains("must not be empty"));
        let never = next("0 0 30 2 *");
        assert!(never.contains("never fires"), "{never}");
    }

    #[test]
    fn stored_schedules_read_back() {
        let cron = Schedule::from_stored(KIND_CRON, "*/5 * * * *").unwrap();
        assert_eq!(
            cron.next_after(now()).unwrap().map(|at| at.to_rfc3339()),
            Some("2026-11-22T10:35:00+00:00".to_owned())
        );
        assert!(Schedule::from_stored("weekly", "x").is_err());
    }
}

//! Cron schedules: parsing (standard 5-field crontab, an optional leading
//! seconds field, `@daily`-style descriptors), timezones, and the next
//! fire time. Pure: the caller passes the time. See
//! `spec/decisions/0007-cron-syntax.md`.

use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use crate::store::{EventStore, ScheduleRow, StoreResult};

/// A parsed schedule: the expression and the zone its fields are read in.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: Cron,
    zone: Tz,
}

/// What to do with a fire time that passed while nothing was running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missed {
    /// Run once for all the missed times, then carry on.
    RunOnce,
    /// Drop them; carry on from the next time.
    Skip,
}

impl Missed {
    /// Its stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Missed::RunOnce => "run_once",
            Missed::Skip => "skip",
        }
    }

    /// Parses `run_once` (or `run-once`) and `skip`.
    pub fn parse(text: &str) -> Option<Missed> {
        match text {
            "run_once" | "run-once" => Some(Missed::RunOnce),
            "skip" => Some(Missed::Skip),
            _ => None,
        }
    }
}

/// The `@` descriptors and what they stand for.
const DESCRIPTORS: &[(&str, &str)] = &[
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

impl Schedule {
    /// Parses `expression` (5 fields, or 6 with seconds first, or a
    /// descriptor) read in `timezone` (an IANA name such as
    /// `Europe/Madrid`; `UTC` when empty).
    pub fn parse(expression: &str, timezone: &str) -> Result<Schedule, String> {
        let trimmed = expression.trim();
        let expanded = DESCRIPTORS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(trimmed))
            .map_or(trimmed, |(_, fields)| fields);
        let fields = expanded.split_whitespace().count();
        if !(5..=6).contains(&fields) {
            return Err(format!(
                "`{expression}` has {fields} fields: a schedule has 5 (minute hour day month weekday), \
                 6 with seconds first, or is a descriptor such as @daily"
            ));
        }
        let parser = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build();
        let cron = parser
            .parse(expanded)
            .map_err(|e| format!("`{expression}` is not a valid schedule: {e}"))?;
        let zone_name = if timezone.trim().is_empty() {
            "UTC"
        } else {
            timezone.trim()
        };
        let zone = Tz::from_str(zone_name).map_err(|_| {
            format!("`{zone_name}` is not a timezone (use an IANA name such as Europe/Madrid)")
        })?;
        Ok(Schedule { cron, zone })
    }

    /// The first fire time strictly after `after_ms` (Unix milliseconds).
    pub fn next_after(&self, after_ms: u64) -> Option<u64> {
        // Fire times are whole seconds: none lies inside `after_ms`'s second.
        let second = (after_ms / 1000) as i64;
        let after = Utc.timestamp_opt(second, 0).single()?;
        let local: DateTime<Tz> = after.with_timezone(&self.zone);
        let next = self.cron.find_next_occurrence(&local, false).ok()?;
        u64::try_from(next.with_timezone(&Utc).timestamp_millis()).ok()
    }
}

/// A scheduled job to create, as the CLI's and the panel's forms give it.
#[derive(Debug, Clone, Default)]
pub struct NewJob {
    /// The template to run.
    pub template: String,
    /// A fixed version (default: the newest at each run).
    pub version: Option<i64>,
    /// The cron expression.
    pub cron: String,
    /// The IANA timezone (default UTC).
    pub timezone: Option<String>,
    /// Run params (a JSON object; default `{}`).
    pub params: Option<serde_json::Value>,
    /// The agent runs are started as.
    pub agent: Option<String>,
    /// `run_once` (default) or `skip`.
    pub missed: Option<String>,
    /// The job's id (default: a fresh one).
    pub id: Option<String>,
    /// Who creates it (`cli`, `panel`).
    pub origin: &'static str,
}

impl NewJob {
    /// The row to store, or why the job is invalid.
    pub fn into_row(self, created_at: String) -> Result<ScheduleRow, String> {
        let timezone = self.timezone.unwrap_or_else(|| "UTC".into());
        if self.template.trim().is_empty() {
            return Err("a template is required".into());
        }
        Schedule::parse(&self.cron, &timezone)?;
        let params = self
            .params
            .unwrap_or_else(|| serde_json::Value::Object(serde_json::Map::new()));
        if !params.is_object() {
            return Err("params must be a JSON object".into());
        }
        let missed = match self.missed.as_deref() {
            None => Missed::RunOnce,
            Some(text) => Missed::parse(text)
                .ok_or_else(|| format!("missed must be run_once or skip, not `{text}`"))?,
        };
        Ok(ScheduleRow {
            id: self.id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            template_name: self.template,
            template_version: self.version,
            cron: self.cron,
            timezone,
            params: params.to_string(),
            agent_id: self.agent,
            enabled: true,
            missed: missed.as_str().to_owned(),
            origin: self.origin.to_owned(),
            created_at,
            ..ScheduleRow::default()
        })
    }
}

/// Lets job `id` fire again (from its next time on) or stops it; `false`
/// when there is no such job.
pub async fn set_enabled(store: &dyn EventStore, id: &str, enabled: bool) -> StoreResult<bool> {
    let jobs = store.schedules().await?;
    let Some(mut job) = jobs.into_iter().find(|j| j.id == id) else {
        return Ok(false);
    };
    job.enabled = enabled;
    // Re-enabled jobs start from their next time, not from what they missed.
    job.next_run_at = None;
    store.save_schedule(job).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-29T12:00:00Z, a Sunday.
    const SUNDAY_NOON: u64 = 1_795_953_600_000;

    fn at(text: &str) -> u64 {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .timestamp_millis() as u64
    }

    #[test]
    fn weekdays_count_from_sunday_as_zero_or_seven() {
        assert_eq!(
            crate::time::rfc3339(SUNDAY_NOON),
            "2026-11-29T12:00:00.000Z"
        );
        let monday = Schedule::parse("0 9 * * 1", "UTC").unwrap();
        assert_eq!(
            monday.next_after(SUNDAY_NOON),
            Some(at("2026-11-30T09:00:00Z"))
        );
        for sunday in ["0 9 * * 0", "0 9 * * 7", "0 9 * * SUN"] {
            let s = Schedule::parse(sunday, "UTC").unwrap();
            assert_eq!(
                s.next_after(SUNDAY_NOON),
                Some(at("2026-12-06T09:00:00Z")),
                "{sunday}"
            );
        }
        let weekdays = Schedule::parse("30 8 * * 1-5", "UTC").unwrap();
        assert_eq!(
            weekdays.next_after(at("2026-12-04T09:00:00Z")),
            Some(at("2026-12-07T08:30:00Z"))
        );
    }

    #[test]
    fn seconds_descriptors_and_zones() {
        let every_ten = Schedule::parse("*/10 * * * * *", "").unwrap();
        assert_eq!(
            every_ten.next_after(SUNDAY_NOON + 1),
            Some(SUNDAY_NOON + 10_000)
        );
        let daily = Schedule::parse("@daily", "UTC").unwrap();
        assert_eq!(
            daily.next_after(SUNDAY_NOON),
            Some(at("2026-11-30T00:00:00Z"))
        );
        let madrid = Schedule::parse("0 9 * * *", "Europe/Madrid").unwrap();
        assert_eq!(
            madrid.next_after(SUNDAY_NOON),
            Some(at("2026-11-30T08:00:00Z"))
        );
    }

    #[test]
    fn bad_schedules_are_refused_with_a_reason() {
        for (expression, zone, says) in [
            ("* * *", "UTC", "3 fields"),
            ("61 * * * *", "UTC", "not a valid schedule"),
            ("0 9 * * 1", "Mars/Olympus", "not a timezone"),
            ("@fortnightly", "UTC", "1 fields"),
        ] {
            let e = Schedule::parse(expression, zone).unwrap_err();
            assert!(e.contains(says), "{expression}: {e}");
        }
    }
}

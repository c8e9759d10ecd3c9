//! Times as the viewer reads them: in the browser's zone (which the
//! script keeps in the cookie `opcode_zone`) or in UTC (the cookie
//! `opcode_times`, set by the header's toggle), always naming the zone;
//! recent times relative ("3 min ago") with the exact time on hover.

use axum::extract::Query;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use maud::{Markup, html};
use opcode_runtime::time::parse_ms;

use super::Fields;
use crate::serve::guard::cookie;

/// The cookie holding the browser's zone (an IANA name), set by the script.
pub const ZONE_COOKIE: &str = "opcode_zone";
/// The cookie holding the viewer's choice: `utc` or `local`.
pub const TIMES_COOKIE: &str = "opcode_times";

/// Times up to this far from now show relative.
const RELATIVE_MS: i64 = 24 * 3_600_000;

/// The zone and the moment a page is rendered in.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    zone: Tz,
    /// The viewer chose UTC (or the browser's zone is unknown).
    utc: bool,
    now_ms: i64,
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::new(Tz::UTC, true)
    }
}

impl Clock {
    fn new(zone: Tz, utc: bool) -> Clock {
        let now_ms = i64::try_from(opcode_runtime::time::now_ms()).unwrap_or(i64::MAX);
        Clock { zone, utc, now_ms }
    }

    /// The clock a request asks for through its cookies.
    pub fn of_request(headers: &HeaderMap) -> Clock {
        let zone = cookie(headers, ZONE_COOKIE)
            .map(|z| percent_encoding::percent_decode_str(z).decode_utf8_lossy())
            .and_then(|z| z.parse::<Tz>().ok());
        let wants_utc = cookie(headers, TIMES_COOKIE) == Some("utc");
        match zone {
            Some(zone) if !wants_utc => Clock::new(zone, false),
            Some(zone) => Clock::new(zone, true),
            None => Clock::new(Tz::UTC, true),
        }
    }

    /// The zone pages show, as its IANA name.
    pub fn zone_name(&self) -> &'static str {
        self.shown().name()
    }

    /// Does the page show UTC?
    pub fn is_utc(&self) -> bool {
        self.utc
    }

    /// The browser's own zone, when the script told it.
    pub fn browser_zone(&self) -> Option<&'static str> {
        (self.zone != Tz::UTC).then(|| self.zone.name())
    }

    fn shown(&self) -> Tz {
        if self.utc { Tz::UTC } else { self.zone }
    }

    /// `at` (RFC 3339) relative to now when recent, else exact; the exact
    /// time with its zone on hover.
    pub fn time(&self, at: Option<&str>) -> Markup {
        let Some((at, when)) = at.and_then(|at| parse(at).map(|w| (at, w))) else {
            return html! { span.muted { "—" } };
        };
        let delta = when.timestamp_millis() - self.now_ms;
        let text = if delta.abs() < RELATIVE_MS {
            relative(delta)
        } else {
            exact(when, self.shown(), "%Y-%m-%d %H:%M %Z")
        };
        html! { time datetime=(at) data-relative title=(self.full(when)) { (text) } }
    }

    /// `at` (RFC 3339) exact, in `zone` (an IANA name; the viewer's when
    /// `None` or unknown), with the zone named.
    pub fn exact(&self, at: Option<&str>, zone: Option<&str>) -> Markup {
        let Some((at, when)) = at.and_then(|at| parse(at).map(|w| (at, w))) else {
            return html! { span.muted { "—" } };
        };
        let zone = zone
            .and_then(|z| z.parse::<Tz>().ok())
            .unwrap_or(self.shown());
        let delta = when.timestamp_millis() - self.now_ms;
        html! {
            time datetime=(at) title=(relative(delta)) { (exact(when, zone, "%Y-%m-%d %H:%M:%S %Z")) }
        }
    }

    /// A `datetime-local` field's text (`2026-12-03T09:30`), read in the
    /// zone pages show, as RFC 3339 (UTC).
    pub fn parse_local(&self, text: &str) -> Option<String> {
        let naive = ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"]
            .iter()
            .find_map(|f| chrono::NaiveDateTime::parse_from_str(text.trim(), f).ok())?;
        let when = self.shown().from_local_datetime(&naive).earliest()?;
        let ms = u64::try_from(when.timestamp_millis()).ok()?;
        Some(opcode_runtime::time::rfc3339(ms))
    }

    /// The moment the page is rendered (ms since the epoch).
    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.now_ms).unwrap_or(0)
    }

    /// The time from `start` to `end` (to now while running), in words.
    pub fn span(&self, start: Option<&str>, end: Option<&str>) -> Option<String> {
        let start = parse_ms(start?)?;
        let end = end.and_then(parse_ms).unwrap_or(self.now_ms());
        Some(duration(end.saturating_sub(start)))
    }

    fn full(&self, when: DateTime<Utc>) -> String {
        let zone = self.shown();
        format!(
            "{} ({})",
            exact(when, zone, "%Y-%m-%d %H:%M:%S%.3f %Z"),
            zone.name()
        )
    }
}

fn parse(at: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(at)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn exact(when: DateTime<Utc>, zone: Tz, format: &str) -> String {
    zone.from_utc_datetime(&when.naive_utc())
        .format(format)
        .to_string()
}

/// `delta` milliseconds from now in words: "3 min ago", "in 2 h".
pub fn relative(delta: i64) -> String {
    let span = duration(delta.unsigned_abs());
    match delta {
        d if d.abs() < 1_000 => "just now".to_owned(),
        d if d < 0 => format!("{span} ago"),
        _ => format!("in {span}"),
    }
}

/// A duration in words, to its two largest units: "820 ms", "4.2 s",
/// "3 min 12 s", "2 h 5 min", "3 d 4 h".
pub fn duration(ms: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "min"),
        (1_000, "s"),
    ];
    if ms < 1_000 {
        return format!("{ms} ms");
    }
    if ms < 60_000 {
        return format!("{:.1} s", ms as f64 / 1_000.0);
    }
    let (big, name) = UNITS
        .iter()
        .copied()
        .find(|(unit, _)| ms >= *unit)
        .unwrap_or((1_000, "s"));
    let rest = ms % big;
    let next = UNITS.iter().copied().find(|(unit, _)| *unit < big);
    match next {
        Some((small, small_name)) if rest >= small => {
            format!("{} {name} {} {small_name}", ms / big, rest / small)
        }
        _ => format!("{} {name}", ms / big),
    }
}

/// The header's toggle between the browser's zone and UTC.
pub fn toggle(clock: &Clock, back: &str) -> Markup {
    let back = super::url::encode(back);
    html! {
        span.zone {
            "Times: " strong { (clock.zone_name()) }
            @if clock.is_utc() {
                @if clock.browser_zone().is_some() { " · " a href={"/times?show=local&back=" (back)} { "local" } }
            } @else {
                " · " a href={"/times?show=utc&back=" (back)} { "UTC" }
            }
        }
    }
}

/// `GET /times?show=utc|local&back=`: remembers the choice in a cookie and
/// goes back (to a page of this panel only).
pub async fn choose(Query(query): Query<Fields>) -> Response {
    let show = if query.get("show").is_some_and(|s| s == "utc") {
        "utc"
    } else {
        "local"
    };
    let back = query
        .get("back")
        .filter(|b| b.starts_with('/') && !b.starts_with("//") && !b.contains('\\'))
        .map_or("/", String::as_str);
    let mut response = Redirect::to(back).into_response();
    let cookie = format!("{TIMES_COOKIE}={show}; Path=/; Max-Age=31536000; SameSite=Strict");
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(duration(820), "820 ms");
        assert_eq!(duration(4_200), "4.2 s");
        assert_eq!(duration(192_000), "3 min 12 s");
        assert_eq!(duration(180_000), "3 min");
        assert_eq!(duration(7_500_000), "2 h 5 min");
        assert_eq!(duration(3 * 86_400_000 + 4 * 3_600_000), "3 d 4 h");
    }

    #[test]
    fn recent_times_are_relative_and_name_the_zone_on_hover() {
        assert_eq!(relative(-180_000), "3 min ago");
        assert_eq!(relative(7_200_000), "in 2 h");
        assert_eq!(relative(-300), "just now");
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("opcode_zone=Europe%2FMadrid"),
        );
        let clock = Clock::of_request(&headers);
        assert_eq!(clock.zone_name(), "Europe/Madrid");
        let shown = clock
            .exact(Some("2026-12-07T08:30:00Z"), None)
            .into_string();
        assert!(shown.contains("2026-12-07 09:30:00 CET"), "{shown}");
        let in_new_york = clock
            .exact(Some("2026-07-07T08:30:00Z"), Some("America/New_York"))
            .into_string();
        assert!(in_new_york.contains("04:30:00 EDT"), "{in_new_york}");
        headers.append(header::COOKIE, HeaderValue::from_static("opcode_times=utc"));
        let utc = Clock::of_request(&headers);
        assert!(utc.is_utc() && utc.browser_zone() == Some("Europe/Madrid"));
        assert_eq!(
            clock.parse_local("2026-12-07T09:30").as_deref(),
            Some("2026-12-07T08:30:00.000Z")
        );
        let old = utc.time(Some("2020-01-01T00:00:00Z")).into_string();
        assert!(
            old.contains("2020-01-01 00:00 UTC") && old.contains("(UTC)"),
            "{old}"
        );
    }
}

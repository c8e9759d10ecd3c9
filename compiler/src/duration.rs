//! Durations: Go's `time.ParseDuration` syntax, as opcode accepts it.
//!
//! A duration is a sequence of decimal numbers, each with an optional
//! fraction and a unit: `300ms`, `1.5s`, `1h30m`. Units are `ns`, `us`
//! (`µs`), `ms`, `s`, `m`, `h`. Signs are rejected (no negative deadlines);
//! the bare string `0` is zero. Values are kept in whole milliseconds,
//! rounded up so that a non-zero duration never becomes zero.

use std::fmt::Write;

/// The duration `text` likely means, in this syntax, when it is one
/// written another way: spaces (`30 s`), unit words (`5min`, `2 hours`,
/// `100msec`), days (`1d` → `24h`), upper case.
pub fn suggest(text: &str) -> Option<String> {
    const UNITS: &[(&str, &str)] = &[
        ("milliseconds", "ms"),
        ("millisecond", "ms"),
        ("millis", "ms"),
        ("msecs", "ms"),
        ("msec", "ms"),
        ("seconds", "s"),
        ("second", "s"),
        ("secs", "s"),
        ("sec", "s"),
        ("minutes", "m"),
        ("minute", "m"),
        ("mins", "m"),
        ("min", "m"),
        ("hours", "h"),
        ("hour", "h"),
        ("hrs", "h"),
        ("hr", "h"),
    ];
    let compact: String = text.trim().to_lowercase().split_whitespace().collect();
    if let Some(days) = compact
        .strip_suffix("days")
        .or_else(|| compact.strip_suffix("day"))
        .or_else(|| compact.strip_suffix('d'))
    {
        let days: u64 = days.parse().ok()?;
        return Some(format!("{}h", days.checked_mul(24)?));
    }
    let mut out = String::new();
    let mut rest = compact.as_str();
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        out.push_str(&rest[..digits]);
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        let ours = UNITS
            .iter()
            .find(|(word, _)| *word == unit)
            .map_or(unit, |(_, u)| *u);
        out.push_str(ours);
        rest = &rest[unit_len..];
    }
    (out != text && parse_millis(&out).is_ok()).then_some(out)
}

/// A fix writing the duration `text` (a JSON string at `span`, at
/// `pointer`) as [`suggest`] reads it, when it does.
pub fn fix(
    text: &str,
    span: crate::source::Span,
    pointer: &str,
) -> Option<crate::diagnostics::Fix> {
    let meant = suggest(text)?;
    Some(crate::diagnostics::Fix::replace(
        format!("write `{meant}`"),
        span,
        format!("\"{meant}\""),
        Some(crate::diagnostics::PatchOp::Replace {
            path: pointer.to_owned(),
            value: meant.into(),
        }),
    ))
}

/// Parses a duration into milliseconds, or explains what is wrong.
pub fn parse_millis(text: &str) -> Result<u64, String> {
    if text == "0" {
        return Ok(0);
    }
    if text.is_empty() {
        return Err("empty duration".into());
    }
    if text.starts_with(['-', '+']) {
        return Err("durations cannot have a sign".into());
    }
    let mut nanos: u128 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_len];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(format!("expected a number in `{text}`"));
        }
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(format!("missing unit in `{text}` (use ms, s, m or h)")),
            "d" => return Err("days are not a unit; write `24h`".into()),
            other => {
                return Err(format!(
                    "unknown unit `{other}` (use ns, us, ms, s, m or h)"
                ));
            }
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole
                .parse()
                .map_err(|_| format!("`{text}` is too large"))?
        };
        let mut value = whole
            .checked_mul(scale)
            .ok_or_else(|| format!("`{text}` is too large"))?;
        let mut place = scale;
        for digit in fraction.bytes() {
            place /= 10;
            value += u128::from(digit - b'0') * place;
        }
        nanos = nanos
            .checked_add(value)
            .ok_or_else(|| format!("`{text}` is too large"))?;
    }
    let millis = nanos.div_ceil(1_000_000);
    u64::try_from(millis).map_err(|_| format!("`{text}` is too large"))
}

/// Formats milliseconds the way people write durations (`1h30m`, `250ms`).
pub fn format_millis(ms: u64) -> String {
    if ms == 0 {
        return "0s".into();
    }
    if !ms.is_multiple_of(1000) {
        if ms < 1000 {
            return format!("{ms}ms");
        }
        return format!("{}s", ms as f64 / 1000.0);
    }
    let mut secs = ms / 1000;
    let mut out = String::new();
    for (unit, size) in [("h", 3600), ("m", 60), ("s", 1)] {
        if secs >= size {
            let _ = write!(out, "{}{unit}", secs / size);
            secs %= size;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_the_duration_meant() {
        for (written, meant) in [
            ("30 s", "30s"),
            ("5min", "5m"),
            ("2 hours", "2h"),
            ("100msec", "100ms"),
            ("1d", "24h"),
            ("1H30M", "1h30m"),
            ("1.5 sec", "1.5s"),
        ] {
            assert_eq!(suggest(written).as_deref(), Some(meant), "{written}");
        }
        assert_eq!(suggest("soon"), None);
        assert_eq!(suggest("30s"), None);
    }

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_millis("30s"), Ok(30_000));
        assert_eq!(parse_millis("1h30m"), Ok(5_400_000));
        assert_eq!(parse_millis("1.5s"), Ok(1_500));
        assert_eq!(parse_millis("250ms"), Ok(250));
        assert_eq!(parse_millis("10us"), Ok(1));
        assert_eq!(parse_millis("0"), Ok(0));
        assert_eq!(parse_millis("180s"), Ok(180_000));
    }

    #[test]
    fn rejects_bad_durations() {
        assert!(parse_millis("").is_err());
        assert!(parse_millis("10").unwrap_err().contains("missing unit"));
        assert!(parse_millis("-1s").is_err());
        assert!(parse_millis("1d").unwrap_err().contains("24h"));
        assert!(parse_millis("1.2.3s").is_err());
        assert!(parse_millis("5 min").is_err());
        assert!(parse_millis("99999999999999999999999h").is_err());
    }

    #[test]
    fn formats_durations() {
        assert_eq!(format_millis(5_400_000), "1h30m");
        assert_eq!(format_millis(250), "250ms");
        assert_eq!(format_millis(1_500), "1.5s");
        assert_eq!(format_millis(30_000), "30s");
    }
}

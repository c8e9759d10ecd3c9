//! Durations: Go's `time.ParseDuration` syntax, as opcode accepts it.
//!
//! A duration is a sequence of decimal numbers, each with an optional
//! fraction and a unit: `300ms`, `1.5s`, `1h30m`. Units are `ns`, `us`
//! (`µs`), `ms`, `s`, `m`, `h`. Signs are rejected (no negative deadlines);
//! the bare string `0` is zero. Values are kept in whole milliseconds,
//! rounded up so that a non-zero duration never becomes zero.

use std::fmt::Write;

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

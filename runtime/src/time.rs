//! Time at the edge: the runtime reads the clock and stamps events; the VM
//! only ever sees the numbers. One text encoding everywhere: RFC 3339, UTC,
//! milliseconds (`2026-11-29T10:30:00.000Z`), so text order is time order.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `ms` since the epoch as RFC 3339 text.
pub fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// `ttl` from now, as RFC 3339 text (when a lease granted now expires).
pub fn from_now(ttl: Duration) -> String {
    rfc3339(now_ms() + ttl.as_millis() as u64)
}

/// RFC 3339 text as milliseconds since the epoch.
pub fn parse_ms(text: &str) -> Option<u64> {
    let t = humantime::parse_rfc3339(text).ok()?;
    t.duration_since(UNIX_EPOCH)
        .ok()
        .map(|d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_milliseconds() {
        for ms in [0, 1, 999, 1_764_412_200_123, 4_102_444_800_000] {
            assert_eq!(parse_ms(&rfc3339(ms)), Some(ms));
        }
        assert_eq!(rfc3339(1_764_412_200_123), "2025-11-29T10:30:00.123Z");
    }

    #[test]
    fn text_order_is_time_order() {
        let a = rfc3339(1_764_412_200_999);
        let b = rfc3339(1_764_412_201_000);
        assert!(a < b);
    }
}

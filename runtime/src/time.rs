//! Time at the edge: the runtime reads the clock and stamps events; the VM
//! only ever sees the numbers. One text encoding everywhere: RFC 3339, UTC,
//! milliseconds (`2026-11-29T10:30:00.000Z`), so text order is time order.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where the virtual clock started: the wall clock then, and tokio's.
static VIRTUAL: OnceLock<(u64, std::time::Instant)> = OnceLock::new();

/// Milliseconds since the Unix epoch, now: the wall clock, or the virtual
/// clock once [`use_virtual_clock`] was called.
pub fn now_ms() -> u64 {
    match VIRTUAL.get() {
        Some((wall, start)) => {
            let elapsed = tokio::time::Instant::now()
                .into_std()
                .saturating_duration_since(*start);
            wall + elapsed.as_millis() as u64
        }
        None => wall_ms(),
    }
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Is [`now_ms`] the virtual clock?
pub fn is_virtual() -> bool {
    VIRTUAL.get().is_some()
}

/// From now on, in this process, [`now_ms`] follows tokio's clock: in a
/// runtime whose time is paused (`opcodec test`), waits, timeouts and
/// backoffs pass as soon as nothing else is left to do, in their order,
/// and the times the engine stamps are the virtual ones. It starts at the
/// wall clock's now.
pub fn use_virtual_clock() {
    VIRTUAL.get_or_init(|| (wall_ms(), std::time::Instant::now()));
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

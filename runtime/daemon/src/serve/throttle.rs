//! Slowing down token guessing: after [`FREE`] wrong tokens from one
//! client address, each further try must wait a delay that doubles with
//! every failure (from 250 ms up to a minute); a try made sooner is
//! refused (429) without being checked. A right token clears the client's
//! count; a quiet quarter of an hour forgets it.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Wrong tokens a client may send before it is slowed down.
pub const FREE: u32 = 5;
/// The first delay.
const FIRST: Duration = Duration::from_millis(250);
/// The longest delay.
const LONGEST: Duration = Duration::from_mins(1);
/// A client quiet this long starts afresh.
const FORGET: Duration = Duration::from_mins(15);
/// Clients remembered at once (the oldest is forgotten first).
const CLIENTS: usize = 4096;

/// Wrong tokens by client address.
#[derive(Debug, Default)]
pub struct Throttle {
    clients: Mutex<HashMap<IpAddr, Failures>>,
}

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
}

impl Failures {
    /// How long after the last failure the next try may come.
    fn delay(self) -> Duration {
        match self.count.checked_sub(FREE) {
            None => Duration::ZERO,
            Some(over) => FIRST
                .checked_mul(1u32 << over.min(16))
                .map_or(LONGEST, |d| d.min(LONGEST)),
        }
    }
}

impl Throttle {
    /// How long `client` must still wait before a try is checked (none:
    /// it may try now).
    pub fn wait(&self, client: IpAddr, now: Instant) -> Option<Duration> {
        let clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        let failures = clients.get(&client)?;
        let since = now.saturating_duration_since(failures.last);
        if since > FORGET {
            return None;
        }
        failures.delay().checked_sub(since).filter(|d| !d.is_zero())
    }

    /// `client` sent a wrong token; returns its count of failures.
    pub fn failed(&self, client: IpAddr, now: Instant) -> u32 {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if clients.len() >= CLIENTS && !clients.contains_key(&client) {
            let oldest = clients
                .iter()
                .min_by_key(|(_, f)| f.last)
                .map(|(ip, _)| *ip);
            if let Some(oldest) = oldest {
                clients.remove(&oldest);
            }
        }
        let entry = clients.entry(client).or_insert(Failures {
            count: 0,
            last: now,
        });
        if now.saturating_duration_since(entry.last) > FORGET {
            entry.count = 0;
        }
        entry.count += 1;
        entry.last = now;
        entry.count
    }

    /// `client` sent the right token.
    pub fn succeeded(&self, client: IpAddr) {
        self.clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&client);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_after_the_free_tries_and_a_success_clears_them() {
        let throttle = Throttle::default();
        let (client, other) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let start = Instant::now();
        for _ in 0..FREE {
            assert_eq!(throttle.wait(client, start), None);
            throttle.failed(client, start);
        }
        assert_eq!(
            throttle.wait(client, start),
            Some(Duration::from_millis(250))
        );
        throttle.failed(client, start);
        assert_eq!(
            throttle.wait(client, start),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            throttle.wait(other, start),
            None,
            "another client is not slowed"
        );
        assert_eq!(throttle.wait(client, start + Duration::from_secs(1)), None);
        for _ in 0..40 {
            throttle.failed(client, start);
        }
        assert_eq!(throttle.wait(client, start), Some(LONGEST));
        throttle.succeeded(client);
        assert_eq!(throttle.wait(client, start), None);
    }
}

//! Slowing down token guessing: after [`FREE`] wrong tokens from one
//! client network (an IPv4 /24, all of 127/8, an IPv6 /64: addresses an
//! attacker can hop between), each further try must wait a delay that
//! doubles with every failure (from 250 ms up to a minute); a try made
//! sooner is refused (429) without being checked. A right token clears the
//! network's count; a quiet quarter of an hour forgets it. A backstop
//! counts every network's failures together: past [`GLOBAL_FREE`], every
//! network that has failed waits the delay the total calls for too, so
//! many networks guessing at once gain nothing.

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
/// Wrong tokens from all networks together before the backstop slows
/// every network that has failed.
pub const GLOBAL_FREE: u32 = 50;

/// Wrong tokens by client network, and in all.
#[derive(Debug, Default)]
pub struct Throttle {
    clients: Mutex<HashMap<IpAddr, Failures>>,
    all: Mutex<Option<Failures>>,
}

/// The network `client` is counted in.
fn network(client: IpAddr) -> IpAddr {
    match client {
        IpAddr::V4(v4) if v4.is_loopback() => IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 0)),
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            IpAddr::V4(std::net::Ipv4Addr::new(a, b, c, 0))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return network(IpAddr::V4(v4));
            }
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(std::net::Ipv6Addr::from(bits))
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
}

impl Failures {
    /// How long after the last failure the next try may come, `free`
    /// failures being free.
    fn delay_after(self, free: u32) -> Duration {
        match self.count.checked_sub(free) {
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
        let failures = *clients.get(&network(client))?;
        drop(clients);
        let all = *self.all.lock().unwrap_or_else(PoisonError::into_inner);
        [Some((failures, FREE)), all.map(|a| (a, GLOBAL_FREE))]
            .into_iter()
            .flatten()
            .filter_map(|(failures, free)| {
                let since = now.saturating_duration_since(failures.last);
                if since > FORGET {
                    return None;
                }
                failures.delay_after(free).checked_sub(since)
            })
            .filter(|d| !d.is_zero())
            .max()
    }

    /// `client` sent a wrong token; returns its network's count of failures.
    pub fn failed(&self, client: IpAddr, now: Instant) -> u32 {
        count(
            &mut self.all.lock().unwrap_or_else(PoisonError::into_inner),
            now,
        );
        let client = network(client);
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
        let mut entry = clients.get(&client).copied();
        let counted = count(&mut entry, now);
        if let Some(entry) = entry {
            clients.insert(client, entry);
        }
        counted
    }

    /// `client` sent the right token (the backstop's count stays: it
    /// fades with quiet only).
    pub fn succeeded(&self, client: IpAddr) {
        self.clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&network(client));
    }
}

/// Counts one more failure at `now` (after a quiet [`FORGET`], the first).
fn count(failures: &mut Option<Failures>, now: Instant) -> u32 {
    let entry = failures.get_or_insert(Failures {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_after_the_free_tries_and_a_success_clears_them() {
        let throttle = Throttle::default();
        let (client, other) = ("10.0.0.1".parse().unwrap(), "10.0.1.2".parse().unwrap());
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

    #[test]
    fn a_network_is_one_client_and_many_networks_meet_the_backstop() {
        let throttle = Throttle::default();
        let start = Instant::now();
        // Forty loopback addresses are one client.
        for i in 1..=40u8 {
            let ip = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, i));
            throttle.failed(ip, start);
        }
        assert!(throttle.wait("127.9.9.9".parse().unwrap(), start).is_some());
        assert!(
            throttle
                .wait("::ffff:127.0.0.7".parse().unwrap(), start)
                .is_some()
        );
        // Networks of their own, each within its free tries, meet the
        // backstop once all of them together pass it.
        let throttle = Throttle::default();
        for i in 0..=GLOBAL_FREE {
            let ip = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, (i % 250) as u8, 1));
            assert!(throttle.wait(ip, start).is_none(), "try {i}");
            throttle.failed(ip, start);
        }
        assert!(throttle.wait("10.0.3.1".parse().unwrap(), start).is_some());
        // A network that never failed is not slowed by the others.
        assert!(
            throttle
                .wait("192.168.1.1".parse().unwrap(), start)
                .is_none()
        );
        // IPv6 hosts of one /64 are one client.
        let throttle = Throttle::default();
        for i in 0..FREE {
            throttle.failed(format!("2001:db8::{i}").parse().unwrap(), start);
        }
        assert!(
            throttle
                .wait("2001:db8::ffff".parse().unwrap(), start)
                .is_some()
        );
        assert!(
            throttle
                .wait("2001:db8:0:1::1".parse().unwrap(), start)
                .is_none()
        );
    }
}

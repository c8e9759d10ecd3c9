//! Strict reading of `Host` and `Origin` values (RFC 9110, RFC 6454): a
//! value that is not exactly `host[:port]` or `scheme://host[:port]` is
//! refused, never read leniently (`http://127.0.0.1:1@evil.example` names
//! evil.example, not loopback).

use std::net::{IpAddr, Ipv6Addr};

/// A host and an optional port, as a `Host` header or an origin gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authority {
    /// The host: a name (lower-cased) or an IP address (IPv6 without brackets).
    pub host: String,
    /// The port, if written.
    pub port: Option<u16>,
}

/// A web origin: scheme, host and port (the default port filled in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// `http` or `https`.
    pub scheme: String,
    /// The host and port.
    pub authority: Authority,
}

impl Authority {
    /// Reads `host[:port]`, `[v6]:port`; no user info, path, query or space.
    pub fn parse(text: &str) -> Option<Authority> {
        if text.is_empty()
            || text
                .bytes()
                .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return None;
        }
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let (v6, after) = rest.split_once(']')?;
            let ip: Ipv6Addr = v6.parse().ok()?;
            let port = match after {
                "" => None,
                _ => Some(after.strip_prefix(':')?),
            };
            (ip.to_string(), port)
        } else {
            let (host, port) = match text.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (text, None),
            };
            let name_like = host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
            if host.is_empty() || !name_like {
                return None;
            }
            (host.to_ascii_lowercase(), port)
        };
        let port = match port {
            None => None,
            Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
                Some(digits.parse().ok()?)
            }
            Some(_) => return None,
        };
        Some(Authority { host, port })
    }

    /// Is the host a loopback name or address?
    pub fn is_loopback(&self) -> bool {
        self.host == "localhost" || self.host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}

impl Origin {
    /// Reads `http://host[:port]` or `https://host[:port]` and nothing else
    /// (`null`, paths, user info and other schemes are refused).
    pub fn parse(text: &str) -> Option<Origin> {
        let (scheme, rest) = text.split_once("://")?;
        let scheme = scheme.to_ascii_lowercase();
        if !matches!(scheme.as_str(), "http" | "https") {
            return None;
        }
        let authority = Authority::parse(rest)?;
        Some(Origin { scheme, authority })
    }

    /// The port, the scheme's default filled in.
    pub fn port(&self) -> u16 {
        self.authority
            .port
            .unwrap_or(if self.scheme == "https" { 443 } else { 80 })
    }

    /// Same scheme, host and port?
    pub fn same(&self, other: &Origin) -> bool {
        self.scheme == other.scheme
            && self.authority.host == other.authority.host
            && self.port() == other.port()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_read_strictly() {
        let ok = |t: &str| Authority::parse(t).unwrap();
        assert_eq!(ok("127.0.0.1:4100").port, Some(4100));
        assert_eq!(ok("[::1]:4100").host, "::1");
        assert_eq!(ok("Opcode.LAN").host, "opcode.lan");
        assert!(ok("localhost").is_loopback() && ok("[::1]").is_loopback());
        for bad in [
            "",
            "a b",
            "user@host",
            "host:",
            "host:99999",
            "host:8x",
            "[::1",
            "h/x",
            "[zz]:1",
        ] {
            assert_eq!(Authority::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn origins_refuse_user_info_paths_and_null() {
        let evil = Origin::parse("http://127.0.0.1:1@evil.example");
        assert_eq!(evil, None);
        for bad in [
            "null",
            "file://",
            "http://a/path",
            "ftp://a",
            "http://",
            "http://a:1:2",
        ] {
            assert_eq!(Origin::parse(bad), None, "{bad}");
        }
        let a = Origin::parse("https://panel.lan").unwrap();
        assert!(a.same(&Origin::parse("HTTPS://PANEL.lan:443").unwrap()));
        assert!(!a.same(&Origin::parse("http://panel.lan").unwrap()));
        assert!(
            Origin::parse("http://localhost:3000")
                .unwrap()
                .authority
                .is_loopback()
        );
    }
}

//! The client address written by trusted proxies into `X-Forwarded-For`.

use std::net::{IpAddr, SocketAddr};

use http::HeaderName;
use http::request::Parts;

use super::PeerIp;
use super::ip::ip_key;
use crate::{Key, KeyError, KeyExtractor};

/// Counts requests by the client address that your own reverse proxies
/// recorded in `X-Forwarded-For` (or another header of the same form).
///
/// **This header can be spoofed.** Anyone can send a request with any
/// `X-Forwarded-For`; each proxy only *appends* the address it received
/// the connection from. So only the last `trusted_proxies` entries were
/// written by proxies you control, and the one they wrote for the client
/// is the `trusted_proxies`-th from the right: that is the entry used here,
/// and everything to its left is ignored. Set `trusted_proxies` to exactly
/// the number of proxies in front of the service: one too many and a
/// client picks its own key (and its own budget) by writing the header;
/// and the service must not be reachable without going through them.
///
/// A request with fewer entries than `trusted_proxies` (one that did not
/// come through the proxies), or whose entry is not an address, is keyed
/// by its peer address, as with [`PeerIp`].
///
/// ```
/// use tollgate_tower::extract::ForwardedFor;
///
/// // One load balancer in front of the service.
/// let client = ForwardedFor::new(1)?;
/// # Ok::<(), tollgate::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ForwardedFor {
    header: HeaderName,
    trusted_proxies: usize,
    peer: PeerIp,
}

impl ForwardedFor {
    /// Reads `X-Forwarded-For` as written by `trusted_proxies` proxies (at
    /// least 1).
    pub fn new(trusted_proxies: usize) -> tollgate::Result<ForwardedFor> {
        if trusted_proxies == 0 {
            return Err(tollgate::Error::InvalidArgument {
                field: "trusted_proxies",
                reason: "must be at least 1: with no proxy of yours in front, every entry of the header is the client's own word (use PeerIp)".into(),
            });
        }
        Ok(ForwardedFor {
            header: HeaderName::from_static("x-forwarded-for"),
            trusted_proxies,
            peer: PeerIp::new(),
        })
    }

    /// Reads another header of the same comma-separated form.
    pub fn header(mut self, name: HeaderName) -> ForwardedFor {
        self.header = name;
        self
    }

    /// Groups IPv6 addresses by their first `bits` bits (default 64).
    pub fn ipv6_prefix(mut self, bits: u8) -> tollgate::Result<ForwardedFor> {
        self.peer = self.peer.ipv6_prefix(bits)?;
        Ok(self)
    }

    /// The client entry: the `trusted_proxies`-th from the right, over every
    /// line of the header in order.
    fn client_entry(&self, request: &Parts) -> Option<IpAddr> {
        let mut entries: Vec<&str> = Vec::new();
        for value in request.headers.get_all(&self.header) {
            let value = value.to_str().ok()?;
            entries.extend(value.split(',').map(str::trim));
        }
        let index = entries.len().checked_sub(self.trusted_proxies)?;
        parse_entry(entries[index])
    }
}

/// An address, with or without a port (`198.51.100.7`, `198.51.100.7:443`,
/// `2001:db8::1`, `[2001:db8::1]:443`).
fn parse_entry(entry: &str) -> Option<IpAddr> {
    entry
        .parse::<IpAddr>()
        .ok()
        .or_else(|| entry.parse::<SocketAddr>().ok().map(|a| a.ip()))
}

impl KeyExtractor for ForwardedFor {
    fn extract(&self, request: &Parts) -> Result<Option<Key>, KeyError> {
        match self.client_entry(request) {
            Some(ip) => Ok(Some(ip_key(ip, self.peer.ipv6_prefix_bits()))),
            None => self.peer.extract(request),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(lines: &[&str], peer: Option<&str>) -> Parts {
        let mut builder = http::Request::builder();
        for line in lines {
            builder = builder.header("x-forwarded-for", *line);
        }
        let (mut parts, ()) = builder.body(()).unwrap().into_parts();
        if let Some(peer) = peer {
            parts.extensions.insert(peer.parse::<SocketAddr>().unwrap());
        }
        parts
    }

    fn key(extractor: &ForwardedFor, lines: &[&str], peer: Option<&str>) -> Key {
        extractor.extract(&parts(lines, peer)).unwrap().unwrap()
    }

    #[test]
    fn takes_the_entry_written_by_the_outermost_trusted_proxy() {
        let one = ForwardedFor::new(1).unwrap();
        let two = ForwardedFor::new(2).unwrap();
        let peer = Some("10.0.0.2:5000");
        // The client wrote "203.0.113.66"; the load balancer appended the
        // real address.
        let lines = ["203.0.113.66, 198.51.100.7"];
        assert_eq!(key(&one, &lines, peer), Key::from("198.51.100.7"));
        assert_eq!(key(&two, &lines, peer), Key::from("203.0.113.66"));
        // Entries over several header lines count in order.
        let split = ["203.0.113.66", "198.51.100.7:4711, 10.0.0.9"];
        assert_eq!(key(&two, &split, peer), Key::from("198.51.100.7"));
        let v6 = ["[2001:db8:1:2::77]:443"];
        assert_eq!(key(&one, &v6, peer), Key::from("2001:db8:1:2::/64"));
    }

    #[test]
    fn falls_back_to_the_peer_address() {
        let two = ForwardedFor::new(2).unwrap();
        let peer = Some("198.51.100.9:5000");
        assert_eq!(
            key(&two, &["203.0.113.66"], peer),
            Key::from("198.51.100.9")
        );
        assert_eq!(key(&two, &[], peer), Key::from("198.51.100.9"));
        assert_eq!(
            key(&two, &["unknown, 10.0.0.1"], peer),
            Key::from("198.51.100.9")
        );
        assert!(two.extract(&parts(&[], None)).is_err());
        assert_eq!(ForwardedFor::new(0).unwrap_err().code(), "invalid_argument");
    }
}

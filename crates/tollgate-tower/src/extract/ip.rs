//! Addresses as keys.

use std::net::{IpAddr, Ipv6Addr};

use crate::Key;

/// The default length of the IPv6 prefix that counts as one client.
pub(crate) const DEFAULT_IPV6_PREFIX: u8 = 64;

/// Checks an IPv6 prefix length (1 to 128 bits).
pub(crate) fn validate_ipv6_prefix(bits: u8) -> tollgate::Result<u8> {
    if bits == 0 || bits > 128 {
        return Err(tollgate::Error::InvalidArgument {
            field: "ipv6_prefix",
            reason: format!("must be 1 to 128 bits, got {bits}"),
        });
    }
    Ok(bits)
}

/// The key of an address: IPv4 addresses as they are (IPv4-mapped IPv6
/// addresses too), IPv6 addresses cut to their first `v6_prefix` bits.
///
/// A single IPv6 host usually holds a whole /64 and may pick any address in
/// it, so keying by full address would give it 2^64 budgets.
pub(crate) fn ip_key(ip: IpAddr, v6_prefix: u8) -> Key {
    let ip = match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    };
    match ip {
        IpAddr::V4(v4) => Key::from(v4.to_string()),
        IpAddr::V6(v6) if v6_prefix >= 128 => Key::from(v6.to_string()),
        IpAddr::V6(v6) => {
            let mask = u128::MAX << (128 - u32::from(v6_prefix));
            let net = Ipv6Addr::from(u128::from(v6) & mask);
            Key::from(format!("{net}/{v6_prefix}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_is_grouped_by_prefix_and_mapped_ipv4_is_ipv4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(ip_key(a, 64), Key::from("2001:db8:1:2::/64"));
        assert_eq!(ip_key(a, 64), ip_key(b, 64));
        assert_ne!(ip_key(a, 64), ip_key(c, 64));
        assert_eq!(ip_key(a, 128), Key::from("2001:db8:1:2:aaaa::1"));
        assert_eq!(ip_key(c, 48), Key::from("2001:db8:1::/48"));
        let mapped: IpAddr = "::ffff:198.51.100.7".parse().unwrap();
        assert_eq!(ip_key(mapped, 64), Key::from("198.51.100.7"));
        assert_eq!(
            validate_ipv6_prefix(0).unwrap_err().to_string(),
            "invalid argument: `ipv6_prefix` must be 1 to 128 bits, got 0"
        );
        assert!(validate_ipv6_prefix(129).is_err());
    }
}

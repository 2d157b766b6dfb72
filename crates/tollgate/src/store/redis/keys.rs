//! Redis key layout.
//!
//! A (policy, key) pair's whole state lives in one Redis key:
//!
//! ```text
//! <prefix>{<policy>:<escaped user key>}:<algorithm>
//! ```
//!
//! The braces are a Redis Cluster hash tag, so the slot is decided by the
//! policy and the user key alone. User keys are arbitrary bytes; inside the
//! tag every `}` is written `\]` and every `\` is written `\\`, so a user
//! key can never end the tag early (which would move its slot) and two
//! different user keys never give the same Redis key. The algorithm suffix
//! (`fw`, `sw`, `sl`, `tb`, `gcra`, `lb`, `cc`) keeps a policy that changes
//! algorithm from reading state of another shape. A fixed window on the
//! server's clock whose window is whole milliseconds and whose limit is
//! below 2^49 keeps its state in another shape, what the window has left,
//! expiring with its window (`lua/fixed_window_server.lua`), under the
//! suffix `fws:<window ms>:<limit>`: the script reads both from the key's
//! name when it starts a window, so a changed window or limit starts over.
//! So do a token bucket, GCRA and leaky bucket on the server's clock whose
//! interval is whole milliseconds (on Redis 7.0 and later): an empty key
//! whose expiry is the theoretical arrival time (`lua/bucket_expiry.lua`),
//! under the suffixes `tbs`, `gcras` and `lbs`.
//!
//! A policy in a group ([`Policy::with_group`]) keys its state by the group
//! and the user key instead, the policy's name after the tag:
//!
//! ```text
//! <prefix>{<group>/<escaped user key>}:<policy>:<algorithm>
//! ```
//!
//! so every policy of the group keeps one user key's state in one slot.
//! Policy and group names are limited to `A-Z a-z 0-9 _ - .` (so a `/`
//! tells a group's tag from a policy's `:`), and the prefix may not
//! contain braces.
//!
//! With a deadline, on a standalone server (or Sentinel's master), a fixed
//! window's check sent alone also names a clock key, holding no state:
//!
//! ```text
//! <prefix>clock:<ms>
//! ```
//!
//! which exists only until that ms of the server's clock
//! (`lua/fixed_window_server_deadline.lua`): while it is there, a check
//! whose deadline is later needs not read the clock. A few live at a time,
//! each for at most the deadline.

use crate::{Error, Policy, Result};

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "tollgate:";

/// The longest key prefix, in bytes.
pub const MAX_PREFIX_LEN: usize = 128;

/// Checks a key prefix: at most 128 bytes and no `{` or `}`.
pub(crate) fn validate_prefix(prefix: &str) -> Result<()> {
    if prefix.len() > MAX_PREFIX_LEN || prefix.contains(['{', '}']) {
        return Err(Error::argument(
            "prefix",
            format!("must be at most {MAX_PREFIX_LEN} bytes without `{{` or `}}`, got {prefix:?}"),
        ));
    }
    Ok(())
}

/// The name of a fixed window's server-clock form: its key's suffix starts
/// with it (then the window and the limit), and the batch names it so.
pub(crate) const SERVER_WINDOW_TAG: &str = "fws";

/// The Redis key holding `key`'s state under `policy`, whose state has the
/// shape the suffix names (see the module's doc); the suffix comes in
/// parts, so that numbers in it need no string of their own.
pub(crate) fn redis_key(prefix: &str, policy: &Policy, key: &[u8], suffix: &[&[u8]]) -> Vec<u8> {
    let name = policy.name().as_bytes();
    let suffix_len: usize = suffix.iter().map(|part| part.len()).sum();
    let mut out = Vec::with_capacity(prefix.len() + name.len() + key.len() + suffix_len + 8);
    out.extend_from_slice(prefix.as_bytes());
    out.push(b'{');
    match policy.group() {
        Some(group) => {
            out.extend_from_slice(group.as_bytes());
            out.push(b'/');
        }
        None => {
            out.extend_from_slice(name);
            out.push(b':');
        }
    }
    for &b in key {
        match b {
            b'}' => out.extend_from_slice(b"\\]"),
            b'\\' => out.extend_from_slice(b"\\\\"),
            _ => out.push(b),
        }
    }
    out.push(b'}');
    out.push(b':');
    if policy.group().is_some() {
        out.extend_from_slice(name);
        out.push(b':');
    }
    for part in suffix {
        out.extend_from_slice(part);
    }
    out
}

/// The clock key that exists until `ms` on the server's clock (see the
/// module's doc).
pub(crate) fn clock_key(prefix: &str, ms: u64) -> Vec<u8> {
    let mut digits = [0; 20];
    [prefix.as_bytes(), b"clock:", decimal(ms, &mut digits)].concat()
}

/// `n` in decimal, written at the end of `buf`: the digits' slice.
pub(crate) fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut start = buf.len();
    loop {
        start -= 1;
        buf[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[start..];
        }
    }
}

/// The Redis Cluster slot of a key (CRC16/XMODEM of its hash tag, mod 16384).
pub(crate) fn slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            key[open + 1..]
                .iter()
                .position(|&b| b == b'}')
                .filter(|&len| len > 0)
                .map(|len| &key[open + 1..open + 1 + len])
        })
        .unwrap_or(key);
    crc16(tagged) % 16384
}

/// CRC16/XMODEM (polynomial 0x1021), a byte at a time from a table.
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ CRC16_TABLE[usize::from((crc >> 8) as u8 ^ b)]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn braces_in_user_keys_neither_move_the_slot_nor_collide() {
        let p = Policy::fixed_window("books", 1, Duration::from_secs(1)).unwrap();
        let plain = redis_key("t:", &p, b"user", &[b"fw"]);
        assert_eq!(plain, b"t:{books:user}:fw");
        let braced = redis_key("t:", &p, b"us}er{", &[b"fw"]);
        assert_eq!(braced, b"t:{books:us\\]er{}:fw");
        // The tag is everything between the braces we wrote.
        assert_eq!(slot(&braced), crc16(b"books:us\\]er{") % 16384);
        // Escaping is injective.
        assert_ne!(
            redis_key("t:", &p, b"a}", &[b"fw"]),
            redis_key("t:", &p, b"a\\]", &[b"fw"])
        );
        assert_ne!(
            redis_key("t:", &p, b"a\\", &[b"fw"]),
            redis_key("t:", &p, b"a\\\\", &[b"fw"])
        );
    }

    #[test]
    fn a_group_keeps_a_subjects_policies_in_one_slot() {
        let second = Policy::fixed_window("s", 1, Duration::from_secs(1)).unwrap();
        let day = Policy::fixed_window("d", 1, Duration::from_secs(86_400)).unwrap();
        let (gs, gd) = (
            second.clone().with_group("user").unwrap(),
            day.clone().with_group("user").unwrap(),
        );
        let key = redis_key("t:", &gs, b"u}1", &[b"fw"]);
        assert_eq!(key, b"t:{user/u\\]1}:s:fw");
        assert_eq!(slot(&key), slot(&redis_key("t:", &gd, b"u}1", &[b"fw"])));
        assert_ne!(key, redis_key("t:", &gd, b"u}1", &[b"fw"]));
        // Without the group, the two policies' tags differ; and a group
        // named like a policy never shares a key with it.
        assert_ne!(
            slot(&redis_key("t:", &second, b"u1", &[b"fw"])),
            slot(&redis_key("t:", &day, b"u1", &[b"fw"]))
        );
        let named_s = Policy::fixed_window("user", 1, Duration::from_secs(1)).unwrap();
        assert_ne!(
            redis_key("t:", &named_s, b"u1", &[b"s:fw"]),
            redis_key("t:", &gs, b"u1", &[b"fw"])
        );
        assert!(second.with_group("a/b").is_err());
    }

    #[test]
    fn decimals_are_written_in_full() {
        let mut buf = [0; 20];
        for n in [0, 7, 10, 3_600_000, u64::MAX] {
            assert_eq!(decimal(n, &mut buf), n.to_string().as_bytes());
        }
    }

    #[test]
    fn crc16_matches_redis() {
        // Values from the Redis Cluster specification's reference.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_ne!(slot(b"foo{}{bar}"), slot(b"bar"));
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
    }

    #[test]
    fn prefixes_with_braces_are_refused() {
        assert!(validate_prefix("ok:").is_ok());
        assert!(validate_prefix("a{b").is_err());
    }
}

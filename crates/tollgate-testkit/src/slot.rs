//! Redis Cluster hash slots.

/// Number of hash slots in a Redis Cluster.
pub const SLOT_COUNT: u16 = 16384;

/// CRC16/XMODEM (polynomial 0x1021, initial value 0, no reflection), the
/// checksum Redis Cluster uses for key hashing.
fn crc16_xmodem(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The Redis Cluster hash slot of `key`, as `CLUSTER KEYSLOT` computes it.
///
/// Hash-tag rule: if the key contains a `{` followed later by a `}` with at
/// least one byte between them, only the bytes between the first `{` and the
/// first `}` after it are hashed; otherwise the whole key is.
///
/// ```
/// use tollgate_testkit::key_slot;
/// assert_eq!(key_slot(b"foo"), 12182);
/// assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
/// ```
pub fn key_slot(key: &[u8]) -> u16 {
    crc16_xmodem(hash_tag(key)) % SLOT_COUNT
}

fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{')
        && let Some(close) = key[open + 1..].iter().position(|&b| b == b'}')
        && close > 0
    {
        return &key[open + 1..open + 1 + close];
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_check_value() {
        // The standard CRC-16/XMODEM check value.
        assert_eq!(crc16_xmodem(b"123456789"), 0x31C3);
    }

    #[test]
    fn matches_redis_cli_cluster_keyslot() {
        // Values recorded from `redis-cli CLUSTER KEYSLOT <key>` (redis 7.0.15).
        // The cluster integration test also compares against a live server.
        let cases: &[(&str, u16)] = &[
            ("foo", 12182),
            ("bar", 5061),
            ("hello", 866),
            ("{user1000}.following", 3443),
            ("{user1000}.followers", 3443),
            ("foo{}{bar}", 8363),
            ("foo{{bar}}zap", 4015),
            ("foo{bar}{zap}", 5061),
            ("", 0),
            ("{}", 15257),
            ("a{b", 13340),
            ("123456789", 12739),
            ("tollgate:user:42", 354),
        ];
        for &(key, slot) in cases {
            assert_eq!(key_slot(key.as_bytes()), slot, "key {key:?}");
        }
    }
}

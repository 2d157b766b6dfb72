//! The regions' Redis keys.
//!
//! A global window's G-counter, one hash per (policy, key, window):
//!
//! ```text
//! <prefix>{<policy>:<escaped user key>}:rfw:<window µs>:<window index>
//! ```
//!
//! The hash tag is the store's own (`redis/keys.rs`), so every window of a
//! key, and every region's component in it, lives in one Cluster slot;
//! the window index in the name keeps a late merge for an old window out
//! of a newer one. The heartbeats, one hash for all regions:
//!
//! ```text
//! <prefix>{regions}:seen
//! ```

use super::super::keys::{decimal, redis_key};
use crate::Policy;

/// The G-counter of `key` under `policy` for window `index` of `window`
/// µs.
pub(super) fn window_key(
    prefix: &str,
    policy: &Policy,
    key: &[u8],
    window: u64,
    index: u64,
) -> Vec<u8> {
    let (mut w, mut i) = ([0; 20], [0; 20]);
    let suffix = [
        b"rfw:".as_slice(),
        decimal(window, &mut w),
        b":",
        decimal(index, &mut i),
    ];
    redis_key(prefix, policy, key, &suffix)
}

/// The hash of every remote region's latest heartbeat here.
pub(super) fn heartbeat_key(prefix: &str) -> Vec<u8> {
    [prefix.as_bytes(), b"{regions}:seen"].concat()
}

#[cfg(test)]
mod tests {
    use super::super::super::keys::slot;
    use super::*;
    use std::time::Duration;

    #[test]
    fn every_window_of_a_key_shares_its_slot() {
        let p = Policy::fixed_window("api", 10, Duration::from_secs(60)).unwrap();
        let a = window_key("t:", &p, b"u}1", 60_000_000, 7);
        assert_eq!(a, b"t:{api:u\\]1}:rfw:60000000:7");
        let b = window_key("t:", &p, b"u}1", 60_000_000, 8);
        assert_ne!(a, b);
        assert_eq!(slot(&a), slot(&b));
        assert_eq!(heartbeat_key("t:"), b"t:{regions}:seen");
    }
}

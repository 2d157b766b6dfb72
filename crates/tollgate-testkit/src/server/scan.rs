//! Keys left without an expiry.

use std::io;
use std::time::Duration;

use super::RedisServer;
use crate::resp::Reply;

/// Keys in database 0 of `server` that have no expiry (`PTTL` is -1), sorted.
/// Walks the keyspace with `SCAN`, so it is safe on large datasets; keys that
/// disappear during the walk are ignored. Non-UTF-8 key bytes are replaced
/// lossily.
///
/// Useful to assert that a rate limiter never leaves a key behind forever:
/// `assert!(scan_keys_without_ttl(&redis).is_empty())`.
///
/// # Panics
///
/// If the server cannot be queried within a few seconds.
pub fn scan_keys_without_ttl(server: &RedisServer) -> Vec<String> {
    try_scan_keys_without_ttl(server).unwrap_or_else(|e| {
        panic!(
            "scanning keys of redis-server on port {} failed: {e}",
            server.port()
        )
    })
}

fn try_scan_keys_without_ttl(server: &RedisServer) -> io::Result<Vec<String>> {
    let mut conn = server.conn(Duration::from_secs(5))?;
    let mut cursor = b"0".to_vec();
    let mut result = Vec::new();
    loop {
        let reply = conn.cmd(&[b"SCAN".as_slice(), &cursor, b"COUNT", b"1000"])?;
        let Reply::Array(Some(mut parts)) = reply else {
            return Err(io::Error::other(format!("unexpected SCAN reply {reply:?}")));
        };
        let (Some(Reply::Array(Some(keys))), Some(Reply::Bulk(Some(next)))) =
            (parts.pop(), parts.pop())
        else {
            return Err(io::Error::other("malformed SCAN reply"));
        };
        let keys: Vec<Vec<u8>> = keys
            .into_iter()
            .filter_map(|k| match k {
                Reply::Bulk(Some(k)) => Some(k),
                _ => None,
            })
            .collect();
        let cmds: Vec<Vec<&[u8]>> = keys.iter().map(|k| vec![b"PTTL".as_slice(), k]).collect();
        let ttls = conn.pipeline(&cmds)?;
        for (key, ttl) in keys.iter().zip(ttls) {
            if ttl == Reply::Int(-1) {
                result.push(String::from_utf8_lossy(key).into_owned());
            }
        }
        if next == b"0" {
            break;
        }
        cursor = next;
    }
    result.sort();
    result.dedup();
    Ok(result)
}

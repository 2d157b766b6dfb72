//! What the sentinels and nodes say: the master's address, `SENTINEL`
//! replies as field maps, a node's role.

use std::collections::BTreeMap;

use super::*;

/// The port a sentinel names for `name` (`SENTINEL GET-MASTER-ADDR-BY-NAME`).
pub(super) fn master_addr(sentinel: &RedisServer, name: &str) -> io::Result<u16> {
    let reply = sentinel.conn(Duration::from_secs(1))?.cmd(&[
        "SENTINEL",
        "GET-MASTER-ADDR-BY-NAME",
        name,
    ])?;
    match reply {
        Reply::Array(Some(items)) => items
            .get(1)
            .and_then(Reply::text)
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| io::Error::other("malformed master address")),
        other => Err(io::Error::other(format!("unexpected reply {other:?}"))),
    }
}

/// A flat array of field names and values, as a map.
pub(super) fn to_map(reply: &Reply) -> Option<BTreeMap<String, String>> {
    let Reply::Array(Some(items)) = reply else {
        return None;
    };
    items
        .chunks_exact(2)
        .map(|kv| Some((kv[0].text()?, kv[1].text()?)))
        .collect()
}

pub(super) fn sentinel_map(
    sentinel: &RedisServer,
    cmd: &[&str],
) -> io::Result<BTreeMap<String, String>> {
    let reply = sentinel.conn(Duration::from_secs(1))?.cmd(cmd)?;
    to_map(&reply).ok_or_else(|| io::Error::other(format!("unexpected reply {reply:?}")))
}

pub(super) fn sentinel_maps(
    sentinel: &RedisServer,
    cmd: &[&str],
) -> io::Result<Vec<BTreeMap<String, String>>> {
    match sentinel.conn(Duration::from_secs(1))?.cmd(cmd)? {
        Reply::Array(Some(items)) => items
            .iter()
            .map(|i| to_map(i).ok_or_else(|| io::Error::other(format!("unexpected item {i:?}"))))
            .collect(),
        other => Err(io::Error::other(format!("unexpected reply {other:?}"))),
    }
}

pub(super) fn is_master(node: &RedisServer) -> bool {
    node.state() == ServerState::Running && node.role().is_ok_and(|r| r == "master")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_flat_field_arrays() {
        let bulk = |s: &str| Reply::Bulk(Some(s.as_bytes().to_vec()));
        let reply = Reply::Array(Some(vec![
            bulk("ip"),
            bulk("127.0.0.1"),
            bulk("port"),
            bulk("7"),
        ]));
        let map = to_map(&reply).unwrap();
        assert_eq!(map["port"], "7");
        assert!(to_map(&Reply::Int(1)).is_none());
    }
}

//! Per-node pipelining on a Redis Cluster: busy callers' calls grouped by
//! the primary that holds their key's slot and sent to it as pipelines,
//! as `coalesce.rs` does on a standalone server.
//!
//! redis-rs's cluster connection sends each command alone, and a pipeline
//! only within one slot. So this keeps the slot map (`CLUSTER SLOTS`, read
//! at connect and again after a redirect) and one [`Coalescer`] per
//! primary, on a connection of its own to that primary (made as the seed
//! URL says, its address replaced) as a standalone server's, or, for TLS
//! seeds, through the cluster connection to the node's address. A command that a
//! node answers with a redirect, or that a node's pipeline loses (the node
//! down, a failover), is sent again alone through the cluster connection
//! (by `Script::run`, which builds it again), which follows redirects and
//! retries as it always did, and the map is read again in the background.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::{
    Cmd, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisResult, RetryMethod, Value,
};

use super::Pipelined;
use super::coalesce::{Coalescer, Sink};

/// The cluster's slots, each with the queue of the primary that holds it.
struct SlotMap {
    /// Index into `nodes` per slot (16384 of them).
    owner: Vec<u16>,
    nodes: Vec<Arc<Coalescer>>,
}

/// Busy calls grouped per primary.
pub(crate) struct NodePipelines {
    cluster: ClusterConnection,
    /// How to reach a primary on a connection of its own (the seed's
    /// settings), `None` to go through the cluster connection.
    direct: Option<(ConnectionInfo, ConnectionManagerConfig)>,
    map: RwLock<Arc<SlotMap>>,
    /// Whether a refresh of the map is under way.
    refreshing: AtomicBool,
    /// What retired queues (from maps replaced since) had sent.
    retired: std::sync::Mutex<Pipelined>,
}

const SLOTS: usize = 16384;

impl NodePipelines {
    /// The queues of `cluster`'s primaries, reached as `seed` (a URL of
    /// the cluster) says.
    pub(crate) async fn connect(
        cluster: ClusterConnection,
        seed: &str,
        config: ConnectionManagerConfig,
    ) -> RedisResult<NodePipelines> {
        let seed = seed.into_connection_info()?;
        let direct = matches!(seed.addr(), ConnectionAddr::Tcp(..)).then_some((seed, config));
        let map = read_map(&cluster, direct.as_ref()).await?;
        Ok(NodePipelines {
            cluster,
            direct,
            map: RwLock::new(Arc::new(map)),
            refreshing: AtomicBool::new(false),
            retired: std::sync::Mutex::new(Pipelined::default()),
        })
    }

    /// Sends `cmd`, whose first key is `key`, in the next pipeline to its
    /// key's primary when callers are busy, else alone.
    pub(crate) async fn query(self: &Arc<Self>, key: &[u8], cmd: Cmd) -> RedisResult<Value> {
        let node = {
            let map = self.map.read().unwrap_or_else(|e| e.into_inner());
            map.nodes[map.owner[usize::from(slot(key))] as usize].clone()
        };
        let reply = node.query(cmd).await;
        if let Err(e) = &reply
            && NodePipelines::reroutes(e)
        {
            // The caller sends it again through the cluster connection.
            self.refresh();
        }
        reply
    }

    /// Whether a command failed as one sent to a node that no longer holds
    /// its slot, or on a connection lost, would: to be sent again through
    /// the cluster connection, which follows redirects and reconnects.
    pub(crate) fn reroutes(e: &redis::RedisError) -> bool {
        !matches!(e.retry_method(), RetryMethod::NoRetry)
    }

    /// What the queues have sent, in all.
    pub(crate) fn sent(&self) -> Pipelined {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner()).clone();
        let retired = *self.retired.lock().unwrap_or_else(|e| e.into_inner());
        map.nodes.iter().fold(retired, |sum, node| {
            let sent = node.sent();
            Pipelined {
                pipelines: sum.pipelines + sent.pipelines,
                calls: sum.calls + sent.calls,
            }
        })
    }

    /// Reads the slot map again in the background, unless a read is under
    /// way.
    fn refresh(self: &Arc<Self>) {
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.refreshing.store(false, Ordering::Release);
            return;
        };
        let this = self.clone();
        runtime.spawn(async move {
            // Let the cluster settle a moment: a redirect comes in bursts.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            if let Ok(map) = read_map(&this.cluster, this.direct.as_ref()).await {
                let old = std::mem::replace(
                    &mut *this.map.write().unwrap_or_else(|e| e.into_inner()),
                    Arc::new(map),
                );
                let mut retired = this.retired.lock().unwrap_or_else(|e| e.into_inner());
                for node in &old.nodes {
                    let sent = node.sent();
                    retired.pipelines += sent.pipelines;
                    retired.calls += sent.calls;
                }
            }
            this.refreshing.store(false, Ordering::Release);
        });
    }
}

/// The slot map from `CLUSTER SLOTS`: per range, the start, the end and
/// the primary's host and port first.
async fn read_map(
    cluster: &ClusterConnection,
    direct: Option<&(ConnectionInfo, ConnectionManagerConfig)>,
) -> RedisResult<SlotMap> {
    let reply: Vec<Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(&mut cluster.clone())
        .await?;
    let mut owner = vec![u16::MAX; SLOTS];
    let mut addrs: Vec<(String, u16)> = Vec::new();
    for range in reply {
        let Value::Array(fields) = range else {
            return Err(bad_map("a range that is not an array"));
        };
        let (Some(Value::Int(start)), Some(Value::Int(end)), Some(Value::Array(primary))) =
            (fields.first(), fields.get(1), fields.get(2))
        else {
            return Err(bad_map("a range without start, end and primary"));
        };
        let (Some(host), Some(Value::Int(port))) = (primary.first(), primary.get(1)) else {
            return Err(bad_map("a primary without host and port"));
        };
        let host: String = redis::from_redis_value(host.clone())?;
        let port = u16::try_from(*port).map_err(|_| bad_map("a port out of range"))?;
        let index = match addrs.iter().position(|a| a.0 == host && a.1 == port) {
            Some(i) => i,
            None => {
                addrs.push((host, port));
                addrs.len() - 1
            }
        };
        let (start, end) = (*start as usize, *end as usize);
        if start > end || end >= SLOTS {
            return Err(bad_map("a range out of bounds"));
        }
        owner[start..=end].fill(index as u16);
    }
    if owner.contains(&u16::MAX) {
        return Err(bad_map("slots that no primary holds"));
    }
    let mut nodes = Vec::with_capacity(addrs.len());
    for (host, port) in addrs {
        let sink = match direct {
            Some((seed, config)) => {
                let info = seed.clone().set_addr(ConnectionAddr::Tcp(host, port));
                let client = redis::Client::open(info)?;
                Sink::Server(ConnectionManager::new_with_config(client, config.clone()).await?)
            }
            None => Sink::Node {
                cluster: cluster.clone(),
                host,
                port,
            },
        };
        nodes.push(Arc::new(Coalescer::to(sink)));
    }
    Ok(SlotMap { owner, nodes })
}

fn bad_map(what: &'static str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Parse, "CLUSTER SLOTS", what.to_string()))
}

/// The cluster slot of a key: CRC16 (XMODEM) of its hash tag (the text
/// between the first `{` and the next `}`, when not empty), else of the
/// whole key, modulo 16384.
pub(crate) fn slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        rest.iter()
            .position(|&b| b == b'}')
            .filter(|&close| close > 0)
            .map(|close| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) % SLOTS as u16
}

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
    use super::slot;

    #[test]
    fn slots_are_redis_cluster_slots() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        // CRC16 of "123456789" is 0x31C3, below 16384.
        assert_eq!(slot(b"123456789"), 0x31C3);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_ne!(slot(b"foo{}{bar}"), slot(b"bar"));
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
    }
}

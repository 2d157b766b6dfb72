//! Per-node pipelining on a Redis Cluster: busy callers' calls grouped by
//! the primary that holds their key's slot and sent to it as pipelines,
//! as `coalesce/` does on a standalone server.
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

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use arc_swap::ArcSwap;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisResult, Value};

use super::Pipelined;
use super::coalesce::{Coalescer, Sink, reroutes};
use super::keys::slot;

/// The cluster's slots, each with the queue of the primary that holds it.
struct SlotMap {
    /// The ranges of slots, in order and covering all 16384: each range's
    /// last slot and the index of its primary in `nodes`. A few ranges
    /// searched, rather than a table per slot: a table of 16384 owners
    /// (32 KB) missed the cache on most calls, where the ranges of a
    /// cluster take a line or two.
    ranges: Vec<(u16, u16)>,
    nodes: Vec<Arc<Coalescer>>,
}

impl SlotMap {
    /// The queue of the primary that holds `slot`.
    fn node(&self, slot: u16) -> &Arc<Coalescer> {
        let range = self.ranges.partition_point(|&(last, _)| last < slot);
        &self.nodes[usize::from(self.ranges[range].1)]
    }
}

/// Busy calls grouped per primary.
pub(crate) struct NodePipelines {
    cluster: ClusterConnection,
    /// How to reach a primary on a connection of its own (the seed's
    /// settings), `None` to go through the cluster connection.
    direct: Option<(ConnectionInfo, ConnectionManagerConfig)>,
    /// Read on every call: an `ArcSwap`, whose reads touch no counter
    /// shared between threads (a lock's or an `Arc`'s would have the
    /// threads take turns at one cache line on every call).
    map: ArcSwap<SlotMap>,
    /// Commands in flight to every primary: the queues decide together
    /// whether callers are busy (see [`Coalescer::submit`]).
    in_flight: Arc<AtomicUsize>,
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
        let in_flight = Arc::new(AtomicUsize::new(0));
        let map = read_map(&cluster, direct.as_ref(), &in_flight).await?;
        Ok(NodePipelines {
            cluster,
            direct,
            map: ArcSwap::from_pointee(map),
            in_flight,
            refreshing: AtomicBool::new(false),
            retired: std::sync::Mutex::new(Pipelined::default()),
        })
    }

    /// Sends `cmd`, whose first key is `key`, in the next pipeline to its
    /// key's primary when callers are busy, else alone.
    pub(crate) async fn query(self: &Arc<Self>, key: &[u8], cmd: Cmd) -> RedisResult<Value> {
        // Queued (or handed back to leave alone) while the map is held, so
        // that a queued call takes no reference of its own to its queue.
        let submitted = self.map.load().node(slot(key)).submit(cmd);
        let reply = submitted.reply().await;
        if let Err(e) = &reply
            && reroutes(e)
        {
            // The caller sends it again through the cluster connection.
            self.refresh();
        }
        reply
    }

    /// What the queues have sent, in all.
    pub(crate) fn sent(&self) -> Pipelined {
        let map = self.map.load_full();
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
            if let Ok(map) = read_map(&this.cluster, this.direct.as_ref(), &this.in_flight).await {
                let old = this.map.swap(Arc::new(map));
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
    in_flight: &Arc<AtomicUsize>,
) -> RedisResult<SlotMap> {
    let reply: Vec<Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(&mut cluster.clone())
        .await?;
    let mut ranges = Vec::new();
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
        if !(0..=*end).contains(start) || *end >= SLOTS as i64 {
            return Err(bad_map("a range out of bounds"));
        }
        ranges.push((*start as u16, *end as u16, index as u16));
    }
    let ranges = slot_ranges(ranges)?;
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
        nodes.push(Arc::new(Coalescer::to(sink, in_flight.clone())));
    }
    Ok(SlotMap { ranges, nodes })
}

/// `CLUSTER SLOTS`' ranges (first slot, last slot, primary) as the map
/// keeps them: in order, each as its last slot and primary, neighbours of
/// one primary merged; an error unless they cover every slot once.
fn slot_ranges(mut ranges: Vec<(u16, u16, u16)>) -> RedisResult<Vec<(u16, u16)>> {
    ranges.sort_unstable();
    let mut out: Vec<(u16, u16)> = Vec::with_capacity(ranges.len());
    let mut next = 0u16;
    for (first, last, node) in ranges {
        if first != next {
            return Err(bad_map(if first < next {
                "ranges that overlap"
            } else {
                "slots that no primary holds"
            }));
        }
        match out.last_mut() {
            Some(previous) if previous.1 == node => previous.0 = last,
            _ => out.push((last, node)),
        }
        next = last + 1;
    }
    if usize::from(next) != SLOTS {
        return Err(bad_map("slots that no primary holds"));
    }
    Ok(out)
}

fn bad_map(what: &'static str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Parse, "CLUSTER SLOTS", what.to_string()))
}

#[cfg(test)]
mod tests {
    use super::slot_ranges;

    #[test]
    fn slot_ranges_cover_every_slot_once() {
        // Out of order, a primary's two neighbouring ranges merged.
        let map = slot_ranges(vec![(10923, 16383, 2), (0, 5460, 0), (5461, 10922, 0)]).unwrap();
        assert_eq!(map, vec![(10922, 0), (16383, 2)]);
        let owner = |slot: u16| map[map.partition_point(|&(last, _)| last < slot)].1;
        assert_eq!(
            (owner(0), owner(10922), owner(10923), owner(16383)),
            (0, 0, 2, 2)
        );
        for bad in [
            vec![(0, 5460, 0), (5462, 16383, 1)],
            vec![(0, 5460, 0), (5460, 16383, 1)],
            vec![(0, 16382, 0)],
            vec![(1, 16383, 0)],
        ] {
            assert!(slot_ranges(bad.clone()).is_err(), "{bad:?}");
        }
    }
}

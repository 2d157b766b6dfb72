//! ERL's counters on Redis: for each key, `INCRBY key hits` then
//! `EXPIRE key window` (`src/redis/fixed_cache_impl.go`), the whole call in
//! one pipeline on a single server or the master Redis Sentinel names
//! (found, and followed after a failover, by the library's
//! [`SentinelMaster`]). A cluster gets one pipeline per key, sent together
//! (the two commands of a key share its slot). No script, so
//! an ERL instance counting on the same keys at the same time adds up with
//! tollgate exactly.

use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;
use tollgate::store::redis::SentinelMaster;

use super::counter::{Counter, Counts, Hit};
use super::redis_env::RedisTarget;

/// How long finding the master through the sentinels, and each connection
/// attempt to it, may take.
const SENTINEL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// A connection to the Redis ERL counts in.
#[derive(Clone)]
pub(crate) enum RedisCounter {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
    Sentinel(SentinelMaster),
}

impl std::fmt::Debug for RedisCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RedisCounter::Single(_) => "RedisCounter::Single",
            RedisCounter::Cluster(_) => "RedisCounter::Cluster",
            RedisCounter::Sentinel(_) => "RedisCounter::Sentinel",
        })
    }
}

impl RedisCounter {
    /// Connects to one server (one URL, or one `redis+sentinel://` URL),
    /// a cluster (its seed URLs) or the master the sentinels name.
    pub(crate) async fn connect(target: &RedisTarget) -> Result<RedisCounter, String> {
        match target {
            RedisTarget::Sentinel {
                master_name,
                sentinels,
                user,
                password,
            } => SentinelMaster::connect(
                sentinels,
                master_name,
                user.as_deref(),
                password.as_deref(),
                SENTINEL_TIMEOUT,
            )
            .await
            .map(RedisCounter::Sentinel)
            .map_err(|e| e.to_string()),
            RedisTarget::Urls(urls) => match urls.as_slice() {
                [] => Err("no Redis URL".to_string()),
                [url] if url.to_ascii_lowercase().contains("+sentinel://") => {
                    SentinelMaster::connect_url(url, SENTINEL_TIMEOUT)
                        .await
                        .map(RedisCounter::Sentinel)
                        .map_err(|e| e.to_string())
                }
                [url] => {
                    let client = redis::Client::open(url.as_str()).map_err(|e| e.to_string())?;
                    let conn = ConnectionManager::new(client)
                        .await
                        .map_err(|e| e.to_string())?;
                    Ok(RedisCounter::Single(conn))
                }
                seeds => {
                    let client = redis::cluster::ClusterClient::new(seeds.to_vec())
                        .map_err(|e| e.to_string())?;
                    let conn = client
                        .get_async_connection()
                        .await
                        .map_err(|e| e.to_string())?;
                    Ok(RedisCounter::Cluster(conn))
                }
            },
        }
    }
}

fn append(pipe: &mut redis::Pipeline, hit: &Hit<'_>) {
    pipe.cmd("INCRBY").arg(hit.key).arg(hit.hits);
    pipe.cmd("EXPIRE")
        .arg(hit.key)
        .arg(hit.expire_seconds)
        .ignore();
}

/// The whole call's commands, in one pipeline.
fn pipeline(hits: &[Hit<'_>]) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    for hit in hits {
        append(&mut pipe, hit);
    }
    pipe
}

impl Counter for RedisCounter {
    fn count<'a>(&'a self, hits: &'a [Hit<'a>]) -> Counts<'a> {
        Box::pin(async move {
            if hits.is_empty() {
                return Ok(Vec::new());
            }
            match self {
                RedisCounter::Single(conn) => {
                    let mut conn = conn.clone();
                    pipeline(hits)
                        .query_async(&mut conn)
                        .await
                        .map_err(|e| e.to_string())
                }
                RedisCounter::Sentinel(master) => master
                    .query(&pipeline(hits))
                    .await
                    .map_err(|e| e.to_string()),
                RedisCounter::Cluster(conn) => {
                    let calls = hits.iter().map(|hit| {
                        let mut conn = conn.clone();
                        async move {
                            let mut pipe = redis::pipe();
                            append(&mut pipe, hit);
                            let (count,): (u64,) = pipe
                                .query_async(&mut conn)
                                .await
                                .map_err(|e| e.to_string())?;
                            Ok::<u64, String>(count)
                        }
                    });
                    futures_util::future::try_join_all(calls).await
                }
            }
        })
    }
}

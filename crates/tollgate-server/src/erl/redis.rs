//! ERL's counters on Redis: for each key, `INCRBY key hits` then
//! `EXPIRE key window` (`src/redis/fixed_cache_impl.go`), the whole call in
//! one pipeline on a single server. A cluster gets one pipeline per key,
//! sent together (the two commands of a key share its slot). No script, so
//! an ERL instance counting on the same keys at the same time adds up with
//! tollgate exactly.

use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;

use super::counter::{Counter, Counts, Hit};

/// A connection to the Redis ERL counts in.
#[derive(Clone)]
pub(crate) enum RedisCounter {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl std::fmt::Debug for RedisCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RedisCounter::Single(_) => "RedisCounter::Single",
            RedisCounter::Cluster(_) => "RedisCounter::Cluster",
        })
    }
}

impl RedisCounter {
    /// Connects to one server (one URL) or a cluster (its seed URLs).
    pub(crate) async fn connect(urls: &[String]) -> Result<RedisCounter, String> {
        match urls {
            [] => Err("no Redis URL".to_string()),
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

impl Counter for RedisCounter {
    fn count<'a>(&'a self, hits: &'a [Hit<'a>]) -> Counts<'a> {
        Box::pin(async move {
            if hits.is_empty() {
                return Ok(Vec::new());
            }
            match self {
                RedisCounter::Single(conn) => {
                    let mut pipe = redis::pipe();
                    for hit in hits {
                        append(&mut pipe, hit);
                    }
                    let mut conn = conn.clone();
                    pipe.query_async(&mut conn).await.map_err(|e| e.to_string())
                }
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

//! The Redis store against real servers that this binary starts, one
//! concern per module: the same decisions as memory on random traffic
//! (`differential`), bounds under contention (`contention`), script cache
//! flushes (`script_flush`), pipelines (`pipelining`), the server-clock
//! forms (`server_window`, `bucket_expiry`), bad input that never reaches
//! Redis (`bad_input`), hash tags that keep a user key's braces from moving
//! it to another slot (`hash_tags`), client clocks (`client_time`),
//! usage (`usage`), a held take's exact refund on the server's clock
//! (`held`) and calendar windows (`calendar`). Every key written has a TTL.
#![cfg(feature = "redis")]

mod bad_input;
mod bucket_expiry;
mod calendar;
mod client_time;
mod contention;
mod differential;
mod hash_tags;
mod held;
mod pipelining;
mod script_flush;
mod server_window;
mod usage;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proptest::prelude::*;
use tollgate::algorithm::LeaseId;
use tollgate::store::redis::{RedisStore, TimeSource};
use tollgate::store::{Request, Store};
use tollgate::{Decision, ManualClock, MemoryStore, Policy, Usage};
use tollgate_testkit::{RedisCluster, RedisServer, key_slot};

fn standalone() -> &'static RedisServer {
    static SERVER: OnceLock<RedisServer> = OnceLock::new();
    SERVER.get_or_init(RedisServer::start)
}

fn cluster() -> &'static RedisCluster {
    static CLUSTER: OnceLock<RedisCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| RedisCluster::start(3, 1))
}

#[derive(Clone, Copy, Debug)]
enum Deployment {
    Standalone,
    Cluster,
}

impl Deployment {
    fn urls(self) -> Vec<String> {
        match self {
            Deployment::Standalone => vec![standalone().url()],
            Deployment::Cluster => cluster().seed_urls(),
        }
    }

    /// Every key of every node has an expiry: scripts write a key and its
    /// TTL in one call, so this holds at any moment, not only at the end.
    fn assert_every_key_expires(self) {
        let missing = match self {
            Deployment::Standalone => tollgate_testkit::scan_keys_without_ttl(standalone()),
            Deployment::Cluster => cluster().scan_keys_without_ttl(),
        };
        assert!(missing.is_empty(), "keys without a TTL: {missing:?}");
    }
}

fn fresh_prefix(tag: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("t{}-{tag}:", NEXT.fetch_add(1, Ordering::Relaxed))
}

async fn connect(urls: Vec<String>, time: TimeSource, tag: &str) -> RedisStore {
    RedisStore::builder(urls)
        .prefix(fresh_prefix(tag))
        .time_source(time)
        .connect()
        .await
        .expect("connect to the test server")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// One call of a server-clock form's script, pipelined between two `TIME`s
/// and followed by `PEXPIRETIME` of its key, so that the server's time at
/// the call is known within a round trip: the time before (s, µs), the
/// reply, the key's expiry (ms; -2 once gone) and the time after.
async fn bracketed_call(
    conn: &mut redis::aio::MultiplexedConnection,
    sha: &str,
    key: &[u8],
    args: &[String],
) -> ((u64, u64), i64, i64, (u64, u64)) {
    let mut pipe = redis::pipe();
    pipe.cmd("TIME")
        .cmd("EVALSHA")
        .arg(sha)
        .arg(1)
        .arg(key)
        .arg(args);
    pipe.cmd("PEXPIRETIME").arg(key).cmd("TIME");
    pipe.query_async(conn).await.unwrap()
}

/// One request of `cost` per policy, all on the key `k`: an atomic batch.
fn requests_on_k<'a, const N: usize>(policies: [&'a Policy; N], cost: u64) -> [Request<'a>; N] {
    policies.map(|policy| Request {
        policy,
        key: b"k",
        cost,
    })
}

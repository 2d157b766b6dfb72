#![doc = include_str!("../../docs/redis.md")]

// The files here, one concept each:
// - connecting: `builder.rs` (configure and connect), `connection.rs` (a
//   standalone server, a cluster, or a Sentinel's master), `sentinel/`
//   (the master Redis Sentinel names, followed after a failover;
//   `SentinelMaster` that connection for commands of one's own),
//   `error.rs` (Redis errors as the crate's);
// - sending: `coalesce/` (pipelining busy callers on a standalone server:
//   `mod.rs` the queue and its flush, `pipeline.rs` a flush's pipelines,
//   `sink.rs` where they go and a cluster primary's bounded flushes,
//   `group.rs` window checks with a deadline as one group call), `nodes.rs`
//   (the same per primary of a cluster), `scripts.rs` (every script, running
//   one, NOSCRIPT), `texts.rs` (the scripts' texts, from `lua/`, each headed by
//   its contract), `pack.rs` (numbers to and from the scripts), `reply.rs`
//   (a script's reply as a decision), `clock.rs` (the time source, our
//   estimate of the server's clock and the deadlines);
// - the state: `keys.rs` (the Redis key of a (policy, key) pair), `form.rs`
//   (how a policy's state is kept: its algorithm's script or a server-clock
//   form), `algorithm.rs` (the table of each algorithm's Redis side, the
//   trait `Redis` with a row per algorithm: key tag, scripts, numbers,
//   its bucket form, whether it may be global), `server_window.rs` / `bucket_expiry.rs` (the two
//   server-clock forms);
// - the operations: `store.rs` (the [`Store`](super::Store) impl, on valid
//   input), `decide.rs` (one decision), `lease.rs` (concurrency leases),
//   `batch.rs` (atomic batches), `cross_slot.rs` (atomic batches across
//   cluster slots, by refunds), `usage.rs` (charge, refund, check_at_most),
//   `held.rs` (a held take's stamp and its exact refund);
// - beside the store: `overrides.rs` (overrides shared through Redis),
//   `regions/` (one limit across regions: the regional store and its
//   replicator).

mod algorithm;
mod batch;
mod bucket_expiry;
mod builder;
mod clock;
mod coalesce;
mod connection;
mod cross_slot;
mod decide;
mod error;
mod form;
mod held;
pub mod keys;
mod lease;
mod nodes;
mod overrides;
mod pack;
pub mod regions;
mod reply;
mod scripts;
mod sentinel;
mod server_window;
mod store;
mod texts;
mod usage;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64};

pub use self::builder::RedisStoreBuilder;
pub use self::clock::TimeSource;
use self::connection::Connection;
use self::error::store_error;
pub use self::overrides::RedisOverrides;
use self::scripts::Scripts;
pub use self::sentinel::SentinelMaster;
use crate::{MonotonicClock, Result};

/// A [`Store`](super::Store) on Redis or Redis Cluster.
///
/// One multiplexed connection is shared by every clone and every caller, so
/// concurrent decisions pipeline on one socket. Each decision is one
/// EVALSHA of its algorithm's script on the one Redis key that holds the
/// whole state of that (policy, key) pair; every key written gets its expiry
/// in the same script.
#[derive(Debug, Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    conn: Connection,
    prefix: String,
    time: TimeSource,
    scripts: Scripts,
    /// Per decision, in µs; with server time, scripts that run later than
    /// this after the call write nothing.
    deadline: Option<u64>,
    /// Our clock, against which the server's is measured: the wall clock
    /// advanced by the CPU's counter, a few ns a read (twice a call for a
    /// server-clock fixed window) where the system's costs tens; its drift
    /// from the wall clock is measured away with the offset, every 30 s.
    clock: MonotonicClock,
    /// The server's clock minus ours, in µs, as last measured (with server
    /// time only).
    offset: AtomicI64,
    /// How far that measurement can be off: half its round trip, in µs.
    offset_error: AtomicU64,
    /// When (our clock, µs) the offset was last measured or a measurement
    /// started, so that only one runs at a time.
    offset_at: AtomicU64,
    /// [`RedisStore::master_switches`] when the offset was last measured:
    /// a new master's clock is measured anew.
    offset_master: AtomicU64,
    /// Whether buckets take their server-clock form: asked for (the
    /// default), and the server has `PEXPIRETIME` (Redis 7.0), probed at
    /// connect.
    bucket_expiry_form: bool,
    /// Refunds made by denied atomic batches across cluster slots.
    refunds: AtomicU64,
}

/// What a store's pipelining has sent (see [`RedisStore::pipelined`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Pipelined {
    /// Pipelines sent.
    pub pipelines: u64,
    /// Script calls they carried in all (calls sent alone are not counted).
    pub calls: u64,
}

impl RedisStore {
    /// Whether this store talks to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        self.inner.conn.is_cluster()
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// How many times scripts were (re)loaded, connect included.
    pub fn script_loads(&self) -> u64 {
        self.inner.scripts.all().iter().map(|s| s.loads()).sum()
    }

    /// What the queue that pipelines concurrent calls (see
    /// [`RedisStoreBuilder::pipelining`]) has sent (on a cluster, every
    /// primary's queue); zeros with pipelining off.
    pub fn pipelined(&self) -> Pipelined {
        match &self.inner.conn {
            Connection::Single(_, Some(queue)) => queue.sent(),
            Connection::Cluster(_, Some(nodes)) => nodes.sent(),
            Connection::Sentinel(s) => s
                .master()
                .queue
                .as_ref()
                .map(|q| q.sent())
                .unwrap_or_default(),
            _ => Pipelined::default(),
        }
    }

    /// How many times this store followed the master Redis Sentinel names
    /// to a new node (0 without Sentinel).
    pub fn master_switches(&self) -> u64 {
        match &self.inner.conn {
            Connection::Sentinel(s) => s.switches(),
            _ => 0,
        }
    }

    /// Loads every script (on every node of a cluster). Done on connect;
    /// after a restart or a failover scripts reload themselves on NOSCRIPT.
    pub async fn load_scripts(&self) -> Result<()> {
        for script in self.inner.scripts.all() {
            script
                .load(&self.inner.conn)
                .await
                .map_err(|e| store_error(&e))?;
        }
        Ok(())
    }
}

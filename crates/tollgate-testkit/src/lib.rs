//! Test harness for tollgate's integration tests: real `redis-server`
//! processes, owned by the test that started them, plus fault injection.
//!
//! * [`RedisServer`] — a standalone server on a free `127.0.0.1` port with its
//!   own temp directory; `kill9`, `stop` (SIGSTOP), `cont` (SIGCONT),
//!   `restart` on the same port, and `cli` to run any `redis-cli` command.
//! * [`RedisCluster`] — a Redis Cluster of such servers, with replicas,
//!   topology queries (`primary_for_slot`, `replicas_of`) and `failover`.
//! * [`RedisSentinel`] — a master, its replicas and three `redis-sentinel`
//!   processes watching them, with `kill_master`, `failover` (`SENTINEL
//!   FAILOVER`) and `wait_for_failover`.
//! * [`TcpProxy`] — a TCP proxy between a client and a server whose link
//!   can flap (drop every connection, then pass them, every `period`), be
//!   cut until healed (a partition), or hold every byte for a delay each
//!   way (a link between regions).
//! * [`key_slot`] — the cluster hash slot of a key (CRC16 with hash tags).
//! * [`scan_keys_without_ttl`] — keys that would live forever.
//! * [`SLACK`] and [`PATIENCE`] — the one allowance added to a latency
//!   bound, and how long to poll for an expected event.
//! * [`record_metrics`] and [`counter_total`] — one `metrics` recorder for
//!   a test binary, and the counters it saw.
//!
//! Servers never use port 6379 and never talk to a server they did not start:
//! startup checks that the process answering on the port is the one just
//! spawned (`INFO server` → `process_id`) and retries on a fresh port when
//! another test grabbed the port first. Everything is cleaned up on drop,
//! including when a test panics.
//!
//! Needs `redis-server`, `redis-cli` and (for [`RedisSentinel`])
//! `redis-sentinel` on `PATH` (or set `TOLLGATE_REDIS_SERVER` /
//! `TOLLGATE_REDIS_CLI` / `TOLLGATE_REDIS_SENTINEL`); without them every
//! constructor panics with a hint to run the README's test command, which
//! installs them.

mod cluster;
mod metrics;
mod patience;
mod proxy;
mod resp;
mod sentinel;
mod server;
mod slot;
mod util;

pub use cluster::{ClusterBuilder, DEFAULT_NODE_TIMEOUT, FailoverMode, RedisCluster};
pub use metrics::{counter_total, record_metrics};
pub use patience::{PATIENCE, SLACK};
pub use proxy::TcpProxy;
pub use sentinel::{DEFAULT_DOWN_AFTER, DEFAULT_MASTER_NAME, RedisSentinel, SentinelBuilder};
pub use server::{CLI_TIMEOUT, RedisServer, STARTUP_TIMEOUT, ServerState, scan_keys_without_ttl};
pub use slot::{SLOT_COUNT, key_slot};
pub use util::free_port;

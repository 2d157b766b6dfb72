//! Redis Sentinel: a master, its replicas and the `redis-sentinel`
//! processes that watch them, every one a [`RedisServer`] of its own.

use std::fmt;
use std::io;
use std::time::{Duration, Instant};

use crate::resp::Reply;
use crate::server::{Program, RedisServer, ServerState};
use crate::util;

/// Default `sentinel down-after-milliseconds` of a [`RedisSentinel`]: how
/// long the master must be silent before a sentinel thinks it down. Two
/// seconds, not one: on a busy 2-core machine a healthy master can miss a
/// second of pings, and the sentinels then fail it over in the middle of a
/// test that did not ask for it.
pub const DEFAULT_DOWN_AFTER: Duration = Duration::from_millis(2000);

/// `sentinel failover-timeout`: how long a failover may take before the
/// sentinels give it up (and may try again).
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(10);

/// The master name a [`RedisSentinel`] monitors unless told otherwise.
pub const DEFAULT_MASTER_NAME: &str = "mymaster";

mod builder;
mod failover;
mod query;

pub use self::builder::SentinelBuilder;
use self::query::{is_master, master_addr};

/// A master, its replicas and the sentinels that watch them: real
/// `redis-server` and `redis-sentinel` processes on loopback ports, each a
/// [`RedisServer`] with its own directory, so that any of them can be
/// killed, frozen or restarted.
///
/// Roles change on a failover, so [`RedisSentinel::master`] and
/// [`RedisSentinel::replicas`] ask the sentinels and the nodes each time.
/// Dropping it kills every process.
///
/// ```no_run
/// use tollgate_testkit::RedisSentinel;
///
/// let topology = RedisSentinel::start(); // 1 master, 1 replica, 3 sentinels
/// let old = topology.kill_master();
/// let new = topology.wait_for_failover(old);
/// assert_ne!(old.port(), new.port());
/// old.restart(); // the sentinels make it a replica of the new master
/// topology.wait_until_stable();
/// let again = topology.failover(); // SENTINEL FAILOVER: needs a replica
/// # let _ = again;
/// ```
pub struct RedisSentinel {
    master_name: String,
    password: Option<String>,
    /// The master and its replicas, in start order (the first was the
    /// master at start).
    nodes: Vec<RedisServer>,
    sentinels: Vec<RedisServer>,
    down_after: Duration,
}

impl RedisSentinel {
    /// One master, one replica and three sentinels (quorum 2), down after
    /// [`DEFAULT_DOWN_AFTER`]; waits until the topology is settled.
    ///
    /// # Panics
    ///
    /// As [`SentinelBuilder::start`].
    pub fn start() -> RedisSentinel {
        Self::builder().start()
    }

    /// A builder for a topology with other options.
    pub fn builder() -> SentinelBuilder {
        SentinelBuilder {
            replicas: 1,
            sentinels: 3,
            down_after: DEFAULT_DOWN_AFTER,
            master_name: DEFAULT_MASTER_NAME.to_owned(),
            password: None,
        }
    }

    /// The name the sentinels know the master by.
    pub fn master_name(&self) -> &str {
        &self.master_name
    }

    /// The master and its replicas (roles are not implied by the order).
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The `redis-sentinel` processes.
    pub fn sentinels(&self) -> &[RedisServer] {
        &self.sentinels
    }

    /// `sentinel down-after-milliseconds`.
    pub fn down_after(&self) -> Duration {
        self.down_after
    }

    /// Every sentinel's URL, `redis://127.0.0.1:PORT/`.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// The whole topology as one `redis+sentinel://` URL: every sentinel,
    /// then the master name (and the master's password, if it has one).
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| s.addr().to_string())
            .collect();
        let auth = self
            .password
            .as_ref()
            .map_or_else(String::new, |p| format!(":{p}@"));
        format!(
            "redis+sentinel://{auth}{}/{}",
            hosts.join(","),
            self.master_name
        )
    }

    /// The node the sentinels name as master now, once it also says so
    /// itself (`ROLE`).
    ///
    /// # Panics
    ///
    /// If no running sentinel names a running master within 10 s.
    pub fn master(&self) -> &RedisServer {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(node) = self.named_master().filter(|n| is_master(n)) {
                return node;
            }
            assert!(
                Instant::now() < deadline,
                "no sentinel names a running master {:?}",
                self.master_name
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The running nodes that are replicas now.
    pub fn replicas(&self) -> Vec<&RedisServer> {
        self.nodes
            .iter()
            .filter(|n| n.state() == ServerState::Running)
            .filter(|n| n.role().is_ok_and(|r| r == "slave"))
            .collect()
    }

    fn running_sentinels(&self) -> impl Iterator<Item = &RedisServer> {
        self.sentinels
            .iter()
            .filter(|s| s.state() == ServerState::Running)
    }

    /// The node the first running sentinel that answers names as master.
    fn named_master(&self) -> Option<&RedisServer> {
        let port = self
            .running_sentinels()
            .find_map(|s| master_addr(s, &self.master_name).ok())?;
        self.nodes.iter().find(|n| n.port() == port)
    }

    /// The end of every process's log, for failure messages.
    fn logs(&self) -> String {
        self.sentinels
            .iter()
            .chain(&self.nodes)
            .map(|n| format!("log of port {}:\n{}\n", n.port(), n.log_tail(12)))
            .collect()
    }
}

impl fmt::Debug for RedisSentinel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSentinel")
            .field("master_name", &self.master_name)
            .field("nodes", &self.nodes)
            .field("sentinels", &self.sentinels)
            .field("down_after", &self.down_after)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole cycle on real processes: discovery, a kill -9 failover, a
    /// `SENTINEL FAILOVER` back to the old master once restarted.
    #[test]
    fn fails_over_when_the_master_dies_and_on_demand() {
        let topology = RedisSentinel::start();
        let first = topology.master();
        assert_eq!(topology.replicas().len(), 1);
        first.cli(&["SET", "k", "v"]);
        let old = topology.kill_master();
        let second = topology.wait_for_failover(old);
        assert_ne!(second.port(), first.port());
        assert_eq!(second.cli(&["GET", "k"]), "v", "the replica had the write");
        // Back as a replica of the new master, then promoted on demand.
        old.restart();
        topology.wait_until_stable();
        let third = topology.failover();
        assert_eq!(third.port(), first.port());
        topology.wait_until_stable();
        assert_eq!(topology.replicas()[0].port(), second.port());
    }
}

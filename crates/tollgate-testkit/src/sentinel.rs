//! Redis Sentinel: a master, its replicas and the `redis-sentinel`
//! processes that watch them, every one a [`RedisServer`] of its own.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::time::{Duration, Instant};

use crate::resp::Reply;
use crate::server::{Program, RedisServer, ServerState};
use crate::util;

/// Default `sentinel down-after-milliseconds` of a [`RedisSentinel`]: how
/// long the master must be silent before a sentinel thinks it down.
pub const DEFAULT_DOWN_AFTER: Duration = Duration::from_millis(1000);

/// `sentinel failover-timeout`: how long a failover may take before the
/// sentinels give it up (and may try again).
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(10);

/// The master name a [`RedisSentinel`] monitors unless told otherwise.
pub const DEFAULT_MASTER_NAME: &str = "mymaster";

/// Options for [`RedisSentinel`]; create with [`RedisSentinel::builder`].
#[derive(Debug, Clone)]
pub struct SentinelBuilder {
    replicas: usize,
    sentinels: usize,
    down_after: Duration,
    master_name: String,
    password: Option<String>,
}

impl SentinelBuilder {
    /// How many replicas the master has (default 1).
    pub fn replicas(mut self, replicas: usize) -> Self {
        self.replicas = replicas;
        self
    }

    /// How many `redis-sentinel` processes watch it (default 3; the quorum
    /// is a majority of them).
    pub fn sentinels(mut self, sentinels: usize) -> Self {
        self.sentinels = sentinels;
        self
    }

    /// `sentinel down-after-milliseconds` (default [`DEFAULT_DOWN_AFTER`]).
    pub fn down_after(mut self, down_after: Duration) -> Self {
        self.down_after = down_after;
        self
    }

    /// The name the sentinels know the master by (default
    /// [`DEFAULT_MASTER_NAME`]).
    pub fn master_name(mut self, name: &str) -> Self {
        self.master_name = name.to_owned();
        self
    }

    /// Makes the master and its replicas require `password`
    /// (`requirepass`, and `masterauth` for replication); the sentinels
    /// know it (`sentinel auth-pass`) and need none themselves.
    pub fn password(mut self, password: &str) -> Self {
        self.password = Some(password.to_owned());
        self
    }

    /// Starts the master, its replicas (waiting for their replication
    /// links), then the sentinels, and waits until every sentinel knows
    /// the master, its replicas and the other sentinels.
    ///
    /// # Panics
    ///
    /// If no sentinel is asked for, a process does not start, or the
    /// topology does not settle in time.
    pub fn start(self) -> RedisSentinel {
        assert!(self.sentinels >= 1, "at least one sentinel is needed");
        let mut data_args: Vec<String> = ["--repl-diskless-sync-delay", "0"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        if let Some(password) = &self.password {
            data_args.extend([
                "--requirepass".to_owned(),
                password.clone(),
                "--masterauth".to_owned(),
                password.clone(),
            ]);
        }
        let master = RedisServer::launch("sentinel-data", data_args.clone(), &mut || {
            (util::free_port(), Vec::new())
        });
        let mut nodes = vec![master];
        for _ in 0..self.replicas {
            let mut args = data_args.clone();
            args.extend([
                "--replicaof".to_owned(),
                "127.0.0.1".to_owned(),
                nodes[0].port().to_string(),
            ]);
            nodes.push(RedisServer::launch("sentinel-data", args, &mut || {
                (util::free_port(), Vec::new())
            }));
        }
        let quorum = self.sentinels / 2 + 1;
        let name = &self.master_name;
        let mut config = format!(
            "sentinel monitor {name} 127.0.0.1 {} {quorum}\n\
             sentinel down-after-milliseconds {name} {}\n\
             sentinel failover-timeout {name} {}\n\
             sentinel parallel-syncs {name} 1\n",
            nodes[0].port(),
            self.down_after.as_millis().max(1),
            FAILOVER_TIMEOUT.as_millis(),
        );
        if let Some(password) = &self.password {
            config.push_str(&format!("sentinel auth-pass {name} {password}\n"));
        }
        let sentinels = (0..self.sentinels)
            .map(|_| {
                RedisServer::launch_program(
                    "sentinel",
                    Program::Sentinel(config.clone()),
                    Vec::new(),
                    &mut || (util::free_port(), Vec::new()),
                )
            })
            .collect();
        let topology = RedisSentinel {
            master_name: self.master_name,
            password: self.password,
            nodes,
            sentinels,
            down_after: self.down_after,
        };
        topology.wait_until_stable();
        topology
    }
}

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

    /// Kills the current master with SIGKILL and returns it; the sentinels
    /// promote a replica after [`RedisSentinel::down_after`] and an
    /// election (see [`RedisSentinel::wait_for_failover`]).
    pub fn kill_master(&self) -> &RedisServer {
        let master = self.master();
        master.kill9();
        master
    }

    /// Runs `SENTINEL FAILOVER` (a failover without waiting for the
    /// master to be down, the old master turned into a replica) and waits
    /// until it is done; returns the new master.
    ///
    /// # Panics
    ///
    /// If no sentinel accepts the command, or the failover does not
    /// complete in time.
    pub fn failover(&self) -> &RedisServer {
        let old = self.master();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let reply = self
                .running_sentinels()
                .find_map(|s| {
                    s.conn(Duration::from_secs(2))
                        .and_then(|mut c| c.cmd(&["SENTINEL", "FAILOVER", &self.master_name]))
                        .ok()
                })
                .unwrap_or_else(|| Reply::Error("no sentinel answered".into()));
            assert!(
                Instant::now() < deadline,
                "SENTINEL FAILOVER {} did not complete (last reply {reply:?}); {}",
                self.master_name,
                self.logs()
            );
            if reply == Reply::Status("OK".into()) {
                // A failover the sentinels abort (the replica did not
                // report its promotion within the failover timeout, as on
                // a busy machine) is asked for again.
                let retry_at = Instant::now() + FAILOVER_TIMEOUT + Duration::from_secs(2);
                while Instant::now() < retry_at {
                    if self.named_master().is_some_and(|m| m.port() != old.port()) {
                        return self.wait_for_failover(old);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            } else {
                // INPROG, or NOGOODSLAVE while a replica is being learnt.
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }

    /// Waits until every running sentinel names the same master, other
    /// than `old`, and that node says it is master; returns it. The rest
    /// of the topology may still be settling: a reachable old master
    /// keeps answering as a master until the sentinels turn it into a
    /// replica, some 10 s later (call [`RedisSentinel::wait_until_stable`]
    /// before the next failover).
    ///
    /// # Panics
    ///
    /// If that does not happen within 30 s plus ten times the down-after
    /// time.
    pub fn wait_for_failover(&self, old: &RedisServer) -> &RedisServer {
        let deadline = Instant::now() + Duration::from_secs(30) + self.down_after * 10;
        loop {
            let named: Vec<Option<u16>> = self
                .running_sentinels()
                .map(|s| master_addr(s, &self.master_name).ok())
                .collect();
            if let Some(Some(port)) = named.first()
                && *port != old.port()
                && named.iter().all(|p| *p == Some(*port))
                && let Some(new) = self.nodes.iter().find(|n| n.port() == *port)
                && is_master(new)
            {
                return new;
            }
            assert!(
                Instant::now() < deadline,
                "the sentinels did not promote a replica of port {} (they name {named:?}); {}",
                old.port(),
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the topology is settled, and panics with what is not
    /// after 30 s plus ten times the down-after time. Settled means: every
    /// running sentinel names the same master, which is running and says it
    /// is master, and flags it neither subjectively nor objectively down;
    /// every other running node replicates it with its link up and is
    /// known to every running sentinel as a replica that is not down; and
    /// when all sentinels run, each knows all the others.
    pub fn wait_until_stable(&self) {
        let deadline = Instant::now() + Duration::from_secs(30) + self.down_after * 10;
        loop {
            let Some(problem) = self.stability_problem() else {
                return;
            };
            assert!(
                Instant::now() < deadline,
                "the Sentinel topology did not settle: {problem}; {}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
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

    fn stability_problem(&self) -> Option<String> {
        let name = &self.master_name;
        let mut named = None;
        for sentinel in self.running_sentinels() {
            let port = sentinel.port();
            let master = match sentinel_map(sentinel, &["SENTINEL", "MASTER", name]) {
                Ok(m) => m,
                Err(e) => return Some(format!("sentinel {port}: SENTINEL MASTER: {e}")),
            };
            let flags = master.get("flags").map_or("", String::as_str);
            if flags != "master" {
                return Some(format!("sentinel {port} flags the master {flags:?}"));
            }
            let master_port: Option<u16> = master.get("port").and_then(|p| p.parse().ok());
            match named {
                None => named = master_port,
                Some(p) if Some(p) != master_port => {
                    return Some(format!(
                        "sentinels disagree on the master: {p} and {master_port:?}"
                    ));
                }
                Some(_) => {}
            }
            let others = master.get("num-other-sentinels").map_or("", String::as_str);
            if self.running_sentinels().count() == self.sentinels.len()
                && others != (self.sentinels.len() - 1).to_string()
            {
                return Some(format!(
                    "sentinel {port} knows {others:?} other sentinels, not {}",
                    self.sentinels.len() - 1
                ));
            }
            let replicas = match sentinel_maps(sentinel, &["SENTINEL", "REPLICAS", name]) {
                Ok(r) => r,
                Err(e) => return Some(format!("sentinel {port}: SENTINEL REPLICAS: {e}")),
            };
            for node in self
                .nodes
                .iter()
                .filter(|n| n.state() == ServerState::Running && Some(n.port()) != master_port)
            {
                let known = replicas.iter().any(|r| {
                    r.get("port").is_some_and(|p| *p == node.port().to_string())
                        && r.get("flags").is_some_and(|f| f == "slave")
                });
                if !known {
                    return Some(format!(
                        "sentinel {port} does not know node {} as a healthy replica",
                        node.port()
                    ));
                }
            }
        }
        let Some(master_port) = named else {
            return Some("no sentinel is running".to_owned());
        };
        let Some(master) = self.nodes.iter().find(|n| n.port() == master_port) else {
            return Some(format!("the sentinels name unknown node {master_port}"));
        };
        if master.state() != ServerState::Running || !is_master(master) {
            return Some(format!("node {master_port} is not a running master"));
        }
        for node in self
            .nodes
            .iter()
            .filter(|n| n.state() == ServerState::Running && n.port() != master_port)
        {
            let info = node
                .conn(Duration::from_secs(1))
                .and_then(|mut c| c.text(&["INFO", "replication"]))
                .unwrap_or_default();
            let field = |f: &str| {
                info.lines()
                    .find_map(|l| l.strip_prefix(f)?.strip_prefix(':').map(str::trim))
                    .map(str::to_owned)
            };
            if field("master_port") != Some(master_port.to_string())
                || field("master_link_status").as_deref() != Some("up")
            {
                return Some(format!(
                    "node {} does not replicate {master_port} with its link up",
                    node.port()
                ));
            }
        }
        None
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

/// The port a sentinel names for `name` (`SENTINEL GET-MASTER-ADDR-BY-NAME`).
fn master_addr(sentinel: &RedisServer, name: &str) -> io::Result<u16> {
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
fn to_map(reply: &Reply) -> Option<BTreeMap<String, String>> {
    let Reply::Array(Some(items)) = reply else {
        return None;
    };
    items
        .chunks_exact(2)
        .map(|kv| Some((kv[0].text()?, kv[1].text()?)))
        .collect()
}

fn sentinel_map(sentinel: &RedisServer, cmd: &[&str]) -> io::Result<BTreeMap<String, String>> {
    let reply = sentinel.conn(Duration::from_secs(1))?.cmd(cmd)?;
    to_map(&reply).ok_or_else(|| io::Error::other(format!("unexpected reply {reply:?}")))
}

fn sentinel_maps(
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

fn is_master(node: &RedisServer) -> bool {
    node.state() == ServerState::Running && node.role().is_ok_and(|r| r == "master")
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

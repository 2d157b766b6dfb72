//! Failover in a [`RedisSentinel`] topology, and waiting until the
//! sentinels agree again.

use super::query::{sentinel_map, sentinel_maps};
use super::*;

impl RedisSentinel {
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
            // A failover asked for earlier may have ended since.
            if let Some(new) = self.promoted(old) {
                return new;
            }
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
                // a busy machine) is asked for again. Until it ends, a
                // sentinel already names the replica it is promoting, so
                // only every sentinel naming a master that says so ends
                // the wait.
                let retry_at = Instant::now() + FAILOVER_TIMEOUT + Duration::from_secs(2);
                while Instant::now() < retry_at {
                    if let Some(new) = self.promoted(old) {
                        return new;
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
            if let Some(new) = self.promoted(old) {
                return new;
            }
            let named = self.named_masters();
            assert!(
                Instant::now() < deadline,
                "the sentinels did not promote a replica of port {} (they name {named:?}); {}",
                old.port(),
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The master every running sentinel names, when that is not `old`
    /// and the node says it is master.
    fn promoted(&self, old: &RedisServer) -> Option<&RedisServer> {
        let named = self.named_masters();
        let Some(Some(port)) = named.first() else {
            return None;
        };
        if *port == old.port() || named.iter().any(|p| p != &Some(*port)) {
            return None;
        }
        self.nodes
            .iter()
            .find(|n| n.port() == *port)
            .filter(|n| is_master(n))
    }

    /// The master's port as each running sentinel names it.
    fn named_masters(&self) -> Vec<Option<u16>> {
        self.running_sentinels()
            .map(|s| master_addr(s, &self.master_name).ok())
            .collect()
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
}

//! Failover on a [`RedisCluster`], and waiting until the cluster agrees
//! again.

use std::collections::BTreeMap;

use super::*;

/// How a replica takes over in [`RedisCluster::failover_with`]; maps to the
/// options of `CLUSTER FAILOVER`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailoverMode {
    /// Plain `CLUSTER FAILOVER`: coordinated with the (reachable) primary,
    /// no writes are lost.
    #[default]
    Coordinated,
    /// `CLUSTER FAILOVER FORCE`: no handshake with the primary (use when it is
    /// killed or stopped), still needs a majority of primaries to vote.
    Force,
    /// `CLUSTER FAILOVER TAKEOVER`: no handshake and no election.
    Takeover,
}

impl RedisCluster {
    /// Promotes `replica` with a coordinated `CLUSTER FAILOVER` and waits
    /// until it reports itself primary and the cluster is stable again.
    ///
    /// # Panics
    ///
    /// If `replica` is not currently a running replica, or the failover does
    /// not complete in time.
    pub fn failover(&self, replica: &RedisServer) {
        self.failover_with(replica, FailoverMode::Coordinated);
    }

    /// [`RedisCluster::failover`] with an explicit [`FailoverMode`] (use
    /// `Force` or `Takeover` when the old primary is killed or stopped; the
    /// wait at the end then only covers running nodes).
    pub fn failover_with(&self, replica: &RedisServer, mode: FailoverMode) {
        let replica = &self.nodes[self.index_of(replica)];
        let port = replica.port();
        assert_eq!(
            replica.state(),
            ServerState::Running,
            "failover: node on port {port} is not running"
        );
        let me = cluster_nodes(replica)
            .ok()
            .and_then(|v| v.into_iter().find(|l| l.port == port));
        assert!(
            me.as_ref().is_some_and(|l| !l.primary),
            "failover: node on port {port} is not a replica ({me:?})"
        );
        let mut command = vec!["CLUSTER", "FAILOVER"];
        match mode {
            FailoverMode::Coordinated => {}
            FailoverMode::Force => command.push("FORCE"),
            FailoverMode::Takeover => command.push("TAKEOVER"),
        }
        // A manual failover gives up after 5 s inside Redis; re-issue it then.
        let deadline = Instant::now() + Duration::from_secs(20) + self.node_timeout * 2;
        'outer: loop {
            let last_reply = match replica
                .conn(Duration::from_secs(2))
                .and_then(|mut c| c.text(&command))
            {
                Ok(r) => r,
                Err(e) => e.to_string(),
            };
            let retry_at = Instant::now() + Duration::from_secs(6);
            while Instant::now() < retry_at.min(deadline) {
                if replica.role().is_ok_and(|r| r == "master") {
                    break 'outer;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            assert!(
                Instant::now() < deadline,
                "failover of node on port {port} did not complete (last reply {last_reply:?}); log:\n{}",
                replica.log_tail(20)
            );
        }
        self.wait_until_stable();
    }

    /// Waits until the cluster is stable and panics with a description of
    /// what is not, after a timeout of 30 s plus twice the node timeout.
    ///
    /// Stable means, for every [`ServerState::Running`] node: `cluster_state`
    /// is `ok` with all 16384 slots assigned and every node known; all of
    /// them report the same topology (ids, roles, primary of each replica,
    /// slot ranges); no running node is flagged failing; every slot is served
    /// by a running primary; and every running replica of a running primary
    /// has its replication link up. Killed or stopped nodes are not queried,
    /// so after killing a primary this also waits for its replica to be
    /// promoted automatically.
    pub fn wait_until_stable(&self) {
        let deadline = Instant::now() + Duration::from_secs(30) + self.node_timeout * 2;
        loop {
            let problem = match self.stability_problem() {
                None => return,
                Some(p) => p,
            };
            if Instant::now() >= deadline {
                panic!("Redis Cluster did not become stable: {problem}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `None` if stable, else a description of the first problem found.
    fn stability_problem(&self) -> Option<String> {
        let running: Vec<&RedisServer> = self
            .nodes
            .iter()
            .filter(|n| n.state() == ServerState::Running)
            .collect();
        if running.is_empty() {
            return Some("no node is running".to_owned());
        }
        let mut first_view: Option<(u16, Vec<NodeLine>)> = None;
        for node in &running {
            let port = node.port();
            let info = match cluster_info(node) {
                Ok(i) => i,
                Err(e) => return Some(format!("CLUSTER INFO on port {port}: {e}")),
            };
            let state = info_field(&info, "cluster_state");
            let assigned = info_field(&info, "cluster_slots_assigned");
            let known = info_field(&info, "cluster_known_nodes");
            if state != Some("ok")
                || assigned != Some("16384")
                || known != Some(self.nodes.len().to_string().as_str())
            {
                return Some(format!(
                    "port {port}: cluster_state {state:?}, slots assigned {assigned:?}, known nodes {known:?}"
                ));
            }
            let view = match cluster_nodes(node) {
                Ok(v) => v,
                Err(e) => return Some(format!("CLUSTER NODES on port {port}: {e}")),
            };
            if let Some(l) = view
                .iter()
                .find(|l| l.failing && running.iter().any(|n| n.port() == l.port))
            {
                return Some(format!(
                    "port {port} still flags running node {} as failing",
                    l.port
                ));
            }
            let topology: Vec<NodeLine> = view
                .into_iter()
                .map(|l| NodeLine {
                    failing: false,
                    ..l
                })
                .collect();
            match &first_view {
                None => first_view = Some((port, topology)),
                Some((p, v)) if *v != topology => {
                    return Some(format!(
                        "nodes disagree on topology: port {p} sees {v:?}, port {port} sees {topology:?}"
                    ));
                }
                Some(_) => {}
            }
        }
        let (_, view) = first_view?;
        let is_running = |p: u16| running.iter().any(|n| n.port() == p);
        let mut covered = 0u32;
        for line in view.iter().filter(|l| l.primary) {
            let count: u32 = line
                .slots
                .iter()
                .map(|&(a, b)| u32::from(b) - u32::from(a) + 1)
                .sum();
            if count > 0 && !is_running(line.port) {
                return Some(format!(
                    "slots of node on port {} are served by a node that is not running",
                    line.port
                ));
            }
            covered += count;
        }
        if covered != u32::from(SLOT_COUNT) {
            return Some(format!("primaries cover {covered} slots"));
        }
        let ports: BTreeMap<&str, u16> = view.iter().map(|l| (l.id.as_str(), l.port)).collect();
        for line in view.iter().filter(|l| !l.primary && is_running(l.port)) {
            let primary_port = line
                .primary_id
                .as_deref()
                .and_then(|id| ports.get(id).copied());
            if primary_port.is_some_and(is_running) {
                let node = self.node_by_port(line.port);
                let link = node
                    .conn(Duration::from_secs(1))
                    .and_then(|mut c| c.text(&["INFO", "replication"]));
                let up = link
                    .as_deref()
                    .is_ok_and(|i| info_field(i, "master_link_status") == Some("up"));
                if !up {
                    return Some(format!(
                        "replica on port {} has no replication link up yet",
                        line.port
                    ));
                }
            }
        }
        None
    }
}

//! A real Redis Cluster made of [`RedisServer`] processes.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::time::{Duration, Instant};

use crate::server::{RedisServer, ServerState, scan_keys_without_ttl};
use crate::slot::{SLOT_COUNT, key_slot};
use crate::util;

/// Default `--cluster-node-timeout` of [`RedisCluster`] nodes.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(2000);

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

/// Options for [`RedisCluster`]; create with [`RedisCluster::builder`].
#[derive(Debug, Clone)]
pub struct ClusterBuilder {
    primaries: usize,
    replicas_per_primary: usize,
    node_timeout: Duration,
    extra_args: Vec<String>,
}

impl ClusterBuilder {
    /// Sets `--cluster-node-timeout` (default [`DEFAULT_NODE_TIMEOUT`]): how
    /// long a node must be unreachable before it is considered failed and its
    /// replica is promoted automatically.
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = timeout;
        self
    }

    /// Extra `redis-server` arguments for every node (appended last).
    pub fn extra_args(mut self, args: &[&str]) -> Self {
        self.extra_args = args.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// Starts the nodes, creates the cluster and waits until it is stable
    /// (see [`RedisCluster::wait_until_stable`]).
    ///
    /// # Panics
    ///
    /// If fewer than 3 primaries are asked for (`redis-cli --cluster create`
    /// needs 3), a node does not start, cluster creation fails, or the
    /// cluster does not become stable in time.
    pub fn start(self) -> RedisCluster {
        assert!(
            self.primaries >= 3,
            "a Redis Cluster needs at least 3 primaries, got {}",
            self.primaries
        );
        let total = self.primaries * (1 + self.replicas_per_primary);
        let node_timeout_ms = self.node_timeout.as_millis().max(1).to_string();
        let mut args: Vec<String> = [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            &node_timeout_ms,
            // Full syncs start at once instead of after the 5 s default delay.
            "--repl-diskless-sync-delay",
            "0",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        args.extend(self.extra_args.iter().cloned());

        let mut nodes: Vec<RedisServer> = Vec::with_capacity(total);
        for _ in 0..total {
            let node = RedisServer::launch("cluster", args.clone(), &mut || {
                // The bus port is chosen explicitly (not port + 10000, which
                // could be out of range or taken).
                let port = util::free_port();
                let bus = loop {
                    let bus = util::free_port();
                    if bus != port {
                        break bus;
                    }
                };
                (port, vec!["--cluster-port".to_owned(), bus.to_string()])
            });
            nodes.push(node);
        }

        let mut create = vec!["--cluster".to_owned(), "create".to_owned()];
        create.extend(nodes.iter().map(|n| n.addr().to_string()));
        create.extend([
            "--cluster-replicas".to_owned(),
            self.replicas_per_primary.to_string(),
            "--cluster-yes".to_owned(),
        ]);
        let out = util::run_with_timeout(&util::redis_cli_bin(), &create, Duration::from_secs(60));
        assert!(
            out.success && !out.stdout.contains("[ERR]"),
            "redis-cli --cluster create failed:\n{}\n{}",
            out.stdout,
            out.stderr
        );

        let ids = nodes
            .iter()
            .map(|n| {
                n.conn(Duration::from_secs(5))
                    .and_then(|mut c| c.text(&["CLUSTER", "MYID"]))
                    .unwrap_or_else(|e| panic!("CLUSTER MYID on port {} failed: {e}", n.port()))
            })
            .collect();
        let cluster = RedisCluster {
            nodes,
            ids,
            node_timeout: self.node_timeout,
        };
        cluster.wait_until_stable();
        cluster
    }
}

/// A Redis Cluster of real `redis-server` processes on loopback ports, each
/// node a [`RedisServer`] with its own directory (so nodes can be killed,
/// frozen and restarted individually through [`RedisCluster::nodes`]).
///
/// Roles change at run time (failover), so methods that talk about
/// primaries and replicas ask the cluster (`CLUSTER NODES` of the first
/// running node) each time. Dropping the cluster kills every node.
///
/// ```no_run
/// use tollgate_testkit::RedisCluster;
///
/// let cluster = RedisCluster::start(3, 1);
/// let primary = cluster.primary_for_key(b"{user:1}:tokens");
/// let replica = cluster.replicas_of(primary)[0];
/// cluster.failover(replica);
/// assert_eq!(cluster.primary_for_key(b"{user:1}:tokens").port(), replica.port());
/// ```
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    /// Cluster node ids, parallel to `nodes`.
    ids: Vec<String>,
    node_timeout: Duration,
}

/// One line of `CLUSTER NODES`, reduced to what the harness needs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct NodeLine {
    id: String,
    port: u16,
    primary: bool,
    /// For replicas: the id of their primary.
    primary_id: Option<String>,
    /// Owned slot ranges, inclusive.
    slots: Vec<(u16, u16)>,
    /// Flagged `fail` or `fail?` by the reporting node.
    failing: bool,
}

fn parse_cluster_nodes(text: &str) -> Result<Vec<NodeLine>, String> {
    let mut lines = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let bad = || format!("unexpected CLUSTER NODES line {line:?}");
        if fields.len() < 8 {
            return Err(bad());
        }
        let addr = fields[1].split(['@', ',']).next().unwrap_or_default();
        let port = addr
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or_else(bad)?;
        let flags: Vec<&str> = fields[2].split(',').collect();
        let mut slots = Vec::new();
        for s in &fields[8..] {
            if s.starts_with('[') {
                continue; // importing / migrating marker
            }
            let (a, b) = s.split_once('-').unwrap_or((s, s));
            slots.push((a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?));
        }
        lines.push(NodeLine {
            id: fields[0].to_owned(),
            port,
            primary: flags.contains(&"master"),
            primary_id: (fields[3] != "-").then(|| fields[3].to_owned()),
            slots,
            failing: flags.iter().any(|f| *f == "fail" || *f == "fail?"),
        });
    }
    lines.sort();
    Ok(lines)
}

fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|l| {
        l.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(str::trim)
    })
}

impl RedisCluster {
    /// Starts a cluster of `primaries` primaries (at least 3), each with
    /// `replicas_per_primary` replicas, node timeout
    /// [`DEFAULT_NODE_TIMEOUT`], and waits until it is stable.
    ///
    /// # Panics
    ///
    /// As [`ClusterBuilder::start`].
    pub fn start(primaries: usize, replicas_per_primary: usize) -> RedisCluster {
        Self::builder(primaries, replicas_per_primary).start()
    }

    /// A builder for a cluster with non-default options.
    pub fn builder(primaries: usize, replicas_per_primary: usize) -> ClusterBuilder {
        ClusterBuilder {
            primaries,
            replicas_per_primary,
            node_timeout: DEFAULT_NODE_TIMEOUT,
            extra_args: Vec::new(),
        }
    }

    /// Every node, primaries and replicas, in start order (roles as they
    /// were at creation are *not* implied by the order).
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The `--cluster-node-timeout` the nodes run with.
    pub fn node_timeout(&self) -> Duration {
        self.node_timeout
    }

    /// URLs of every node (`redis://127.0.0.1:PORT/`), for a cluster client's
    /// seed list.
    pub fn seed_urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The cluster node id (`CLUSTER MYID`) of `node`.
    ///
    /// # Panics
    ///
    /// If `node` is not a node of this cluster.
    pub fn node_id(&self, node: &RedisServer) -> &str {
        &self.ids[self.index_of(node)]
    }

    fn index_of(&self, node: &RedisServer) -> usize {
        self.nodes
            .iter()
            .position(|n| n.port() == node.port())
            .unwrap_or_else(|| panic!("port {} is not a node of this cluster", node.port()))
    }

    fn node_by_port(&self, port: u16) -> &RedisServer {
        self.nodes
            .iter()
            .find(|n| n.port() == port)
            .unwrap_or_else(|| panic!("cluster reports unknown node on port {port}"))
    }

    /// The cluster's view from the first running node that answers.
    fn view(&self) -> Vec<NodeLine> {
        let mut errors = Vec::new();
        for node in self
            .nodes
            .iter()
            .filter(|n| n.state() == ServerState::Running)
        {
            match cluster_nodes(node) {
                Ok(view) => return view,
                Err(e) => errors.push(format!("port {}: {e}", node.port())),
            }
        }
        panic!("no running cluster node answered CLUSTER NODES: {errors:?}")
    }

    /// The nodes that are currently primaries, in [`RedisCluster::nodes`] order.
    pub fn primaries(&self) -> Vec<&RedisServer> {
        let view = self.view();
        self.nodes
            .iter()
            .filter(|n| view.iter().any(|l| l.port == n.port() && l.primary))
            .collect()
    }

    /// The nodes that currently replicate `primary`.
    pub fn replicas_of(&self, primary: &RedisServer) -> Vec<&RedisServer> {
        let id = self.node_id(primary);
        let view = self.view();
        self.nodes
            .iter()
            .filter(|n| {
                view.iter()
                    .any(|l| l.port == n.port() && l.primary_id.as_deref() == Some(id))
            })
            .collect()
    }

    /// The primary that currently serves `slot` (`0..16384`).
    ///
    /// # Panics
    ///
    /// If the slot is out of range or unassigned.
    pub fn primary_for_slot(&self, slot: u16) -> &RedisServer {
        assert!(slot < SLOT_COUNT, "slot {slot} out of range");
        let view = self.view();
        let owner = view
            .iter()
            .find(|l| l.primary && l.slots.iter().any(|&(a, b)| (a..=b).contains(&slot)))
            .unwrap_or_else(|| panic!("slot {slot} is not assigned: {view:?}"));
        self.node_by_port(owner.port)
    }

    /// The primary that currently serves `key` (see [`key_slot`]).
    pub fn primary_for_key(&self, key: &[u8]) -> &RedisServer {
        self.primary_for_slot(key_slot(key))
    }

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

    /// Runs [`RedisServer::cli`] with `args` on every node, returning the
    /// outputs in [`RedisCluster::nodes`] order (e.g. `CONFIG SET` or
    /// `SCRIPT FLUSH` everywhere).
    ///
    /// # Panics
    ///
    /// If a node is not running (use [`RedisCluster::nodes`] and
    /// [`RedisServer::state`] to address the running ones only).
    pub fn cli_all(&self, args: &[&str]) -> Vec<String> {
        self.nodes.iter().map(|n| n.cli(args)).collect()
    }

    /// [`scan_keys_without_ttl`] over every current, running primary; sorted.
    pub fn scan_keys_without_ttl(&self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .primaries()
            .into_iter()
            .filter(|n| n.state() == ServerState::Running)
            .flat_map(scan_keys_without_ttl)
            .collect();
        keys.sort();
        keys
    }
}

fn cluster_nodes(node: &RedisServer) -> io::Result<Vec<NodeLine>> {
    let text = node
        .conn(Duration::from_secs(1))
        .and_then(|mut c| c.text(&["CLUSTER", "NODES"]))?;
    parse_cluster_nodes(&text).map_err(io::Error::other)
}

fn cluster_info(node: &RedisServer) -> io::Result<String> {
    node.conn(Duration::from_secs(1))
        .and_then(|mut c| c.text(&["CLUSTER", "INFO"]))
}

impl fmt::Debug for RedisCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisCluster")
            .field("nodes", &self.nodes)
            .field("ids", &self.ids)
            .field("node_timeout", &self.node_timeout)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cluster_nodes_output() {
        let text = "\
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@40001,host myself,master - 0 0 1 connected 0-5460 [5461->-abc]
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@40002 master,fail? - 0 1426238316232 2 connected 5461 5462-10922
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30004@40004 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317741 1 connected
";
        let view = parse_cluster_nodes(text).unwrap();
        assert_eq!(view.len(), 3);
        let first = view.iter().find(|l| l.port == 30001).unwrap();
        assert!(first.primary && !first.failing);
        assert_eq!(first.slots, vec![(0, 5460)]);
        let second = view.iter().find(|l| l.port == 30002).unwrap();
        assert!(second.failing);
        assert_eq!(second.slots, vec![(5461, 5461), (5462, 10922)]);
        let replica = view.iter().find(|l| l.port == 30004).unwrap();
        assert!(!replica.primary);
        assert_eq!(
            replica.primary_id.as_deref(),
            Some("e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca")
        );
        assert!(parse_cluster_nodes("garbage").is_err());
    }

    #[test]
    fn reads_info_fields() {
        let info = "# Cluster\r\ncluster_state:ok\r\ncluster_slots_assigned:16384\r\n";
        assert_eq!(info_field(info, "cluster_state"), Some("ok"));
        assert_eq!(info_field(info, "cluster_slots_assigned"), Some("16384"));
        assert_eq!(info_field(info, "cluster_slots"), None);
    }
}

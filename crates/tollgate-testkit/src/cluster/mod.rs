//! A real Redis Cluster made of [`RedisServer`] processes.

use std::fmt;
use std::io;
use std::time::{Duration, Instant};

use crate::server::{RedisServer, ServerState, scan_keys_without_ttl};
use crate::slot::{SLOT_COUNT, key_slot};
use crate::util;

/// Default `--cluster-node-timeout` of [`RedisCluster`] nodes.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(2000);

mod builder;
mod failover;
mod nodes;

pub use self::builder::ClusterBuilder;
pub use self::failover::FailoverMode;
use self::nodes::{NodeLine, cluster_info, cluster_nodes, info_field};

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

impl fmt::Debug for RedisCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisCluster")
            .field("nodes", &self.nodes)
            .field("ids", &self.ids)
            .field("node_timeout", &self.node_timeout)
            .finish()
    }
}

//! How a [`RedisCluster`] is set up and started.

use super::*;

/// Options for [`RedisCluster`]; create with [`RedisCluster::builder`].
#[derive(Debug, Clone)]
pub struct ClusterBuilder {
    pub(super) primaries: usize,
    pub(super) replicas_per_primary: usize,
    pub(super) node_timeout: Duration,
    pub(super) extra_args: Vec<String>,
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

//! One multiplexed connection to a server or a cluster.

use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, RedisResult, Value};

/// A shared, multiplexed connection: concurrent commands pipeline on one
/// socket (one per node on a cluster). Clones share it.
#[derive(Clone)]
pub(crate) enum Connection {
    /// A standalone server, reconnected in the background when it drops.
    Single(ConnectionManager),
    /// A Redis Cluster; MOVED, ASK and TRYAGAIN are followed by the client.
    Cluster(ClusterConnection),
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Connection::Single(_) => "Connection::Single",
            Connection::Cluster(_) => "Connection::Cluster",
        })
    }
}

impl Connection {
    pub(crate) async fn query(&self, cmd: &Cmd) -> RedisResult<Value> {
        match self {
            Connection::Single(c) => cmd.query_async(&mut c.clone()).await,
            Connection::Cluster(c) => cmd.query_async(&mut c.clone()).await,
        }
    }

    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Connection::Cluster(_))
    }
}

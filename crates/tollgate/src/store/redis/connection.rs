//! One multiplexed connection to a server or a cluster.

use std::sync::Arc;

use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, RedisResult, Value};

use super::coalesce::{Coalescer, WindowCheck};
use super::nodes::NodePipelines;
use super::sentinel::SentinelConnection;

/// A shared, multiplexed connection: concurrent commands pipeline on one
/// socket (one per node on a cluster). Clones share it.
#[derive(Clone)]
pub(crate) enum Connection {
    /// A standalone server, reconnected in the background when it drops;
    /// with the queue that pipelines concurrent script calls, unless that
    /// was switched off.
    Single(ConnectionManager, Option<Arc<Coalescer>>),
    /// A Redis Cluster; MOVED, ASK and TRYAGAIN are followed by the client;
    /// with the queues that pipeline concurrent script calls per primary,
    /// unless that was switched off.
    Cluster(ClusterConnection, Option<Arc<NodePipelines>>),
    /// The master Redis Sentinel names, followed after a failover.
    Sentinel(Arc<SentinelConnection>),
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Connection::Single(..) => "Connection::Single",
            Connection::Cluster(..) => "Connection::Cluster",
            Connection::Sentinel(_) => "Connection::Sentinel",
        })
    }
}

impl Connection {
    /// Sends one command by itself.
    pub(crate) async fn query(&self, cmd: &Cmd) -> RedisResult<Value> {
        match self {
            Connection::Single(c, _) => cmd.query_async(&mut c.clone()).await,
            Connection::Cluster(c, _) => cmd.query_async(&mut c.clone()).await,
            Connection::Sentinel(s) => s.query(cmd.clone(), false).await,
        }
    }

    /// Sends a command of the hot path, whose first key is `key`: in the
    /// next pipeline of concurrent commands, on a standalone server (see
    /// [`Coalescer`]) or to the key's primary on a cluster (see
    /// [`NodePipelines`]).
    pub(crate) async fn query_pipelined(&self, key: Option<&[u8]>, cmd: Cmd) -> RedisResult<Value> {
        match (self, key) {
            (Connection::Single(_, Some(queue)), _) => queue.query(cmd).await,
            (Connection::Cluster(_, Some(nodes)), Some(key)) => nodes.query(key, cmd).await,
            (Connection::Sentinel(s), _) => s.query(cmd, true).await,
            _ => self.query(&cmd).await,
        }
    }

    /// Queues a window check for the next group of such checks, when the
    /// standalone server is busy enough that calls queue; `None` when the
    /// check should leave as its own script call.
    pub(crate) async fn query_window(&self, check: WindowCheck) -> Option<RedisResult<Value>> {
        match self {
            Connection::Single(_, Some(queue)) => queue.query_window(check).await,
            Connection::Sentinel(s) => s.query_window(check).await,
            _ => None,
        }
    }

    /// Whether a command that failed with `e` on a cluster primary's own
    /// connection should go again through the cluster connection (a
    /// redirect, a lost connection; see [`NodePipelines`]).
    pub(crate) fn reroutes(&self, e: &redis::RedisError) -> bool {
        matches!(self, Connection::Cluster(_, Some(_))) && super::coalesce::reroutes(e)
    }

    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Connection::Cluster(..))
    }
}

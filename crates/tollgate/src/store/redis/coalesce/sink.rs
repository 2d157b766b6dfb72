//! Where a queue's pipelines go: a standalone server, or one primary of a
//! cluster.
//!
//! A cluster primary's queue keeps at most [`NODE_FLUSHES`] flushes in
//! flight: a burst that finds them out waits in the queue, and the first
//! of them to come back sends it, at once (its callers have had a round
//! trip to queue). Without the bound, 256 busy callers over three
//! primaries made some fifteen pipelines of 17 in flight, where a
//! standalone server's queue made ten of 26 (every pipeline pays a flush,
//! the connection task's wake-up, a write and its reads, whatever its
//! length); with it, a primary's pipelines are as long as a standalone
//! server's. When a pipeline fails whole on an error that sends its calls
//! again through the cluster connection ([`reroutes`]: a lost connection,
//! a timeout), the calls queued behind it go the same way at once rather
//! than wait out the same error. A standalone server's queue is not
//! bounded.

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::SingleNodeRoutingInfo;
use redis::{Cmd, RedisError, RedisResult, Value};

/// The most flushes in flight at once from one cluster primary's queue:
/// one on the wire while the next burst gathers, so that the primary
/// is never left waiting for the client between two.
pub(super) const NODE_FLUSHES: usize = 2;

/// Where a queue's commands go.
pub(crate) enum Sink {
    /// A standalone server.
    Server(ConnectionManager),
    /// One primary of a cluster: pipelines to its address through the
    /// cluster's connection (which keeps one connection per node); a
    /// command alone goes by its key's slot, redirects followed.
    Node {
        cluster: ClusterConnection,
        host: String,
        port: u16,
    },
}

impl Sink {
    pub(super) async fn one(&self, cmd: &Cmd) -> RedisResult<Value> {
        match self {
            Sink::Server(conn) => cmd.query_async(&mut conn.clone()).await,
            Sink::Node { cluster, .. } => cmd.query_async(&mut cluster.clone()).await,
        }
    }

    pub(super) async fn many(
        &self,
        pipeline: redis::Pipeline,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        match self {
            Sink::Server(conn) => conn.clone().req_packed_commands(&pipeline, 0, count).await,
            Sink::Node {
                cluster,
                host,
                port,
            } => {
                let to = SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                };
                cluster.clone().route_pipeline(pipeline, 0, count, to).await
            }
        }
    }
}

/// Whether a command failed as one sent to a node that no longer holds
/// its slot, or on a connection lost, would: to be sent again through
/// the cluster connection, which follows redirects and reconnects.
pub(crate) fn reroutes(e: &RedisError) -> bool {
    !matches!(e.retry_method(), redis::RetryMethod::NoRetry)
}

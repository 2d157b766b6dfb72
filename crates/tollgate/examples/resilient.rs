//! Decisions that keep flowing when Redis fails. A `ResilientStore` wraps
//! the Redis store; this example checks a limit ten times a second and
//! prints where each decision came from. Stop Redis while it runs
//! (`redis-cli shutdown nosave`, or kill it) and the decisions go on from
//! this instance's share of the limit (`fallback`); start it again and
//! they come from Redis (`store`) once the probe has seen it back.
//!
//! ```text
//! cargo run -p tollgate --features redis --example resilient [-- redis://127.0.0.1:6379/]
//! ```

use std::sync::Arc;
use std::time::Duration;

use tollgate::store::redis::RedisStore;
use tollgate::store::resilient::{OnFailure, ResilientStore};
use tollgate::{Decision, Policy, Store};

/// The store: Redis at `url`, behind a resilient store that decides
/// locally, on a third of each limit, when Redis cannot.
pub(crate) async fn connect(url: &str) -> tollgate::Result<ResilientStore> {
    let redis = RedisStore::builder([url])
        // A script that reaches the server after 50 ms writes nothing.
        .deadline(Duration::from_millis(50))
        .connect()
        .await?;
    ResilientStore::builder(Arc::new(redis))
        .deadline(Duration::from_millis(50))
        .on_failure(OnFailure::Local)
        .expected_instances(3)
        .build()
}

/// The limit: 300 requests a minute per API key, shared by 3 instances.
pub(crate) fn policy() -> tollgate::Result<Policy> {
    Policy::fixed_window("api", 300, Duration::from_secs(60))
}

/// One decision, printed with its source.
pub(crate) async fn check(store: &ResilientStore, policy: &Policy) -> tollgate::Result<Decision> {
    let decision = store.check(policy, b"key-1", 1).await?;
    println!(
        "{:<8} allowed={} remaining={}/{}",
        decision.source.as_str(),
        decision.allowed,
        decision.remaining,
        decision.limit
    );
    Ok(decision)
}

#[tokio::main]
async fn main() -> tollgate::Result<()> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379/".to_string());
    let store = connect(&url).await?;
    let policy = policy()?;
    for _ in 0..600 {
        check(&store, &policy).await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

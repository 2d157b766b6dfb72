//! Each mid-script error class, produced by a real server, classified as
//! the Redis store's error module says, and answered by the failure policy
//! of a resilient store in front of it (never an error to the caller).
//! `BUSY` is produced in `outages.rs`; `LOADING`, `CLUSTERDOWN` and
//! `TRYAGAIN` are classified from their replies in the unit tests.

use std::sync::Arc;
use std::time::Duration;

use tollgate::store::redis::RedisStore;
use tollgate::{Error, Policy, Source, Store, StoreErrorKind};
use tollgate_testkit::{PATIENCE, RedisServer};

use crate::support::{redis_within, resilient, runtime};

/// A fresh key's admission, which writes, through the bare store and
/// through a resilient one: the first fails with `kind`, transient or not,
/// the second is answered by the fallback.
async fn classified(store: &Arc<RedisStore>, key: &[u8], kind: StoreErrorKind, transient: bool) {
    let policy = Policy::token_bucket("errors", 10, Duration::from_secs(1), 5).unwrap();
    match store.check(&policy, key, 1).await {
        Err(e @ Error::Store { kind: k, .. }) => {
            assert_eq!((k, e.is_transient()), (kind, transient), "{e}");
            assert!(e.is_store_failure());
        }
        other => panic!("expected a {kind} error, got {other:?}"),
    }
    let d = resilient(store.clone(), 1)
        .check(&policy, key, 1)
        .await
        .expect("the failure policy answers");
    assert_eq!((d.allowed, d.source), (true, Source::Fallback));
}

#[test]
fn oom_readonly_and_noperm_from_a_real_server() {
    let server = RedisServer::start();
    let other = RedisServer::start();
    server.cli(&[
        "ACL", "SETUSER", "limiter", "on", ">s3cret", "~*", "&*", "+@all",
    ]);
    runtime().block_on(async {
        let url = format!("redis://limiter:s3cret@127.0.0.1:{}/", server.port());
        // A deadline no loaded machine reaches: the error is the subject,
        // not a timeout.
        let store = redis_within(&url, PATIENCE).await;
        server.cli(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
        server.cli(&["CONFIG", "SET", "maxmemory", "1"]);
        classified(&store, b"oom", StoreErrorKind::OutOfMemory, true).await;
        server.cli(&["CONFIG", "SET", "maxmemory", "0"]);
        server.cli(&["ACL", "SETUSER", "limiter", "-@write"]);
        classified(&store, b"noperm", StoreErrorKind::Auth, false).await;
        server.cli(&["ACL", "SETUSER", "limiter", "+@write"]);
        server.cli(&["REPLICAOF", "127.0.0.1", &other.port().to_string()]);
        classified(&store, b"readonly", StoreErrorKind::Replica, true).await;
    });
}

#[test]
fn masterdown_from_a_real_replica() {
    let primary = RedisServer::start();
    let port = primary.port().to_string();
    let replica = RedisServer::start_with(&[
        "--replicaof",
        "127.0.0.1",
        &port,
        "--replica-serve-stale-data",
        "no",
    ]);
    runtime().block_on(async {
        let store = redis_within(&replica.url(), PATIENCE).await;
        primary.kill9();
        tokio::time::sleep(Duration::from_millis(200)).await;
        classified(&store, b"masterdown", StoreErrorKind::Replica, true).await;
    });
}

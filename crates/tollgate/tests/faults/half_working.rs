//! A half-working Redis: it answers some calls and fails others, so the
//! breaker may flip again and again. Peeks and denials still pass while
//! writes fail (`OOM`, `READONLY`, `NOPERM`), or every other connection
//! drops (a flapping link). Each asserts the bound of the resilient
//! store's docs under load: the fallback never hands out a fresh burst.

use std::sync::Arc;
use std::time::Duration;

use tollgate::store::redis::RedisStore;
use tollgate::store::resilient::{ResilientStore, ResilientStoreBuilder};
use tollgate::{Policy, Source, Store};
use tollgate_testkit::{PATIENCE, RedisServer, TcpProxy};

use crate::support::{
    DEADLINE, Scenario, counter, redis, redis_at, redis_within, resilient, resilient_within,
    runtime,
};

/// The example: a bucket of 25 at 50/s, one instance, 2 s of
/// `OOM` under `noeviction`. In the scripts' general form every admission
/// writes, so every admission fails and every denial passes. (In the
/// server-clock bucket form an admission on a key that exists only moves
/// its expiry, which `OOM` allows: a hot key goes on being decided by
/// Redis.)
#[test]
fn out_of_memory_stays_within_one_local_share() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let redis = RedisStore::builder([server.url()])
            .deadline(DEADLINE)
            .bucket_expiry_form(false)
            .connect()
            .await
            .unwrap();
        let store = resilient(Arc::new(redis), 1);
        let scenario = Scenario::bucket(
            "OOM (noeviction) 2 s",
            "oom",
            (50, 25),
            Duration::from_secs(2),
        );
        let before = counter("tollgate_store_errors_total", ("kind", "oom"));
        let oom = || {
            server.cli(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
            server.cli(&["CONFIG", "SET", "maxmemory", "1"]);
        };
        let heal = || {
            server.cli(&["CONFIG", "SET", "maxmemory", "0"]);
        };
        let (figures, _) = scenario.run(&store, &oom, &heal).await;
        assert!(figures.to_fallback.is_some(), "the breaker opened");
        assert!(
            counted_as(&server.url(), "oom", before, &oom, &heal).await,
            "OOM is counted as such"
        );
    });
}

/// The primary turned into a replica of another server mid-run (as in a
/// failover that this client has not followed yet): writes answer
/// `READONLY`, reads still pass. Then `REPLICAOF NO ONE`.
#[test]
fn a_primary_turned_replica_stays_within_one_local_share() {
    let server = RedisServer::start();
    let new_primary = RedisServer::start();
    runtime().block_on(async {
        let store = resilient(redis(&server).await, 1);
        let scenario = Scenario::bucket(
            "READONLY (REPLICAOF) 2 s",
            "readonly",
            (50, 25),
            Duration::from_secs(2),
        );
        let port = new_primary.port().to_string();
        let before = counter("tollgate_store_errors_total", ("kind", "replica"));
        let replica = || {
            server.cli(&["REPLICAOF", "127.0.0.1", &port]);
        };
        let heal = || {
            server.cli(&["REPLICAOF", "NO", "ONE"]);
        };
        let (figures, _) = scenario.run(&store, &replica, &heal).await;
        assert!(figures.to_fallback.is_some(), "the breaker opened");
        assert!(
            counted_as(&server.url(), "replica", before, &replica, &heal).await,
            "READONLY is counted as a replica's refusal"
        );
    });
}

/// The ACL user's write permission revoked mid-run (a credential rotation
/// gone half-way), then given back: decided by the failure policy, never
/// an error to the caller.
#[test]
fn a_revoked_write_permission_stays_within_one_local_share() {
    let server = RedisServer::start();
    server.cli(&[
        "ACL", "SETUSER", "limiter", "on", ">s3cret", "~*", "&*", "+@all",
    ]);
    runtime().block_on(async {
        let url = format!("redis://limiter:s3cret@127.0.0.1:{}/", server.port());
        let store = resilient(redis_at(&url).await, 1);
        let policy = Policy::token_bucket("noperm", 50, Duration::from_secs(1), 25).unwrap();
        let scenario = Scenario::bucket(
            "NOPERM (ACL -@write) 2 s",
            "noperm",
            (50, 25),
            Duration::from_secs(2),
        );
        let before = counter("tollgate_store_errors_total", ("kind", "auth"));
        let revoke = || {
            server.cli(&["ACL", "SETUSER", "limiter", "-@write"]);
        };
        let heal = || {
            server.cli(&["ACL", "SETUSER", "limiter", "+@write"]);
        };
        let (figures, _) = scenario.run(&store, &revoke, &heal).await;
        assert!(figures.to_fallback.is_some(), "the breaker opened");
        assert!(
            counted_as(&url, "auth", before, &revoke, &heal).await,
            "the refusal is counted as `auth`"
        );
        let d = store.check(&policy, b"after", 1).await.unwrap();
        assert_eq!(d.source, Source::Store, "the rights are back");
    });
}

/// Whether a fault's error is counted as `kind` (above `before`): counted
/// during the scenario, or else by one call that waits for it with the
/// fault injected again, on a connection to `url` that waits for the
/// answer (on a loaded machine the load's calls may all time out first,
/// and then the open breaker keeps them from Redis).
async fn counted_as(
    url: &str,
    kind: &str,
    before: u64,
    inject: impl FnOnce(),
    heal: impl FnOnce(),
) -> bool {
    if counter("tollgate_store_errors_total", ("kind", kind)) > before {
        return true;
    }
    let patient = resilient_within(redis_within(url, PATIENCE).await, 1, 1, PATIENCE);
    let policy = Policy::token_bucket("counted", 50, Duration::from_secs(1), 25).unwrap();
    tokio::task::block_in_place(inject);
    let decision = patient.check(&policy, b"counted", 1).await.unwrap();
    tokio::task::block_in_place(heal);
    assert_eq!(
        decision.source,
        Source::Fallback,
        "the fault refused the write"
    );
    counter("tollgate_store_errors_total", ("kind", kind)) > before
}

/// A link that drops every connection for 100 ms, then passes them for
/// 100 ms, for 2 s, through the testkit's proxy between the store and
/// Redis. With the default probe (two healthy probes in a row close the
/// breaker), the breaker rarely closes while the link flaps.
#[test]
fn a_flapping_link_stays_within_one_local_share() {
    flapping_link("flapping link (100 ms) 2 s", 1, |b| b);
}

/// The same with a breaker made to flip as often as it can: a probe every
/// 20 ms, and one healthy probe closes it. Flips do not matter to the
/// bound: the local limiter keeps its state through each. The link flaps
/// until two flips have been seen (the scenario holds its fault for
/// them), so a slow machine still flips.
#[test]
fn a_flapping_link_with_a_flipping_breaker_stays_within_one_local_share() {
    let opened = flapping_link("flapping link, 1-probe close 2 s", 2, |b| {
        b.probe_interval(Duration::from_millis(20), Duration::from_millis(40))
            .probe_successes(1)
    });
    assert!(opened >= 2, "the breaker flipped: opened {opened} times");
}

fn flapping_link(
    name: &'static str,
    opened_at_least: u32,
    configure: impl FnOnce(ResilientStoreBuilder) -> ResilientStoreBuilder,
) -> u32 {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.addr());
    runtime().block_on(async {
        let builder = ResilientStore::builder(redis_at(&proxy.url()).await)
            .deadline(DEADLINE)
            .probe_interval(Duration::from_millis(100), Duration::from_millis(400));
        let store = configure(builder).build().unwrap();
        let scenario = Scenario {
            opened_at_least,
            ..Scenario::bucket(name, "flap", (50, 25), Duration::from_secs(2))
        };
        let (figures, _) = scenario
            .run(
                &store,
                || proxy.flap(Duration::from_millis(100)),
                || proxy.pass(),
            )
            .await;
        eprintln!("{name}: {proxy:?}");
        assert!(figures.to_fallback.is_some(), "the breaker opened");
        assert!(proxy.dropped() > 0, "the link dropped connections");
        figures.opened
    })
}

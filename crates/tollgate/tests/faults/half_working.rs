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
use tollgate_testkit::{RedisServer, TcpProxy};

use crate::support::{DEADLINE, Scenario, counter, redis, redis_at, resilient, runtime};

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
        let counted = || counter("tollgate_store_errors_total", ("kind", "oom")) > before;
        let (figures, _) = scenario
            .run_until(
                &store,
                || {
                    server.cli(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
                    server.cli(&["CONFIG", "SET", "maxmemory", "1"]);
                },
                || {
                    server.cli(&["CONFIG", "SET", "maxmemory", "0"]);
                },
                counted,
            )
            .await;
        assert!(figures.to_fallback.is_some(), "the breaker opened");
        assert!(
            counter("tollgate_store_errors_total", ("kind", "oom")) > before,
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
        let counted = || counter("tollgate_store_errors_total", ("kind", "replica")) > before;
        let (figures, _) = scenario
            .run_until(
                &store,
                || {
                    server.cli(&["REPLICAOF", "127.0.0.1", &port]);
                },
                || {
                    server.cli(&["REPLICAOF", "NO", "ONE"]);
                },
                counted,
            )
            .await;
        assert!(figures.to_fallback.is_some(), "the breaker opened");
        assert!(
            counter("tollgate_store_errors_total", ("kind", "replica")) > before,
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
        let counted = || counter("tollgate_store_errors_total", ("kind", "auth")) > before;
        let (figures, _) = scenario
            .run_until(
                &store,
                || {
                    server.cli(&["ACL", "SETUSER", "limiter", "-@write"]);
                },
                || {
                    server.cli(&["ACL", "SETUSER", "limiter", "+@write"]);
                },
                counted,
            )
            .await;
        assert!(figures.to_fallback.is_some(), "the breaker opened");
        assert!(
            counter("tollgate_store_errors_total", ("kind", "auth")) > before,
            "the refusal is counted as `auth`"
        );
        let d = store.check(&policy, b"after", 1).await.unwrap();
        assert_eq!(d.source, Source::Store, "the rights are back");
    });
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

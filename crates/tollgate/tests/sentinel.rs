//! Redis Sentinel against real processes: a master, a replica and three
//! `redis-sentinel`s from the testkit. The store finds the master through
//! the sentinels, follows it through a failover in the middle of load
//! (the master killed, or `SENTINEL FAILOVER`), and, behind a
//! `ResilientStore` with `on_failure = local`, no caller sees an error and
//! a hot key is over-admitted by at most one burst across the switch.
//! The figures are printed; run with `--nocapture` to see them.
#![cfg(feature = "redis")]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tollgate::store::redis::RedisStore;
use tollgate::store::resilient::{OnFailure, ResilientStore};
use tollgate::{Error, Policy, Source, Store, StoreErrorKind};
use tollgate_testkit::RedisSentinel;

const DEADLINE: Duration = Duration::from_millis(50);
/// What a decision may take beyond the deadline on a loaded 2-core
/// machine shared with other builds; the slowest is printed.
const SLACK: Duration = Duration::from_millis(250);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn finds_the_master_by_url_and_by_builder_with_a_password() {
    let topology = RedisSentinel::builder().password("s3cret").start();
    runtime().block_on(async {
        let policy = Policy::fixed_window("pw", 3, Duration::from_secs(60)).unwrap();
        let by_url = RedisStore::connect(&topology.url()).await.unwrap();
        let by_builder = RedisStore::builder(topology.sentinel_urls())
            .sentinel(topology.master_name())
            .master_auth(None, "s3cret")
            .connect()
            .await
            .unwrap();
        // Both reach the one master: three admissions between them.
        let mut allowed = 0;
        for store in [&by_url, &by_builder, &by_url, &by_builder] {
            allowed += u32::from(store.check(&policy, b"k", 1).await.unwrap().allowed);
        }
        assert_eq!(allowed, 3);
        assert_eq!(
            topology.master().cli(&[
                "-a",
                "s3cret",
                "--no-auth-warning",
                "EXISTS",
                &String::from_utf8(by_url.key_of(&policy, b"k")).unwrap()
            ]),
            "1"
        );

        let wrong = RedisStore::builder(topology.sentinel_urls())
            .sentinel(topology.master_name())
            .master_auth(None, "wrong")
            .connect()
            .await
            .unwrap_err();
        assert!(
            matches!(
                wrong,
                Error::Store {
                    kind: StoreErrorKind::Auth,
                    ..
                }
            ),
            "{wrong:?}"
        );
        assert!(
            !wrong.to_string().contains("wrong"),
            "no password echoed: {wrong}"
        );
        let unknown = RedisStore::builder(topology.sentinel_urls())
            .sentinel("nobody")
            .connect()
            .await
            .unwrap_err();
        assert!(matches!(unknown, Error::Store { .. }), "{unknown:?}");
    });
}

/// How the master goes away.
#[derive(Debug, Clone, Copy)]
enum Failover {
    /// SIGKILL: the sentinels notice after `down-after`, elect a leader
    /// and promote the replica.
    Kill,
    /// `SENTINEL FAILOVER`: the replica promoted at once, the old master
    /// turned into its replica (calls to it then answer `READONLY`).
    Command,
}

#[test]
fn a_killed_master_is_followed_without_caller_errors() {
    failover_under_load(Failover::Kill);
}

#[test]
fn sentinel_failover_mid_load_is_followed_without_caller_errors() {
    failover_under_load(Failover::Command);
}

/// One decision as a caller saw it.
struct Seen {
    at: Duration,
    took: Duration,
    ok: bool,
    allowed: bool,
    source: Option<Source>,
}

fn failover_under_load(how: Failover) {
    let topology = RedisSentinel::start();
    runtime().block_on(async {
        let redis = Arc::new(
            RedisStore::builder(topology.sentinel_urls())
                .sentinel(topology.master_name())
                .deadline(DEADLINE)
                .connect()
                .await
                .unwrap(),
        );
        let store = Arc::new(
            ResilientStore::builder(redis.clone())
                .deadline(DEADLINE)
                .on_failure(OnFailure::Local)
                .expected_instances(1)
                .probe_interval(Duration::from_millis(100), Duration::from_millis(400))
                .build()
                .unwrap(),
        );
        let (rate, burst) = (200u64, 50u64);
        let policy =
            Arc::new(Policy::token_bucket("sentinel", rate, Duration::from_secs(1), burst).unwrap());
        let start = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let callers: Vec<_> = (0..8)
            .map(|_| {
                let (store, policy, stop) = (store.clone(), policy.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let at = start.elapsed();
                        let r = store.check(&policy, b"hot", 1).await;
                        seen.push(Seen {
                            at,
                            took: start.elapsed() - at,
                            ok: r.is_ok(),
                            allowed: r.as_ref().is_ok_and(|d| d.allowed),
                            source: r.as_ref().ok().map(|d| d.source),
                        });
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    seen
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(700)).await;
        let old_port = topology.master().port();
        let fault_at = start.elapsed();
        let new_port = tokio::task::block_in_place(|| match how {
            Failover::Kill => {
                let old = topology.kill_master();
                topology.wait_for_failover(old).port()
            }
            Failover::Command => topology.failover().port(),
        });
        let promoted_at = start.elapsed();
        // Until the store is back on the new master, and a while after.
        let back_by = Instant::now() + Duration::from_secs(10);
        while redis.master_switches() == 0 && Instant::now() < back_by {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        stop.store(true, Ordering::Relaxed);
        let mut all = Vec::new();
        for caller in callers {
            all.extend(caller.await.unwrap());
        }
        let run = start.elapsed();
        all.sort_by_key(|s| s.at);

        let errors = all.iter().filter(|s| !s.ok).count();
        let slowest = all.iter().map(|s| s.took).max().unwrap_or_default();
        let fallback: Vec<&Seen> = all
            .iter()
            .filter(|s| s.source == Some(Source::Fallback))
            .collect();
        let first_fallback = fallback.first().map(|s| s.at);
        let last_fallback = fallback.last().map(|s| s.at);
        let back = all
            .iter()
            .find(|s| s.source == Some(Source::Store) && last_fallback.is_some_and(|l| s.at > l))
            .map(|s| s.at);
        let admitted = |source: Source| {
            all.iter()
                .filter(|s| s.allowed && s.source == Some(source))
                .count() as u64
        };
        let (by_store, by_fallback) = (admitted(Source::Store), admitted(Source::Fallback));
        // The token bucket's own bound over the run, for what Redis
        // admitted; the local share (here the whole limit: one instance)
        // over the time the fallback decided, for the rest.
        let store_bound = burst + rate * run.as_millis() as u64 / 1000;
        let fallback_time = match (first_fallback, last_fallback) {
            (Some(a), Some(b)) => b - a + Duration::from_millis(1),
            _ => Duration::ZERO,
        };
        let local_share = burst + rate * fallback_time.as_millis() as u64 / 1000;
        eprintln!(
            "SENTINEL {how:?}: master {old_port} -> {new_port}, promoted {:?} after the fault; \
             {} decisions, {errors} caller errors, slowest {slowest:?} (deadline {DEADLINE:?}); \
             fallback from {:?} to {:?} after the fault, back on Redis {:?} after it; \
             admitted {by_store} by Redis (bound {store_bound}, + one burst {burst} across the switch) \
             and {by_fallback} by the fallback over {fallback_time:?} (local share {local_share}); \
             master switches {}",
            promoted_at - fault_at,
            all.len(),
            first_fallback.map(|f| f.saturating_sub(fault_at)),
            last_fallback.map(|f| f.saturating_sub(fault_at)),
            back.map(|b| b.saturating_sub(fault_at)),
            redis.master_switches(),
        );
        assert_eq!(errors, 0, "callers saw errors");
        assert!(redis.master_switches() >= 1, "the store never moved to the new master");
        assert!(back.is_some() || fallback.is_empty(), "never back on Redis after the fallback");
        assert!(
            all.iter().rev().take(8).all(|s| s.source != Some(Source::Fallback)),
            "still on the fallback at the end"
        );
        assert!(slowest <= DEADLINE + SLACK, "slowest decision {slowest:?}");
        assert!(
            by_store <= store_bound + burst,
            "Redis over-admitted beyond one burst across the switch: {by_store} > {store_bound} + {burst}"
        );
        assert!(
            by_fallback <= local_share,
            "the fallback admitted {by_fallback} > its share {local_share}"
        );
        // The new master has the scripts and the state: a key written now
        // lives there.
        let key = redis.key_of(&policy, b"hot");
        let on_new = tokio::task::block_in_place(|| {
            topology.master().cli(&["EXISTS", std::str::from_utf8(&key).unwrap()])
        });
        assert_eq!(on_new, "1");
    });
}

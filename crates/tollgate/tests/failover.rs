//! Failovers in the middle of load, through a `ResilientStore` with
//! `on_failure = local` over a Redis store with a deadline: Redis Sentinel
//! (the master killed, or `SENTINEL FAILOVER`) and Redis Cluster (the
//! primary killed, or `CLUSTER FAILOVER`). No caller sees an error; Redis
//! admits a hot key at most one burst beyond its bound across the switch,
//! and the fallback at most its local share while it decides.
//!
//! Each prints one row of the fault table (run with `--nocapture`):
//! | scenario | admitted (Redis + fallback over its span) | bound (Redis +
//! fallback) | slowest | fault → first fallback decision | fault → back on
//! Redis | caller errors of calls |
#![cfg(feature = "redis")]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tollgate::store::redis::RedisStore;
use tollgate::store::resilient::{BreakerState, OnFailure, ResilientStore};
use tollgate::{Policy, Source, Store};
use tollgate_testkit::{FailoverMode, PATIENCE, RedisCluster, RedisSentinel, SLACK};

const DEADLINE: Duration = Duration::from_millis(50);
const RATE: u64 = 200;
const BURST: u64 = 50;
const CALLERS: usize = 8;

/// How the primary goes away.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// Sentinel, the master killed (SIGKILL): the sentinels notice after
    /// `down-after`, elect a leader and promote the replica.
    SentinelKill,
    /// `SENTINEL FAILOVER`: the replica promoted at once; the old master
    /// keeps answering until the sentinels make it a replica.
    SentinelCommand,
    /// Cluster, the hot key's primary killed: its replica takes over after
    /// the node timeout.
    ClusterKill,
    /// A coordinated `CLUSTER FAILOVER` of the hot key's primary.
    ClusterCommand,
}

impl Fault {
    /// The scenario's name in the table of figures.
    fn name(self) -> &'static str {
        match self {
            Fault::SentinelKill => "Sentinel: master kill -9",
            Fault::SentinelCommand => "Sentinel: `SENTINEL FAILOVER`",
            Fault::ClusterKill => "Cluster: primary kill -9",
            Fault::ClusterCommand => "Cluster: `CLUSTER FAILOVER`",
        }
    }
}

/// The servers of one scenario.
enum Topology {
    Sentinel(RedisSentinel),
    Cluster(RedisCluster),
}

impl Topology {
    fn start(fault: Fault) -> Topology {
        match fault {
            Fault::SentinelKill | Fault::SentinelCommand => {
                Topology::Sentinel(RedisSentinel::start())
            }
            Fault::ClusterKill | Fault::ClusterCommand => Topology::Cluster(
                RedisCluster::builder(3, 1)
                    .node_timeout(Duration::from_millis(1000))
                    .start(),
            ),
        }
    }

    async fn store(&self) -> RedisStore {
        let builder = match self {
            Topology::Sentinel(t) => {
                RedisStore::builder(t.sentinel_urls()).sentinel(t.master_name())
            }
            Topology::Cluster(c) => RedisStore::builder(c.seed_urls()),
        };
        builder.deadline(DEADLINE).connect().await.unwrap()
    }

    /// Injects `fault` on the node holding `key` and waits until a
    /// replica has taken over.
    fn inject(&self, fault: Fault, key: &[u8]) {
        match (self, fault) {
            (Topology::Sentinel(t), Fault::SentinelKill) => {
                let old = t.kill_master();
                t.wait_for_failover(old);
            }
            (Topology::Sentinel(t), Fault::SentinelCommand) => {
                t.failover();
            }
            (Topology::Cluster(c), Fault::ClusterKill) => {
                c.primary_for_key(key).kill9();
                c.wait_until_stable();
            }
            (Topology::Cluster(c), Fault::ClusterCommand) => {
                let replica = c.replicas_of(c.primary_for_key(key))[0];
                c.failover_with(replica, FailoverMode::Coordinated);
            }
            _ => unreachable!("a fault of another topology"),
        }
    }
}

/// One decision as a caller saw it.
struct Seen {
    at: Duration,
    took: Duration,
    ok: bool,
    allowed: bool,
    source: Option<Source>,
}

fn failover_under_load(fault: Fault) {
    let topology = Topology::start(fault);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let redis = Arc::new(topology.store().await);
        let store = Arc::new(
            ResilientStore::builder(redis.clone())
                .deadline(DEADLINE)
                .on_failure(OnFailure::Local)
                .expected_instances(1)
                .probe_interval(Duration::from_millis(100), Duration::from_millis(400))
                .build()
                .unwrap(),
        );
        let policy =
            Arc::new(Policy::token_bucket("failover", RATE, Duration::from_secs(1), BURST).unwrap());
        let start = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let callers: Vec<_> = (0..CALLERS)
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
        let key = redis.key_of(&policy, b"hot");
        let fault_at = start.elapsed();
        tokio::task::block_in_place(|| topology.inject(fault, &key));
        if matches!(topology, Topology::Sentinel(_)) {
            let by = Instant::now() + PATIENCE;
            while redis.master_switches() == 0 && Instant::now() < by {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            assert!(redis.master_switches() >= 1, "the store never moved to the new master");
        }
        // Back on Redis (the breaker closed, however long the cluster
        // client's slot map refresh and the probe's backoff take on a busy
        // machine), then a while on it.
        let by = Instant::now() + PATIENCE;
        while store.breaker_state() != BreakerState::Closed {
            assert!(Instant::now() < by, "the breaker never closed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let closed_at = start.elapsed();
        tokio::time::sleep(Duration::from_millis(1000)).await;
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
        let (first, last) = (fallback.first().map(|s| s.at), fallback.last().map(|s| s.at));
        let back = all
            .iter()
            .find(|s| s.source == Some(Source::Store) && last.is_some_and(|l| s.at > l))
            .map(|s| s.at);
        let admitted = |source: Source| {
            all.iter()
                .filter(|s| s.allowed && s.source == Some(source))
                .count() as u64
        };
        let (by_store, by_fallback) = (admitted(Source::Store), admitted(Source::Fallback));
        // Redis: the token bucket's bound over the run, plus one burst
        // across the switch, plus one token for each of the two primaries'
        // histories (the bucket's server-clock form decides at the ms a
        // request arrives in, which can lend it up to one token). The
        // fallback: its local share (here the whole limit, one instance)
        // over the time it decided.
        let store_bound = BURST + RATE * run.as_millis() as u64 / 1000 + BURST + 2;
        let span = match (first, last) {
            (Some(a), Some(b)) => b - a + Duration::from_millis(1),
            _ => Duration::ZERO,
        };
        let share = if fallback.is_empty() {
            0
        } else {
            BURST + RATE * span.as_millis() as u64 / 1000
        };
        let ms = |d: Option<Duration>| {
            d.map_or_else(
                || "-".to_owned(),
                |d| format!("{:.0} ms", d.saturating_sub(fault_at).as_secs_f64() * 1e3),
            )
        };
        eprintln!(
            "| {} | {} ({by_store} + {by_fallback} over {:.2} s) | {} ({store_bound} + {share}) | {:.1} ms | {} | {} | {errors} of {} |",
            fault.name(),
            by_store + by_fallback,
            span.as_secs_f64(),
            store_bound + share,
            slowest.as_secs_f64() * 1e3,
            ms(first),
            ms(back),
            all.len(),
        );
        assert_eq!(errors, 0, "callers saw errors");
        // Redis decides again once the breaker has closed (not necessarily
        // every last call: on a loaded machine a call past its 50 ms
        // deadline may open the breaker again).
        assert!(
            all.iter()
                .any(|s| s.at > closed_at && s.source == Some(Source::Store)),
            "not back on Redis once the breaker closed"
        );
        // Far below what a call that waited for the failover would take
        // (seconds: a Sentinel's or a cluster's election).
        assert!(slowest <= DEADLINE + SLACK, "slowest decision {slowest:?}");
        assert!(
            by_store <= store_bound,
            "Redis over-admitted beyond one burst across the switch: {by_store} > {store_bound}"
        );
        assert!(by_fallback <= share, "the fallback admitted {by_fallback} > its share {share}");
    });
}

#[test]
fn sentinel_a_killed_master_is_followed_without_caller_errors() {
    failover_under_load(Fault::SentinelKill);
}

#[test]
fn sentinel_failover_mid_load_is_followed_without_caller_errors() {
    failover_under_load(Fault::SentinelCommand);
}

#[test]
fn cluster_a_killed_primary_is_replaced_without_caller_errors() {
    failover_under_load(Fault::ClusterKill);
}

#[test]
fn cluster_failover_mid_load_is_followed_without_caller_errors() {
    failover_under_load(Fault::ClusterCommand);
}

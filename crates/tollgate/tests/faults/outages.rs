//! Outages: the server killed, frozen, paused, busy, flushed and
//! restarted; several instances sharing a limit; a cluster failover.
//!
//! Kept whole on purpose: one concern, outages of the server, one scenario per test.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tollgate::store::redis::{RedisStore, TimeSource};
use tollgate::store::resilient::{BreakerState, OnFailure, ResilientStore};
use tollgate::{Error, ManualClock, Policy, Request, Source, Store, StoreErrorKind};
use tollgate_testkit::{PATIENCE, RedisServer};

use crate::support::{
    DEADLINE, Load, SLACK, Sample, Scenario, Share, assert_bounded, counter, percentile, redis,
    redis_within, resilient, resilient_after, resilient_within, runtime, wait_for,
};

#[test]
fn kill_9_under_load_falls_back_within_the_deadline_and_recovers() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = resilient(redis(&server).await, 1);
        let scenario = Scenario::bucket("kill -9", "api", (100, 20), Duration::from_millis(1500));
        let (figures, samples) = scenario
            .run(&store, || server.kill9(), || server.restart())
            .await;
        let open: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.source() == Some(Source::Fallback))
            .collect();
        eprintln!(
            "kill -9: p99 from the fallback {:?}",
            percentile(&open, 0.99)
        );
        assert!(figures.to_fallback.is_some(), "the breaker opened");
        assert!(
            figures.admissions.fallback >= 20,
            "the fallback admits its burst"
        );
        // Back on Redis after the fallback: answered by Redis, or by a
        // denial Redis proved (the deny cache remembers Redis's own denials
        // only). (Not necessarily the very last call: on a loaded machine a
        // call past its 50 ms deadline may open the breaker again.)
        let first_fallback = samples
            .iter()
            .position(|s| s.source() == Some(Source::Fallback))
            .unwrap();
        assert!(
            samples[first_fallback..]
                .iter()
                .any(|s| matches!(s.source(), Some(Source::Store | Source::Cache))),
            "decisions are back on Redis after the fallback"
        );
        assert!(
            counter("tollgate_store_errors_total", ("kind", "io"))
                + counter("tollgate_store_errors_total", ("kind", "timeout"))
                > 0
        );
    });
}

/// `CLIENT PAUSE … WRITE` for 1.5 s: scripts wait, the deadline answers.
#[test]
fn client_pause_respects_the_deadline() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = resilient(redis(&server).await, 1);
        let (rate, burst) = (1000, 100);
        let scenario = Scenario {
            name: "CLIENT PAUSE 1.5 s",
            policy: Policy::gcra("paused", rate, Duration::from_secs(1), burst).unwrap(),
            share: Share::of(burst, rate, 1),
            callers: 8,
            hold: Duration::from_millis(1500),
            opened_at_least: 1,
        };
        let (figures, _) = scenario
            .run(
                &store,
                || {
                    server.cli(&["CLIENT", "PAUSE", "1500", "WRITE"]);
                },
                || {},
            )
            .await;
        assert!(figures.to_fallback.is_some(), "the breaker opened");
    });
}

/// A read-only script that runs 2 s: other clients get `BUSY` after the
/// busy-reply threshold (10 ms, under the deadline).
#[test]
fn a_busy_script_respects_the_deadline() {
    let server = RedisServer::start();
    server.cli(&["CONFIG", "SET", "busy-reply-threshold", "10"]);
    runtime().block_on(async {
        let primary = redis(&server).await;
        let store = resilient(primary.clone(), 1);
        // The same Redis behind a store that waits a second: during the busy
        // script its calls get the BUSY reply, however loaded the machine,
        // where the 50 ms deadline may see a timeout first.
        let patient = ResilientStore::builder(primary.clone())
            .deadline(Duration::from_secs(1))
            .on_failure(OnFailure::Local)
            .build()
            .unwrap();
        let (rate, burst) = (1000, 100);
        let policy = Policy::gcra("busy", rate, Duration::from_secs(1), burst).unwrap();
        let scenario = Scenario {
            name: "BUSY script 1.5 s",
            policy: policy.clone(),
            share: Share::of(burst, rate, 1),
            callers: 8,
            hold: Duration::from_millis(1000),
            opened_at_least: 1,
        };
        let script = std::cell::RefCell::new(None);
        let (figures, _) = scenario
            .run(
                &store,
                || *script.borrow_mut() = Some(busy_script(&server, 1500)),
                // The fault ends with the script.
                || script.borrow_mut().take().unwrap().join().unwrap(),
            )
            .await;
        assert!(figures.to_fallback.is_some(), "the breaker opened");
        // BUSY is typed as such, and counted, when the call waits for it.
        let busy = busy_script(&server, 1000);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let direct = primary.check(&policy, b"direct", 1).await;
        assert!(
            matches!(
                direct,
                Err(Error::Store {
                    kind: StoreErrorKind::Busy,
                    ..
                })
            ),
            "a call during the busy script: {direct:?}"
        );
        let busy_before = counter("tollgate_store_errors_total", ("kind", "busy"));
        let counted = patient.check(&policy, b"patient", 1).await.unwrap();
        assert_eq!(counted.source, Source::Fallback);
        assert!(
            counter("tollgate_store_errors_total", ("kind", "busy")) > busy_before,
            "BUSY is counted as such"
        );
        busy.join().unwrap();
    });
}

/// Runs a read-only script that spins `ms` on the server's clock, from a
/// `redis-cli` of its own; join the thread to wait for its end.
fn busy_script(server: &RedisServer, ms: u64) -> std::thread::JoinHandle<()> {
    let port = server.port().to_string();
    let script = format!(
        "local t = redis.call('TIME') local e = t[1] * 1e6 + t[2] + {} \
         while true do local n = redis.call('TIME') if n[1] * 1e6 + n[2] >= e then return 1 end end",
        ms * 1000
    );
    std::thread::spawn(move || {
        let out = std::process::Command::new("redis-cli")
            .args(["-p", &port, "EVAL", &script, "0"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    })
}

/// Tokens taken from a bucket of `burst`, read by a peek through a
/// connection of its own.
async fn taken(server: &RedisServer, policy: &Policy, key: &[u8], burst: u64) -> u64 {
    let store = RedisStore::connect(&server.url()).await.unwrap();
    burst - store.check(policy, key, 0).await.unwrap().remaining
}

#[test]
fn a_frozen_server_is_bypassed_and_nothing_from_the_outage_is_applied_later() {
    frozen_server(8);
}

/// The same with enough callers that their calls leave in pipelines (32 or
/// more in flight): a pipeline stuck in the frozen server applies nothing
/// later either.
#[test]
fn a_frozen_server_applies_nothing_later_from_pipelined_calls() {
    frozen_server(64);
}

fn frozen_server(callers: usize) {
    let server = RedisServer::start();
    runtime().block_on(async {
        // A high threshold: dozens of commands are sent into the frozen
        // server before the breaker opens; without the script deadline they
        // would all be applied after SIGCONT.
        let redis = redis(&server).await;
        let store = resilient_after(redis.clone(), 1, 60);
        let burst = 100_000;
        // Refills one token an hour: what was taken stays visible.
        let policy = Policy::token_bucket("frozen", 1, Duration::from_secs(3600), burst).unwrap();
        let load = Load::start(store.clone(), policy.clone(), b"k", callers, Duration::from_millis(2));
        tokio::time::sleep(Duration::from_millis(400)).await;
        let stopped_at = load.now();
        tokio::task::block_in_place(|| server.stop());
        let open_after = wait_for(&store, BreakerState::Open).await;
        tokio::time::sleep(Duration::from_millis(3000).saturating_sub(open_after)).await;
        let resumed_at = load.now();
        tokio::task::block_in_place(|| server.cont());
        let back_after = wait_for(&store, BreakerState::Closed).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let samples = load.finish().await;

        assert!(samples.iter().all(|s| s.result.is_ok()), "no errors under `local`");
        let slowest = samples.iter().map(|s| s.took).max().unwrap();
        let during: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.at > stopped_at + open_after + DEADLINE && s.at < resumed_at)
            .collect();
        let p99 = percentile(&during, 0.99);
        let from_store = samples
            .iter()
            .filter(|s| matches!(&s.result, Ok(d) if d.allowed && d.source == Source::Store))
            .count() as u64;
        // Every command sent before or during the freeze that timed out ran
        // after SIGCONT past its deadline, and wrote nothing.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let in_redis = taken(&server, &policy, b"k", burst).await;
        let pipelined = redis.pipelined();
        eprintln!(
            "SIGSTOP 3 s, {callers} callers: slowest call {slowest:?}, breaker open after {open_after:?}, p99 while frozen {p99:?}, \
             back on Redis {back_after:?} after SIGCONT; admitted by Redis {from_store}, Redis counts {in_redis}; {pipelined:?}"
        );
        if callers >= 64 {
            assert!(pipelined.calls > 0, "no call was pipelined: {pipelined:?}");
        }
        assert!(slowest <= DEADLINE + SLACK, "a call took {slowest:?}");
        // Calls in flight when the server froze may have run before it did,
        // their replies stuck: at most one per caller. So may a call before
        // the freeze that a loaded machine let run past its deadline on the
        // client (answered by the fallback) while Redis ran it in time.
        let timed_out_before = samples
            .iter()
            .filter(|s| s.at < stopped_at && s.source() == Some(Source::Fallback))
            .count() as u64;
        assert!(
            in_redis >= from_store && in_redis - from_store <= callers as u64 + timed_out_before,
            "Redis counts {in_redis}, admitted by Redis {from_store}, {timed_out_before} timed out before the freeze: \
             commands applied late"
        );
    });
}

/// SIGSTOP for 1.5 s on a hot key: the figures' row.
#[test]
fn sigstop_on_a_hot_key_stays_within_the_bound() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = resilient(redis(&server).await, 1);
        let scenario = Scenario::bucket(
            "SIGSTOP 1.5 s",
            "stopped",
            (100, 20),
            Duration::from_millis(1500),
        );
        let (figures, _) = scenario
            .run(&store, || server.stop(), || server.cont())
            .await;
        assert!(figures.to_fallback.is_some(), "the breaker opened");
    });
}

/// An atomic batch shares the single scripts' deadline rule: sent to a
/// frozen server and run after its deadline once the server resumes, it
/// answers an error and writes none of its keys. So does a single check of
/// the fixed window, whose script on the server's clock (which otherwise
/// reads no clock) reads `TIME` to check the deadline.
#[test]
fn calls_run_after_their_deadline_write_nothing() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = redis(&server).await;
        // The same server, for the calls that must not be late themselves.
        let patient = redis_within(&server.url(), PATIENCE).await;
        let hour = Duration::from_secs(3600);
        let bucket = Policy::token_bucket("batch-tb", 1, hour, 10).unwrap();
        let window = Policy::fixed_window("batch-fw", 10, hour).unwrap();
        let batch = |cost| {
            [&bucket, &window].map(|policy| Request {
                policy,
                key: b"k",
                cost,
            })
        };
        // On time, the batch writes both keys.
        let first = patient.check_many(&batch(1), true).await.unwrap();
        assert!(first.iter().all(|d| d.allowed && d.remaining == 9));
        let requests = batch(1);
        tokio::task::block_in_place(|| server.stop());
        // With them, single checks of each: the window's and the bucket's
        // server-clock forms (the bucket's interval is a whole hour).
        let (late, late_window, late_bucket, ()) = tokio::join!(
            store.check_many(&requests, true),
            store.check(&window, b"k", 1),
            store.check(&bucket, b"k", 1),
            async {
                tokio::time::sleep(DEADLINE * 4).await;
                tokio::task::block_in_place(|| server.cont());
            }
        );
        for err in [
            late.unwrap_err(),
            late_window.unwrap_err(),
            late_bucket.unwrap_err(),
        ] {
            assert!(err.is_transient(), "{err}");
            // Refused as late by the server, or (resumed past the
            // connection's response timeout on a stalled machine) timed
            // out by the client: either way what it wrote is the verdict.
            assert!(
                matches!(
                    err,
                    Error::Store {
                        kind: StoreErrorKind::Timeout,
                        ..
                    }
                ),
                "{err}"
            );
        }
        let after = patient.check_many(&batch(0), true).await.unwrap();
        assert!(
            after.iter().all(|d| d.remaining == 9),
            "the late batch wrote: {after:?}"
        );
    });
}

#[test]
fn script_flush_and_restart_mid_load_show_no_errors() {
    let server = RedisServer::start();
    runtime().block_on(async {
        // Deadlines no loaded machine reaches: a timeout would fail over too,
        // which is not what this test is about.
        let primary = redis_within(&server.url(), PATIENCE).await;
        let store = resilient_within(primary.clone(), 1, 3, PATIENCE);
        let policy = Policy::fixed_window("flush", 1 << 30, Duration::from_secs(3600)).unwrap();
        let load = Load::start(store.clone(), policy, b"k", 8, Duration::from_millis(1));
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            tokio::task::block_in_place(|| server.cli(&["SCRIPT", "FLUSH"]));
        }
        let flushed_until = load.now();
        tokio::time::sleep(Duration::from_millis(200)).await;
        tokio::task::block_in_place(|| server.restart());
        wait_for(&store, BreakerState::Closed).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let samples = load.finish().await;
        assert!(
            samples.iter().all(|s| s.result.is_ok()),
            "no caller-visible error"
        );
        let flushed: Vec<_> = samples.iter().filter(|s| s.at < flushed_until).collect();
        let fallback = flushed
            .iter()
            .filter(|s| s.source() == Some(Source::Fallback))
            .count();
        eprintln!(
            "SCRIPT FLUSH ×5: {} calls, {fallback} from the fallback, {} script loads in all",
            flushed.len(),
            primary.script_loads()
        );
        assert_eq!(
            fallback, 0,
            "NOSCRIPT is handled inside the store, without failing over"
        );
        assert_eq!(samples.last().unwrap().source(), Some(Source::Store));
    });
}

#[test]
fn three_instances_share_the_limit_during_an_outage() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let (burst, rate) = (30u64, 60u64);
        let policy = Policy::token_bucket("shared", rate, Duration::from_secs(1), burst).unwrap();
        let mut loads = Vec::new();
        for _ in 0..3 {
            let store = resilient(redis(&server).await, 3);
            loads.push(Load::start(store, policy.clone(), b"hot", 4, Duration::from_millis(2)));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        tokio::task::block_in_place(|| server.kill9());
        tokio::time::sleep(Duration::from_millis(1500)).await;
        // The outage as the fallbacks saw it: the longest span over which
        // one decided (the loads go on until they are stopped, however
        // late a loaded machine gets to that).
        let (mut admitted, mut outage) = (0u64, Duration::ZERO);
        for load in loads {
            // Each instance on its own: one share over every interval.
            let samples = load.finish().await;
            let counted = assert_bounded("3 instances", &samples, Share::of(burst, rate, 3));
            admitted += counted.fallback;
            outage = outage.max(counted.span);
        }
        // Each instance's share: burst/3 now, rate/3 a second.
        let share = burst / 3 + rate * (outage.as_micros() as u64 + 1_000) / 3_000_000;
        let global = burst + rate * outage.as_millis() as u64 / 1000;
        eprintln!("3 instances, expected_instances = 3: {admitted} admitted over {outage:?}; bound 3 × {share}, global {global}");
        assert!(admitted <= 3 * share, "{admitted} > 3 × {share}");
        assert!(admitted >= burst / 3 * 3, "each instance admits at least its share of the burst");
    });
}

#[test]
fn the_deny_cache_spares_redis_under_a_flood() {
    let server = RedisServer::start();
    runtime().block_on(async {
        // Client time on a clock that stands at the start of a minute: the
        // window cannot turn (and admit again) during the flood. Deadlines
        // no loaded machine reaches: a call timed out would be answered by
        // the local fallback, which is not what this test is about.
        let clock = ManualClock::new(1_800_000_000_000_000);
        let redis = RedisStore::builder([server.url()])
            .deadline(PATIENCE)
            .time_source(TimeSource::Client(Arc::new(clock.clone())))
            .connect()
            .await
            .expect("connect");
        let store = ResilientStore::builder(Arc::new(redis))
            .deadline(PATIENCE)
            .on_failure(OnFailure::Local)
            .clock(Arc::new(clock))
            .build()
            .unwrap();
        let policy = Policy::fixed_window("flood", 10, Duration::from_secs(60)).unwrap();
        for _ in 0..10 {
            assert!(store.check(&policy, b"k", 1).await.unwrap().allowed);
        }
        let calls = |s: &RedisServer| -> u64 {
            s.cli(&["INFO", "commandstats"])
                .lines()
                .filter(|l| l.starts_with("cmdstat_evalsha:"))
                .filter_map(|l| {
                    l.split("calls=")
                        .nth(1)?
                        .split(',')
                        .next()?
                        .parse::<u64>()
                        .ok()
                })
                .sum()
        };
        let before = calls(&server);
        let mut denied = 0u64;
        for _ in 0..5000 {
            let d = store.check(&policy, b"k", 1).await.unwrap();
            assert!(!d.allowed);
            denied += 1;
        }
        let per_denial = (calls(&server) - before) as f64 / denied as f64;
        eprintln!("deny cache: {denied} denials, {per_denial:.4} Redis calls per denial");
        assert!(per_denial < 0.01);
        // A smaller cost is never answered from the cache: here it fails
        // too, but only Redis may say so.
        let small = store.check(&policy, b"k", 0).await.unwrap();
        assert_eq!(small.source, Source::Store);
    });
}

#[test]
fn a_cluster_failover_under_load_heals() {
    use tollgate_testkit::RedisCluster;
    let node_timeout = Duration::from_millis(1000);
    let cluster = RedisCluster::builder(3, 1)
        .node_timeout(node_timeout)
        .start();
    runtime().block_on(async {
        // A bare RedisStore, so that every failure shows as an error.
        let store = Arc::new(
            RedisStore::builder(cluster.seed_urls())
                .deadline(DEADLINE)
                .connect()
                .await
                .unwrap(),
        );
        let (rate, burst) = (200u64, 50u64);
        let policy = Arc::new(Policy::token_bucket("fo", rate, Duration::from_secs(1), burst).unwrap());
        let primary = cluster.primary_for_key(&store.key_of(&policy, b"hot"));
        let replica = cluster.replicas_of(primary)[0];
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        /// Calls each task makes once answered after the failover.
        const AFTER: usize = 20;
        let start = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let failed_over = Arc::new(AtomicBool::new(false));
        // Tasks answered AFTER times since the failover.
        let done = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let (store, policy) = (store.clone(), policy.clone());
                let (stop, failed_over, done) = (stop.clone(), failed_over.clone(), done.clone());
                tokio::spawn(async move {
                    // Per call: whether it started after the failover,
                    // answered, allowed.
                    let mut seen = Vec::new();
                    let mut answered_after = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let after = failed_over.load(Ordering::Relaxed);
                        let r = tokio::time::timeout(Duration::from_secs(2), store.check(&policy, b"hot", 1)).await;
                        let ok = matches!(&r, Ok(Ok(_)));
                        let allowed = matches!(&r, Ok(Ok(d)) if d.allowed);
                        if after && ok {
                            answered_after += 1;
                            if answered_after == AFTER {
                                done.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        seen.push((after, ok, allowed));
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    seen
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let failover_at = start.elapsed();
        tokio::task::block_in_place(|| cluster.failover(replica));
        let done_at = start.elapsed();
        failed_over.store(true, Ordering::Relaxed);
        // Every task answered again, however long that takes on this machine.
        while done.load(Ordering::Relaxed) < 8 {
            assert!(
                start.elapsed() < done_at + PATIENCE,
                "{} of 8 tasks answered {AFTER} times after the failover",
                done.load(Ordering::Relaxed)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stop.store(true, Ordering::Relaxed);
        let mut all = Vec::new();
        let mut late_errors = 0;
        for t in tasks {
            let seen = t.await.unwrap();
            // From a task's first answer after the failover on (its map
            // refreshed), every call answered.
            late_errors += seen
                .iter()
                .filter(|(after, ..)| *after)
                .skip_while(|(_, ok, _)| !ok)
                .filter(|(_, ok, _)| !ok)
                .count();
            all.extend(seen);
        }
        let run = start.elapsed();
        let errors = all.iter().filter(|(_, ok, _)| !ok).count();
        let admitted = all.iter().filter(|(.., allowed)| *allowed).count() as u64;
        let bound = burst + rate * run.as_millis() as u64 / 1000;
        eprintln!(
            "CLUSTER FAILOVER: took {:?}, {errors} errors in all, {late_errors} once answered again; \
             admitted {admitted} over {run:?} (bound {bound}, + one burst allowed)",
            done_at - failover_at
        );
        assert_eq!(late_errors, 0, "errors after a task was answered again");
        assert!(admitted <= bound + burst, "over-admission beyond one burst: {admitted} > {bound} + {burst}");
    });
}

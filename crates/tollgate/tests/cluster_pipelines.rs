//! Per-primary pipelining on a Redis Cluster: busy callers' calls leave
//! grouped by the primary that holds their key's slot, and each caller
//! still gets its own answer.

#![cfg(feature = "redis")]

use std::sync::Arc;
use std::time::Duration;

use tollgate::Policy;
use tollgate::store::Store;
use tollgate::store::redis::RedisStore;
use tollgate_testkit::RedisCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_callers_on_a_cluster_share_pipelines_per_primary() {
    let cluster = RedisCluster::start(3, 0);
    let policies = Arc::new([
        Policy::fixed_window("fw", 5, Duration::from_secs(364 * 86_400)).unwrap(),
        Policy::token_bucket("tb", 7, Duration::from_secs(3600), 5).unwrap(),
        Policy::gcra("gcra", 1, Duration::from_secs(3600), 5).unwrap(),
    ]);
    // With a deadline too: window checks are not grouped on a cluster
    // (a group's keys would span slots).
    for (pipelining, deadline) in [(true, None), (true, Some(10)), (false, None)] {
        let mut builder = RedisStore::builder(cluster.seed_urls())
            .prefix(format!("{pipelining}-{deadline:?}:"))
            .pipelining(pipelining);
        if let Some(seconds) = deadline {
            builder = builder.deadline(Duration::from_secs(seconds));
        }
        let store = Arc::new(builder.connect().await.unwrap());
        // Keys over every primary: 256 callers, each on its own key, the
        // first five checks admitted and the next three denied.
        let tasks = 256;
        let start = Arc::new(tokio::sync::Barrier::new(tasks));
        let handles: Vec<_> = (0..tasks)
            .map(|t| {
                let (store, policies, start) = (store.clone(), policies.clone(), start.clone());
                tokio::spawn(async move {
                    let p = &policies[t % policies.len()];
                    let key = format!("k{t}");
                    start.wait().await;
                    let mut seen = Vec::new();
                    for _ in 0..8 {
                        let d = store.check(p, key.as_bytes(), 1).await.unwrap();
                        seen.push((d.allowed, d.remaining));
                    }
                    (t, seen)
                })
            })
            .collect();
        let expected: Vec<_> = [(true, 4), (true, 3), (true, 2), (true, 1), (true, 0)]
            .into_iter()
            .chain([(false, 0); 3])
            .collect();
        for h in handles {
            let (t, seen) = h.await.unwrap();
            assert_eq!(seen, expected, "task {t}, pipelining {pipelining}");
        }
        let sent = store.pipelined();
        eprintln!("pipelining {pipelining}: {sent:?}");
        if pipelining {
            assert!(
                sent.calls > sent.pipelines,
                "no pipeline carried two calls: {sent:?}"
            );
        } else {
            assert_eq!(sent, Default::default());
        }
    }
}

/// A primary killed under busy callers, enough that calls queue behind
/// each primary's flushes in flight: no call hangs, and once its replica
/// has taken over every caller is answered again, each count exact. (64
/// callers: at 256, redis-rs's cluster connection itself, with per-primary
/// pipelining off too, left calls unanswered for over a minute after such
/// a kill.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_under_busy_callers_heals() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Instant;

    /// Calls each caller makes once answered after the failover.
    const AFTER: usize = 5;
    let cluster = RedisCluster::builder(3, 1)
        .node_timeout(Duration::from_millis(1000))
        .start();
    let store = Arc::new(
        RedisStore::builder(cluster.seed_urls())
            .connect_timeout(Duration::from_millis(500))
            .connect()
            .await
            .unwrap(),
    );
    let policy =
        Arc::new(Policy::fixed_window("kill", 1 << 40, Duration::from_secs(3600)).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let healed = Arc::new(AtomicBool::new(false));
    // Callers answered AFTER times since the failover.
    let done = Arc::new(AtomicUsize::new(0));
    let callers: Vec<_> = (0..64)
        .map(|c| {
            let (store, policy) = (store.clone(), policy.clone());
            let (stop, healed, done) = (stop.clone(), healed.clone(), done.clone());
            tokio::spawn(async move {
                // Per call: whether it started after the failover, and the
                // count left it saw (`None` for an error).
                let mut seen = Vec::new();
                let key = format!("k{c}");
                let mut answered_after = 0;
                while !stop.load(Ordering::Relaxed) {
                    let after = healed.load(Ordering::Relaxed);
                    let call = store.check(&policy, key.as_bytes(), 1);
                    let patience = tollgate_testkit::PATIENCE;
                    let Ok(r) = tokio::time::timeout(patience, call).await else {
                        panic!("caller {c}: a call unanswered after {patience:?}");
                    };
                    if after && r.is_ok() {
                        answered_after += 1;
                        if answered_after == AFTER {
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    seen.push((after, r.ok().map(|d| d.remaining)));
                }
                seen
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let victim = cluster.primary_for_key(&store.key_of(&policy, b"k0"));
    tokio::task::block_in_place(|| {
        victim.kill9();
        cluster.wait_until_stable();
    });
    healed.store(true, Ordering::Relaxed);
    // Every caller answered again, however long the map's refresh takes
    // on this machine.
    let t = Instant::now();
    while done.load(Ordering::Relaxed) < 64 {
        assert!(
            t.elapsed() < tollgate_testkit::PATIENCE,
            "{} of 64 callers answered {AFTER} times after the failover",
            done.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for caller in callers {
        let seen = caller.await.unwrap();
        // From a caller's first answer after the failover on (the map
        // refreshed for its key), every call answered, one apart from the
        // last (a key of the killed primary restarts from the replica's
        // copy at most once, before this).
        let after: Vec<Option<u64>> = seen
            .iter()
            .filter(|s| s.0)
            .map(|s| s.1)
            .skip_while(Option::is_none)
            .collect();
        assert!(
            after.iter().all(Option::is_some),
            "an error after the caller was answered again: {after:?}"
        );
        let after: Vec<u64> = after.into_iter().flatten().collect();
        assert!(after.len() >= AFTER, "{after:?}");
        assert!(
            after.windows(2).all(|w| w[1] + 1 == w[0]),
            "counts not one apart after the failover: {after:?}"
        );
    }
}

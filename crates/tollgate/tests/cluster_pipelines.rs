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

//! Atomic batches on a real 3-primary Redis Cluster, 64 concurrent
//! callers: a batch is admitted whole or not at all, and no member is
//! ever admitted beyond its limit. Policies of one group keep a subject's
//! state in one slot, so a batch over one key is one script. The figures
//! are printed; run with `--nocapture` to see them.
#![cfg(feature = "redis")]

use std::sync::Arc;
use std::time::Duration;

use tollgate::store::redis::RedisStore;
use tollgate::{Policy, Request, Store};
use tollgate_testkit::{RedisCluster, key_slot};

const CALLERS: usize = 64;
const ROUNDS: usize = 4;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Three limits on one subject, none of them refilling within the test
/// (an hour per unit), so each admits exactly its limit.
fn three(group: Option<&str>) -> Vec<Policy> {
    let hour = Duration::from_secs(3600);
    let policies = vec![
        Policy::token_bucket("tb", 1, hour, 30).unwrap(),
        Policy::gcra("gcra", 1, hour, 40).unwrap(),
        Policy::leaky_bucket("lb", 1, hour, 50).unwrap(),
    ];
    match group {
        Some(g) => policies
            .into_iter()
            .map(|p| p.with_group(g).unwrap())
            .collect(),
        None => policies,
    }
}

/// `CALLERS` tasks each send `ROUNDS` atomic batches of `policies` on
/// `key`; returns how many batches were admitted. Every batch must come
/// back all admitted or all denied.
async fn hammer(store: Arc<RedisStore>, policies: Arc<Vec<Policy>>, key: &'static [u8]) -> u64 {
    let tasks: Vec<_> = (0..CALLERS)
        .map(|_| {
            let (store, policies) = (store.clone(), policies.clone());
            tokio::spawn(async move {
                let mut admitted = 0u64;
                for _ in 0..ROUNDS {
                    let requests: Vec<Request<'_>> = policies
                        .iter()
                        .map(|policy| Request {
                            policy,
                            key,
                            cost: 1,
                        })
                        .collect();
                    let decisions = store.check_many(&requests, true).await.unwrap();
                    let allowed = decisions.iter().filter(|d| d.allowed).count();
                    assert!(
                        allowed == 0 || allowed == decisions.len(),
                        "a batch admitted in part: {decisions:?}"
                    );
                    admitted += u64::from(allowed > 0);
                }
                admitted
            })
        })
        .collect();
    let mut admitted = 0;
    for t in tasks {
        admitted += t.await.unwrap();
    }
    admitted
}

/// What each policy has left for `key`, by a peek.
async fn remaining(store: &RedisStore, policies: &[Policy], key: &[u8]) -> Vec<u64> {
    let mut left = Vec::new();
    for policy in policies {
        left.push(store.check(policy, key, 0).await.unwrap().remaining);
    }
    left
}

#[test]
fn same_key_batches_over_a_group_are_one_slot_and_never_over_admit() {
    let cluster = RedisCluster::start(3, 0);
    runtime().block_on(async {
        let store = Arc::new(
            RedisStore::builder(cluster.seed_urls())
                .connect()
                .await
                .unwrap(),
        );
        assert!(store.is_cluster());
        let policies = Arc::new(three(Some("user")));
        let slots: Vec<u16> = policies
            .iter()
            .map(|p| key_slot(&store.key_of(p, b"subject")))
            .collect();
        assert!(slots.iter().all(|s| *s == slots[0]), "one slot: {slots:?}");
        let admitted = hammer(store.clone(), policies.clone(), b"subject").await;
        let left = remaining(&store, &policies, b"subject").await;
        eprintln!(
            "GROUPED atomic batches on a 3-primary cluster: {CALLERS} callers × {ROUNDS}, \
             {admitted} admitted (limits 30, 40, 50); left {left:?}"
        );
        assert_eq!(admitted, 30, "exactly the smallest limit");
        assert_eq!(
            left,
            vec![0, 10, 20],
            "each member consumed exactly the admitted batches"
        );
    });
}

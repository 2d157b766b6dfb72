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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_key_batches_over_a_group_are_one_slot_and_never_over_admit() {
    let cluster = RedisCluster::start(3, 0);
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
}

/// A key whose three ungrouped policies' states are in three slots, the
/// first policy's (the smallest limit) last in slot order: a batch denied
/// by it has consumed the other two first, and refunds them.
fn key_with_first_policy_last(store: &RedisStore, policies: &[Policy]) -> &'static [u8] {
    for n in 0.. {
        let key: &'static [u8] = Box::leak(format!("subject-{n}").into_bytes().into_boxed_slice());
        let slots: Vec<u16> = policies
            .iter()
            .map(|p| key_slot(&store.key_of(p, key)))
            .collect();
        if slots[0] > slots[1] && slots[0] > slots[2] && slots[1] != slots[2] {
            return key;
        }
    }
    unreachable!()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_slot_batches_are_all_or_nothing_by_refunds() {
    let cluster = RedisCluster::start(3, 0);
    let store = Arc::new(
        RedisStore::builder(cluster.seed_urls())
            .connect()
            .await
            .unwrap(),
    );
    let policies = Arc::new(three(None));
    let key = key_with_first_policy_last(&store, &policies);
    let admitted = hammer(store.clone(), policies.clone(), key).await;
    let left = remaining(&store, &policies, key).await;
    let refunds = store.batch_refunds();
    eprintln!(
        "CROSS-SLOT atomic batches on a 3-primary cluster: {CALLERS} callers × {ROUNDS}, \
         {admitted} admitted (limits 30, 40, 50; three slots); left {left:?}; {refunds} refunds issued"
    );
    assert_eq!(admitted, 30, "exactly the smallest limit");
    assert_eq!(
        left,
        vec![0, 10, 20],
        "every member consumed exactly the admitted batches: refunds gave back all the rest"
    );
    // A denied batch refunds what the slots before the denying one
    // consumed: at most two units. (Many are denied in the first
    // slot: the batches in flight hold the spare units of `gcra` and
    // `lb` while they wait for `tb`.)
    let denied = (CALLERS * ROUNDS) as u64 - admitted;
    assert!(
        refunds > 0 && refunds <= 2 * denied,
        "{refunds} refunds for {denied} denied batches"
    );
}

/// Between a slot's consume and its refund, a batch that will be denied
/// holds capacity: a concurrent single request may be denied though it
/// would have passed. That hold is bounded by the batches in flight, and
/// it ends with the refund: afterwards every unit is there again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_cross_slot_batch_holds_capacity_only_until_its_refund() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    const BATCHERS: usize = 32;
    const SINGLES: usize = 32;
    let cluster = RedisCluster::start(3, 0);
    let store = Arc::new(
        RedisStore::builder(cluster.seed_urls())
            .connect()
            .await
            .unwrap(),
    );
    let hour = Duration::from_secs(3600);
    let shared = Policy::token_bucket("shared", 1, hour, 20).unwrap();
    let spent = Policy::token_bucket("spent", 1, hour, 1).unwrap();
    // `shared` first in slot order, so every batch consumes it, is
    // denied by `spent`, and refunds it.
    let key: &'static [u8] = (0..)
        .map(|n| -> &'static [u8] { Box::leak(format!("k{n}").into_bytes().into_boxed_slice()) })
        .find(|k| key_slot(&store.key_of(&shared, k)) < key_slot(&store.key_of(&spent, k)))
        .unwrap();
    assert!(store.check(&spent, key, 1).await.unwrap().allowed);
    let policies = Arc::new([shared, spent]);
    let stop = Arc::new(AtomicBool::new(false));
    let singles_admitted = Arc::new(AtomicU64::new(0));
    let batchers: Vec<_> = (0..BATCHERS)
        .map(|_| {
            let (store, policies, stop) = (store.clone(), policies.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let requests = [
                        Request {
                            policy: &policies[0],
                            key,
                            cost: 1,
                        },
                        Request {
                            policy: &policies[1],
                            key,
                            cost: 1,
                        },
                    ];
                    let d = store.check_many(&requests, true).await.unwrap();
                    assert!(d.iter().all(|d| !d.allowed));
                }
            })
        })
        .collect();
    // Watches how much of `shared` is held: what is left by its
    // singles (counted as they return) minus what a peek sees.
    let watcher = {
        let (store, policies, stop, singles_admitted) = (
            store.clone(),
            policies.clone(),
            stop.clone(),
            singles_admitted.clone(),
        );
        tokio::spawn(async move {
            let mut max_held = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let before = singles_admitted.load(Ordering::SeqCst);
                let seen = store.check(&policies[0], key, 0).await.unwrap().remaining;
                max_held = max_held.max((20 - before).saturating_sub(seen));
            }
            max_held
        })
    };
    // The singles start once the batchers are under way.
    let by = std::time::Instant::now() + Duration::from_secs(10);
    while store.batch_refunds() < BATCHERS as u64 && std::time::Instant::now() < by {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let singles: Vec<_> = (0..SINGLES)
        .map(|_| {
            let (store, policies, singles_admitted) =
                (store.clone(), policies.clone(), singles_admitted.clone());
            tokio::spawn(async move {
                let mut denied_with_room = 0u64;
                for _ in 0..2 {
                    let d = store.check(&policies[0], key, 1).await.unwrap();
                    if d.allowed {
                        singles_admitted.fetch_add(1, Ordering::SeqCst);
                    } else if singles_admitted.load(Ordering::SeqCst) < 20 {
                        denied_with_room += 1;
                    }
                }
                denied_with_room
            })
        })
        .collect();
    let mut denied_with_room = 0;
    for s in singles {
        denied_with_room += s.await.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for b in batchers {
        b.await.unwrap();
    }
    let max_held = watcher.await.unwrap();
    let during = singles_admitted.load(Ordering::SeqCst);
    // The storm is over: every held unit is back, and the singles get
    // exactly what is left.
    let mut after = 0;
    while store.check(&policies[0], key, 1).await.unwrap().allowed {
        after += 1;
    }
    eprintln!(
        "CROSS-SLOT hold: {BATCHERS} denied batchers beside {SINGLES} single callers on a limit of 20: \
         {during} singles admitted during, {denied_with_room} denied before the 20th was counted, \
         at most {max_held} units held at once; {after} admitted after; {} refunds issued",
        store.batch_refunds()
    );
    assert_eq!(during + after, 20, "no unit lost, none over");
    // A unit is held only by a batch in flight (one each), and a
    // single admitted but not yet counted looks held too.
    assert!(
        max_held <= (BATCHERS + SINGLES) as u64,
        "{max_held} units held at once"
    );
    assert!(store.batch_refunds() > 0);
}

/// A caller's clock that moves 1 ms at every read: each step of a batch
/// across slots reads it, so a window can turn between a consume and its
/// refund.
#[derive(Debug)]
struct Ticking(std::sync::atomic::AtomicU64);

impl tollgate::Clock for Ticking {
    fn now_micros(&self) -> u64 {
        self.0.fetch_add(1000, std::sync::atomic::Ordering::SeqCst)
    }
}

/// A fixed window's unit consumed just before its window ends is not
/// refunded after it: the refund would come out of the next window. The
/// same batch well inside the window is refunded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_that_could_come_out_of_the_next_window_is_not_made() {
    use std::sync::atomic::Ordering;
    use tollgate::store::redis::TimeSource;
    let cluster = RedisCluster::start(3, 0);
    let window = Policy::fixed_window("win", 10, Duration::from_secs(1)).unwrap();
    let spent = Policy::token_bucket("spent", 1, Duration::from_secs(3600), 1).unwrap();
    // A whole second, in µs.
    let second = 1_800_000_000_000_000u64;
    for (prefix, start, refunds) in [
        // Reads: 1 before the first slot's call, 2 its time (the consume),
        // 3 and 4 the second slot's, 5 whether the refund is exact.
        ("turning:", second + 1_000_000 - 2_000, 0),
        ("inside:", second + 100_000, 1),
    ] {
        let clock = Arc::new(Ticking(std::sync::atomic::AtomicU64::new(
            start - 10_000_000,
        )));
        let store = RedisStore::builder(cluster.seed_urls())
            .prefix(prefix)
            .time_source(TimeSource::Client(clock.clone()))
            .connect()
            .await
            .unwrap();
        let key: &'static [u8] = (0..)
            .map(|n| -> &'static [u8] {
                Box::leak(format!("k{n}").into_bytes().into_boxed_slice())
            })
            .find(|k| key_slot(&store.key_of(&window, k)) < key_slot(&store.key_of(&spent, k)))
            .unwrap();
        assert!(store.check(&spent, key, 1).await.unwrap().allowed);
        clock.0.store(start, Ordering::SeqCst);
        let batch = [
            Request {
                policy: &window,
                key,
                cost: 1,
            },
            Request {
                policy: &spent,
                key,
                cost: 1,
            },
        ];
        let decisions = store.check_many(&batch, true).await.unwrap();
        assert!(decisions.iter().all(|d| !d.allowed), "{decisions:?}");
        assert_eq!(store.batch_refunds(), refunds, "{prefix}");
    }
}

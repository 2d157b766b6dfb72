//! The cases. Each takes a harness (a store and what the case needs to see
//! behind it) and the manual clock the store reads.
//!
//! Kept whole on purpose: it is the one suite every store runs, and its cases share one harness.

use std::sync::Arc;
use std::time::Duration;

use tollgate::algorithm::State;
use tollgate::store::deferred::DeferredStore;
use tollgate::store::leasing::LeasingStore;
use tollgate::store::resilient::OnFailure;
#[cfg(feature = "redis")]
use tollgate::store::resilient::ResilientStore;
use tollgate::{Decision, Error, ManualClock, MemoryStore, Policy, Request, Source, Store};

/// A store under test, and a view of what it holds.
pub(crate) struct Harness {
    pub(crate) store: Box<dyn Store>,
    backend: Backend,
}

enum Backend {
    Memory(MemoryStore<ManualClock>),
    #[cfg(feature = "redis")]
    Redis {
        prefix: String,
        nodes: Vec<String>,
    },
    /// A resilient store whose primary (a Redis store) is down and whose
    /// breaker is open: every answer comes from its failure policy.
    #[cfg(feature = "redis")]
    Fallback {
        store: ResilientStore,
        mode: OnFailure,
        _server: tollgate_testkit::RedisServer,
    },
}

impl Harness {
    pub(crate) fn memory(clock: ManualClock) -> Harness {
        let store = MemoryStore::with_clock(clock);
        Harness {
            store: Box::new(store.clone()),
            backend: Backend::Memory(store),
        }
    }

    #[cfg(feature = "redis")]
    pub(crate) async fn redis(urls: Vec<String>, clock: ManualClock) -> Harness {
        use std::sync::atomic::{AtomicU64, Ordering};
        use tollgate::store::redis::{RedisStore, TimeSource};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let prefix = format!("conf{}:", NEXT.fetch_add(1, Ordering::Relaxed));
        let store = RedisStore::builder(urls.clone())
            .prefix(prefix.clone())
            .time_source(TimeSource::Client(Arc::new(clock)))
            .connect()
            .await
            .expect("connect to the test server");
        Harness {
            store: Box::new(store),
            backend: Backend::Redis {
                prefix,
                nodes: urls,
            },
        }
    }

    /// A resilient store over a Redis store whose server is killed, its
    /// breaker open, answering by `mode`; its local fallback reads `clock`.
    #[cfg(feature = "redis")]
    pub(crate) async fn fallback(mode: OnFailure, clock: ManualClock) -> Harness {
        use std::time::Duration;
        use tollgate::store::redis::RedisStore;
        use tollgate::store::resilient::BreakerState;
        let server = tollgate_testkit::RedisServer::start();
        let redis = RedisStore::builder([server.url()])
            .connect()
            .await
            .expect("connect to the test server");
        server.kill9();
        let store = ResilientStore::builder(Arc::new(redis))
            .on_failure(mode)
            .failure_threshold(1)
            .probe_interval(Duration::from_secs(60), Duration::from_secs(60))
            .clock(Arc::new(clock))
            .build()
            .unwrap();
        // A reset touches no state that stays: it fails on the dead server
        // and opens the breaker.
        let probe = Policy::fixed_window("open-the-breaker", 1, secs(1)).unwrap();
        let reset = store.reset(&probe, b"k").await;
        assert_eq!(reset, Err(Error::StoreUnavailable));
        assert_eq!(store.breaker_state(), BreakerState::Open);
        Harness {
            store: Box::new(store.clone()),
            backend: Backend::Fallback {
                store,
                mode,
                _server: server,
            },
        }
    }

    /// This harness's store behind a [`LeasingStore`]: the cases' policies
    /// do not opt into leases, and a leasing store passes every call on
    /// such a policy through (its contract), so it must pass every case the
    /// wrapped store passes. Leased policies answer from batches, which is
    /// not the exact model these cases compare with: their bound is
    /// `tests/leasing/`'s.
    pub(crate) fn leasing(self) -> Harness {
        let store: Arc<dyn Store> = Arc::from(self.store);
        Harness {
            store: Box::new(LeasingStore::new(store)),
            backend: self.backend,
        }
    }

    /// This harness's store behind a [`DeferredStore`] whose connection
    /// has been made (it answers as the store it connected to; before
    /// that, every call fails as unavailable, which `tests/faults/startup.rs`
    /// covers).
    pub(crate) async fn deferred(self) -> Harness {
        let store: Arc<dyn Store> = Arc::from(self.store);
        let deferred = DeferredStore::connect(Duration::from_millis(10), move || {
            let store = store.clone();
            Box::pin(async move { Ok(store) })
        });
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !deferred.is_connected() {
            assert!(std::time::Instant::now() < deadline, "never connected");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Harness {
            store: Box::new(deferred),
            backend: self.backend,
        }
    }

    /// The failure policy answering, when the primary store is down.
    pub(crate) fn failure_policy(&self) -> Option<OnFailure> {
        match &self.backend {
            #[cfg(feature = "redis")]
            Backend::Fallback { mode, .. } => Some(*mode),
            _ => None,
        }
    }

    /// The decision `want` as this store reports it: from its local
    /// fallback when the primary store is down.
    pub(crate) fn sourced(&self, want: Decision) -> Decision {
        match self.failure_policy() {
            Some(_) => want.with_source(Source::Fallback),
            None => want,
        }
    }

    /// The keys the store holds for this harness, each with its TTL in ms
    /// (memory: `None`, it keeps an expiry per entry by construction).
    pub(crate) fn keys(&self) -> Vec<(Vec<u8>, Option<i64>)> {
        match &self.backend {
            Backend::Memory(m) => vec![(Vec::new(), None); m.len()],
            #[cfg(feature = "redis")]
            Backend::Fallback { store, .. } => vec![(Vec::new(), None); store.fallback_keys()],
            #[cfg(feature = "redis")]
            Backend::Redis { prefix, nodes, .. } => {
                let mut out = Vec::new();
                for url in nodes {
                    let client = redis::Client::open(url.as_str()).unwrap();
                    let mut con = client.get_connection().unwrap();
                    let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut con).unwrap();
                    if role.first() != Some(&redis::Value::BulkString(b"master".to_vec())) {
                        continue; // replicas answer MOVED; their primary is listed too
                    }
                    let keys: Vec<Vec<u8>> = redis::cmd("KEYS")
                        .arg(format!("{prefix}*"))
                        .query(&mut con)
                        .unwrap();
                    for key in keys {
                        let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut con).unwrap();
                        out.push((key, Some(ttl)));
                    }
                }
                out
            }
        }
    }

    /// Checks what every case must leave behind: no key without a TTL.
    pub(crate) async fn finish(self) {
        self.assert_ttls_above(0, "every key must expire");
    }

    /// Every key that has a TTL (Redis) has more than `ms` left.
    pub(crate) fn assert_ttls_above(&self, ms: i64, why: &str) {
        for (key, ttl) in self.keys() {
            if let Some(ttl) = ttl {
                assert!(
                    ttl > ms,
                    "key {:?} has PTTL {ttl}: {why}",
                    String::from_utf8_lossy(&key)
                );
            }
        }
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// One policy of every algorithm but concurrency, with rates that do not
/// divide their periods (so the exact fractions are exercised).
fn policies() -> Vec<Policy> {
    vec![
        Policy::fixed_window("fw", 7, Duration::from_millis(1_500)).unwrap(),
        Policy::sliding_window("sw", 9, secs(2)).unwrap(),
        Policy::sliding_log("sl", 6, Duration::from_millis(1_700)).unwrap(),
        Policy::token_bucket("tb", 3, secs(1), 5).unwrap(),
        Policy::gcra("gcra", 7, secs(3), 4).unwrap(),
        Policy::leaky_bucket("lb", 5, secs(2), 4).unwrap(),
    ]
}

/// The reference: the pure algorithm on a local state per key.
struct Model {
    states: Vec<((String, Vec<u8>), State)>,
}

impl Model {
    fn new() -> Model {
        Model { states: Vec::new() }
    }

    fn decide(
        &mut self,
        policy: &Policy,
        key: &[u8],
        now: u64,
        cost: u64,
        max_wait: u64,
    ) -> Decision {
        let id = (policy.name().to_string(), key.to_vec());
        let slot = match self.states.iter().position(|(k, _)| *k == id) {
            Some(i) => i,
            None => {
                self.states.push((id, policy.algorithm().fresh_state()));
                self.states.len() - 1
            }
        };
        policy
            .algorithm()
            .decide(&mut self.states[slot].1, now, cost, max_wait)
    }
}

pub(crate) async fn decisions_match_the_algorithms(h: &Harness, clock: &ManualClock) {
    let mut rng = fastrand::Rng::with_seed(7);
    let mut model = Model::new();
    let keys: [&[u8]; 3] = [b"alice", b"bob", b"carol"];
    let policies = policies();
    let mut allowed = 0;
    for step in 0..400 {
        let gap = match rng.u8(..4) {
            0 => 0,
            1 => rng.u64(..1_000),
            2 => rng.u64(..20_000),
            _ => rng.u64(..400_000),
        };
        clock.advance(Duration::from_micros(gap));
        let policy = &policies[rng.usize(..policies.len())];
        let key = keys[rng.usize(..keys.len())];
        let cost = rng.u64(..=policy.limit());
        let got = h.store.check(policy, key, cost).await.unwrap();
        let want = model.decide(policy, key, tollgate::Clock::now_micros(clock), cost, 0);
        assert_eq!(
            got,
            h.sourced(want),
            "step {step}: {} cost {cost}",
            policy.name()
        );
        allowed += got.allowed as u32;
    }
    assert!(
        allowed > 50 && allowed < 390,
        "a mix of answers: {allowed} allowed"
    );
}

pub(crate) async fn reservations_match_the_algorithms(h: &Harness, clock: &ManualClock) {
    let mut rng = fastrand::Rng::with_seed(11);
    let mut model = Model::new();
    let policies = [
        Policy::token_bucket("rtb", 3, secs(1), 4).unwrap(),
        Policy::gcra("rgcra", 3, secs(1), 4).unwrap(),
    ];
    let mut waited = 0;
    for step in 0..200 {
        clock.advance(Duration::from_micros(rng.u64(..400_000)));
        let policy = &policies[step % 2];
        let cost = rng.u64(1..=4);
        let max_wait = rng.u64(..3_000_000);
        let got = h
            .store
            .reserve(policy, b"k", cost, Duration::from_micros(max_wait))
            .await
            .unwrap();
        let want = model.decide(
            policy,
            b"k",
            tollgate::Clock::now_micros(clock),
            cost,
            max_wait,
        );
        assert_eq!(
            got,
            h.sourced(want),
            "step {step}: {} cost {cost} max_wait {max_wait}",
            policy.name()
        );
        waited += (got.allowed && !got.delay.is_zero()) as u32;
    }
    assert!(waited > 10, "some reservations waited: {waited}");
}

/// A late request (its time behind the bucket's, as from an application
/// server whose clock is behind) is decided at the bucket's time, and the
/// store keeps the state until the bucket is full again on the bucket's
/// time: a state forgotten sooner (an expiry counted from the bucket's
/// time, but started at the late request) would hand the next caller a
/// full bucket early. Decisions match the algorithm, and on Redis the key's
/// TTL covers the whole reset.
pub(crate) async fn a_late_request_keeps_the_bucket_until_it_is_full(
    h: &Harness,
    clock: &ManualClock,
) {
    // 3 a second, 5 at most: a token is 1/3 s.
    let tb = Policy::token_bucket("late-tb", 3, secs(1), 5).unwrap();
    let mut model = Model::new();
    let t0 = tollgate::Clock::now_micros(clock);
    let mut decide = async |at: u64, cost: u64| {
        clock.set(at);
        let got = h.store.check(&tb, b"k", cost).await.unwrap();
        let want = model.decide(&tb, b"k", at, cost, 0);
        assert_eq!(
            got,
            h.sourced(want),
            "cost {cost} at t0 {:+} µs",
            at as i64 - t0 as i64
        );
        got
    };
    assert!(decide(t0, 3).await.allowed);
    // 2 s late: 2 tokens at the bucket's time, so 3 are too many, and 1
    // leaves 4 missing, full again 4/3 s after the bucket's time.
    let denied = decide(t0 - 2_000_000, 3).await;
    assert!(!denied.allowed);
    assert_eq!(denied.retry_after, Duration::from_micros(2_333_334));
    let late = decide(t0 - 2_000_000, 1).await;
    assert!(late.allowed);
    assert_eq!(late.remaining, 1);
    assert_eq!(late.reset_after, Duration::from_micros(3_333_334));
    // Less a second for a slow machine between the call and now.
    h.assert_ttls_above(2_333, "the key must live until the bucket is full");
    // Half a second on: 2.5 tokens missing, so 1 left after one more.
    let on_time = decide(t0 + 500_000, 1).await;
    assert_eq!((on_time.allowed, on_time.remaining), (true, 1));
    assert_eq!(decide(t0 + 3_000_000, 0).await.remaining, 5);
}

pub(crate) async fn peeks_and_denials_consume_nothing(h: &Harness, _clock: &ManualClock) {
    for policy in policies() {
        let fresh = h.store.check(&policy, b"p", 0).await.unwrap();
        assert!(fresh.allowed);
        assert_eq!(fresh.remaining, policy.limit(), "{}", policy.name());
        let all = h.store.check(&policy, b"p", policy.limit()).await.unwrap();
        assert!(all.allowed, "{}", policy.name());
        assert_eq!(all.remaining, 0);
        for _ in 0..3 {
            let denied = h.store.check(&policy, b"p", 1).await.unwrap();
            assert!(!denied.allowed, "{}", policy.name());
            assert!(!denied.retry_after.is_zero());
        }
        let peek = h.store.check(&policy, b"p", 0).await.unwrap();
        assert_eq!(peek.remaining, 0, "{}", policy.name());
    }
}

/// A policy in shadow mode is decided and counted as usual, and a denial
/// is answered as an admission marked `shadow` with the denial's fields.
pub(crate) async fn shadow_policies_count_but_never_deny(h: &Harness, _clock: &ManualClock) {
    for policy in policies() {
        let shadow = policy.clone().shadow();
        let all = h.store.check(&shadow, b"s", policy.limit()).await.unwrap();
        assert!(all.allowed && !all.shadow, "{}", policy.name());
        for _ in 0..2 {
            let d = h.store.check(&shadow, b"s", 1).await.unwrap();
            assert!(d.allowed && d.shadow, "{}: {d:?}", policy.name());
            assert_eq!(d.remaining, 0, "{}", policy.name());
            assert!(!d.retry_after.is_zero(), "{}", policy.name());
        }
        let batch = [Request {
            policy: &shadow,
            key: b"s",
            cost: 1,
        }];
        let d = h.store.check_many(&batch, false).await.unwrap();
        assert!(d[0].allowed && d[0].shadow, "{}", policy.name());
        // the same policy without shadow mode sees the state it left
        let real = h.store.check(&policy, b"s", 1).await.unwrap();
        assert!(!real.allowed && !real.shadow, "{}", policy.name());
    }
}

pub(crate) async fn keys_are_isolated(h: &Harness, _clock: &ManualClock) {
    let policy = Policy::fixed_window("iso", 2, secs(60)).unwrap();
    let other = Policy::fixed_window("iso2", 2, secs(60)).unwrap();
    let keys: [&[u8]; 9] = [
        b"a",
        b"a}",
        b"{a}",
        b"a\\]",
        b"a\\",
        b"a b\nc",
        &[0xff, 0xfe, 0x00, 0x7b],
        b"}{",
        &[b'x'; tollgate::MAX_KEY_LEN],
    ];
    for key in keys {
        let d = h.store.check(&policy, key, 2).await.unwrap();
        assert!(d.allowed, "{key:?} starts fresh");
        assert_eq!(d.remaining, 0);
    }
    for key in keys {
        assert!(
            !h.store.check(&policy, key, 1).await.unwrap().allowed,
            "{key:?}"
        );
        assert!(
            h.store.check(&other, key, 1).await.unwrap().allowed,
            "{key:?} under another policy"
        );
    }
}

pub(crate) async fn bad_input_is_rejected_before_the_store(h: &Harness, _clock: &ManualClock) {
    let fw = Policy::fixed_window("bad", 5, secs(1)).unwrap();
    let tb = Policy::token_bucket("badtb", 1, secs(1), 5).unwrap();
    let cc = Policy::concurrency("badcc", 2, secs(5)).unwrap();
    let long = vec![b'k'; tollgate::MAX_KEY_LEN + 1];
    assert!(matches!(
        h.store.check(&fw, b"", 1).await,
        Err(Error::InvalidKey { .. })
    ));
    assert!(matches!(
        h.store.check(&fw, &long, 1).await,
        Err(Error::InvalidKey { .. })
    ));
    assert!(matches!(
        h.store.check(&fw, b"k", 6).await,
        Err(Error::CostExceedsLimit {
            cost: 6,
            limit: 5,
            ..
        })
    ));
    assert_eq!(
        h.store
            .reserve(&fw, b"k", 1, secs(1))
            .await
            .unwrap_err()
            .code(),
        "unsupported"
    );
    assert!(matches!(
        h.store.reserve(&tb, b"k", 1, secs(10_000_000_000)).await,
        Err(Error::InvalidArgument {
            field: "max_wait",
            ..
        })
    ));
    assert_eq!(
        h.store.check(&cc, b"k", 1).await.unwrap_err().code(),
        "unsupported"
    );
    assert_eq!(
        h.store.acquire_lease(&fw, b"k").await.unwrap_err().code(),
        "unsupported"
    );
    let batch = [
        Request {
            policy: &fw,
            key: b"k",
            cost: 1,
        },
        Request {
            policy: &fw,
            key: b"",
            cost: 1,
        },
    ];
    assert!(h.store.check_many(&batch, false).await.is_err());
    assert!(h.keys().is_empty(), "bad input wrote nothing");
    let peek = h.store.check(&fw, b"k", 0).await;
    #[cfg(feature = "redis")]
    if h.failure_policy() == Some(OnFailure::Deny) {
        assert_eq!(peek, Err(Error::StoreUnavailable), "good input, store down");
        return;
    }
    assert_eq!(peek.unwrap().remaining, 5);
}

pub(crate) async fn leases_are_limited_released_and_expire(h: &Harness, clock: &ManualClock) {
    let cc = Policy::concurrency("jobs", 2, secs(30)).unwrap();
    let a = h.store.acquire_lease(&cc, b"w").await.unwrap();
    let b = h.store.acquire_lease(&cc, b"w").await.unwrap();
    assert!(a.decision.allowed && b.decision.allowed);
    assert_eq!(b.decision.remaining, 0);
    let c = h.store.acquire_lease(&cc, b"w").await.unwrap();
    assert!(!c.decision.allowed);
    assert!(c.id.is_none());
    assert_eq!(c.decision.retry_after, secs(30));
    assert!(
        h.store
            .release_lease(&cc, b"w", a.id.unwrap())
            .await
            .unwrap()
    );
    assert!(
        !h.store
            .release_lease(&cc, b"w", a.id.unwrap())
            .await
            .unwrap(),
        "idempotent"
    );
    let d = h.store.acquire_lease(&cc, b"w").await.unwrap();
    assert!(d.decision.allowed);
    clock.advance(secs(30));
    // Both held leases expired by themselves.
    let e = h.store.acquire_lease(&cc, b"w").await.unwrap();
    assert!(e.decision.allowed);
    assert_eq!(e.decision.remaining, 1);
}

pub(crate) async fn reset_forgets_a_key(h: &Harness, _clock: &ManualClock) {
    for policy in policies() {
        assert!(
            h.store
                .check(&policy, b"r", policy.limit())
                .await
                .unwrap()
                .allowed
        );
        assert!(!h.store.check(&policy, b"r", 1).await.unwrap().allowed);
        match h.store.reset(&policy, b"r").await {
            Ok(()) => assert!(h.failure_policy().is_none()),
            // The store could not forget the key; the local fallback has.
            Err(Error::StoreUnavailable) => assert!(h.failure_policy().is_some()),
            Err(e) => panic!("reset: {e}"),
        }
        assert!(
            h.store.check(&policy, b"r", 1).await.unwrap().allowed,
            "{}",
            policy.name()
        );
    }
}

pub(crate) async fn atomic_batches_are_all_or_nothing(h: &Harness, _clock: &ManualClock) {
    let per_user = Policy::fixed_window("user", 3, secs(60)).unwrap();
    let per_ip = Policy::token_bucket("ip", 1, secs(60), 2).unwrap();
    let batch = [
        Request {
            policy: &per_user,
            key: b"u1",
            cost: 1,
        },
        Request {
            policy: &per_ip,
            key: b"10.0.0.1",
            cost: 1,
        },
    ];
    // On a cluster the two policies hash to different slots: decided slot
    // by slot, a denial refunding what an earlier slot consumed.
    for _ in 0..2 {
        let d = h.store.check_many(&batch, true).await.unwrap();
        assert!(d.iter().all(|d| d.allowed), "{d:?}");
    }
    // The IP bucket is empty now: the batch fails, and the user's window
    // must not be charged for it.
    let d = h.store.check_many(&batch, true).await.unwrap();
    assert!(!d[0].allowed && d[0].retry_after.is_zero(), "{:?}", d[0]);
    let twice = [batch[0], batch[0]];
    let err = h.store.check_many(&twice, true).await.unwrap_err();
    assert_eq!(err.code(), "invalid_argument", "{err}");
    assert!(!d[1].allowed && !d[1].retry_after.is_zero(), "{:?}", d[1]);
    assert_eq!(
        h.store.check(&per_user, b"u1", 0).await.unwrap().remaining,
        1
    );
}

pub(crate) async fn non_atomic_batches_decide_each(h: &Harness, _clock: &ManualClock) {
    let a = Policy::fixed_window("na", 1, secs(60)).unwrap();
    let b = Policy::sliding_log("nb", 2, secs(60)).unwrap();
    let batch = [
        Request {
            policy: &a,
            key: b"k",
            cost: 1,
        },
        Request {
            policy: &b,
            key: b"k",
            cost: 1,
        },
    ];
    let first = h.store.check_many(&batch, false).await.unwrap();
    assert!(first.iter().all(|d| d.allowed));
    let second = h.store.check_many(&batch, false).await.unwrap();
    assert!(!second[0].allowed && second[1].allowed, "{second:?}");
}

/// With its primary store down, a resilient store answers every valid
/// operation by its failure policy: `local` from its local limiter,
/// `allow` admitted, `deny` refused with `store_unavailable` (never a fake
/// denial); each answer marked as the fallback's.
#[cfg(feature = "redis")]
pub(crate) async fn the_failure_policy_answers_every_operation(h: &Harness, _clock: &ManualClock) {
    let mode = h
        .failure_policy()
        .expect("a harness whose primary store is down");
    let fw = Policy::fixed_window("fp-fw", 2, secs(60)).unwrap();
    let tb = Policy::token_bucket("fp-tb", 1, secs(60), 2).unwrap();
    let cc = Policy::concurrency("fp-cc", 1, secs(60)).unwrap();
    let batch = [
        Request {
            policy: &fw,
            key: b"b",
            cost: 1,
        },
        Request {
            policy: &tb,
            key: b"b",
            cost: 1,
        },
    ];
    for round in 0..3 {
        let check = h.store.check(&fw, b"k", 1).await;
        let reserve = h.store.reserve(&tb, b"k", 1, Duration::ZERO).await;
        let many = h.store.check_many(&batch, true).await;
        let lease = h.store.acquire_lease(&cc, b"k").await;
        match mode {
            OnFailure::Deny => {
                for r in [check, reserve] {
                    assert_eq!(r, Err(Error::StoreUnavailable));
                }
                assert_eq!(many, Err(Error::StoreUnavailable));
                assert_eq!(lease, Err(Error::StoreUnavailable));
            }
            OnFailure::Allow => {
                for d in [check.unwrap(), reserve.unwrap()]
                    .into_iter()
                    .chain(many.unwrap())
                    .chain([lease.unwrap().decision])
                {
                    assert!(d.allowed, "round {round}: {d:?}");
                    assert_eq!(d.source, Source::Fallback);
                }
            }
            _ => {
                // The local limiter: two of each, then denials.
                let within = round < 2;
                let lease = lease.unwrap();
                for d in [check.unwrap(), reserve.unwrap()]
                    .into_iter()
                    .chain(many.unwrap())
                {
                    assert_eq!(d.allowed, within, "round {round}: {d:?}");
                    assert_eq!(d.source, Source::Fallback);
                }
                assert_eq!(lease.decision.allowed, round == 0, "one lease");
                assert_eq!(lease.decision.source, Source::Fallback);
            }
        }
    }
}

/// The settle guarantee, under concurrency: 8 tasks each admit requests
/// with an estimated cost and settle them with their actual cost (some
/// below, some above, some equal), interleaved with one another; the
/// clock stands still, so nothing refills or ages out, and what the key
/// has used at the end is exactly the sum of the actual costs of the
/// admitted requests. A refund lost or a charge applied twice shows.
pub(crate) async fn settled_usage_adds_up_to_the_actual_costs(h: &Harness, _clock: &ManualClock) {
    use std::sync::atomic::{AtomicU64, Ordering};
    let hour = Duration::from_secs(3600);
    let limit = 5_000;
    let policies = [
        Policy::fixed_window("settle-fw", limit, hour).unwrap(),
        Policy::sliding_window("settle-sw", limit, hour).unwrap(),
        Policy::sliding_log("settle-sl", limit, hour).unwrap(),
        Policy::token_bucket("settle-tb", 1, hour, limit).unwrap(),
        Policy::gcra("settle-gcra", 1, hour, limit).unwrap(),
        Policy::leaky_bucket("settle-lb", 1, hour, limit).unwrap(),
    ];
    for policy in &policies {
        let actual_total = AtomicU64::new(0);
        let store = &h.store;
        let tasks = (0..8u64).map(|t| {
            let actual_total = &actual_total;
            async move {
                let mut rng = fastrand::Rng::with_seed(t);
                for _ in 0..25 {
                    let estimate = rng.u64(1..=12);
                    let actual = rng.u64(0..=24);
                    let d = store.check(policy, b"settle", estimate).await.unwrap();
                    if d.allowed {
                        tokio::task::yield_now().await;
                        store
                            .settle(policy, b"settle", estimate, actual)
                            .await
                            .unwrap();
                        actual_total.fetch_add(actual, Ordering::Relaxed);
                    }
                }
            }
        });
        futures_util::future::join_all(tasks).await;
        let used = actual_total.into_inner();
        let name = policy.algorithm().name();
        assert!(used > 0 && used < limit, "{name}: {used}");
        let peek = h.store.check(policy, b"settle", 0).await.unwrap();
        assert_eq!(peek.remaining, limit - used, "{name}");
    }
}

/// With its primary store down, a resilient store answers no usage
/// operation from its fallback, whatever its failure policy: a usage
/// record is refused with `store_unavailable` for the caller to keep and
/// retry, never dropped and never kept only in a local limiter; bad input
/// is still refused as such.
#[cfg(feature = "redis")]
pub(crate) async fn usage_is_never_answered_by_the_fallback(h: &Harness, _clock: &ManualClock) {
    let fw = Policy::fixed_window("fb-usage", 10, secs(60)).unwrap();
    let cc = Policy::concurrency("fb-usage-cc", 1, secs(60)).unwrap();
    for round in 0..3 {
        for op in [
            tollgate::Usage::Charge,
            tollgate::Usage::Refund,
            tollgate::Usage::AtMost,
        ] {
            let r = h.store.usage(&fw, b"k", op, 3).await;
            assert_eq!(r, Err(Error::StoreUnavailable), "round {round}: {op:?}");
        }
        let r = h.store.settle(&fw, b"k", 5, 2).await;
        assert_eq!(r, Err(Error::StoreUnavailable), "round {round}");
        let bad = h.store.charge(&cc, b"k", 1).await.unwrap_err();
        assert_eq!(bad.code(), "unsupported");
        let bad = h.store.charge(&fw, b"", 1).await.unwrap_err();
        assert_eq!(bad.code(), "invalid_key");
        let tb = Policy::token_bucket("fb-held", 10, secs(1), 100).unwrap();
        let r = h.store.take_held(&tb, b"k", 5, secs(1)).await;
        assert_eq!(r, Err(Error::StoreUnavailable), "round {round}");
    }
}

/// A held take's exact refund, on a token bucket and GCRA: a take of 30
/// refunded 12 leaves the key exactly as a take of 18 at the same moment
/// leaves its twin (the refund's decision is the twin's take's, and the
/// same requests after get the same answers), whether the refund comes
/// within the hold or after it; a key moved by a check in between is not
/// touched (and its twin, which had no refund, agrees); a refund of all
/// of it is never fresher than before the take; bad refunds are refused.
pub(crate) async fn held_batches_refund_exactly(h: &Harness, clock: &ManualClock) {
    let hold = secs(2);
    let buckets = [
        Policy::token_bucket("held-tb", 10, secs(1), 100).unwrap(),
        Policy::gcra("held-gcra", 10, secs(1), 100).unwrap(),
    ];
    let s: &dyn Store = &*h.store;
    let keys: [&[u8]; 7] = [b"a", b"a2", b"moved", b"moved2", b"late", b"late2", b"all"];
    for policy in &buckets {
        for key in keys {
            s.charge(policy, key, 3).await.unwrap();
        }
    }
    let mut late_stamps = Vec::new();
    for policy in &buckets {
        let name = policy.algorithm().name();
        let taken = s.take_held(policy, b"a", 30, hold).await.unwrap();
        assert_eq!(taken.decision.granted, 30, "{name}");
        let stamp = taken.stamp.expect("a held grant has a stamp");
        assert_eq!(stamp.granted(), 30, "{name}");
        let twin = s.take_held(policy, b"a2", 18, hold).await.unwrap();
        let refunded = s.refund_held(policy, b"a", stamp, 12).await.unwrap();
        let refunded = refunded.unwrap_or_else(|| panic!("{name}: the refund applies"));
        assert_eq!(refunded.remaining, twin.decision.remaining, "{name}");
        assert_eq!(refunded.reset_after, twin.decision.reset_after, "{name}");
        same_bucket(s, policy, b"a", b"a2").await;
        // Spent: the state moved, a second refund does nothing.
        assert_eq!(s.refund_held(policy, b"a", stamp, 1).await.unwrap(), None);

        let moved = s.take_held(policy, b"moved", 30, hold).await.unwrap();
        s.take_held(policy, b"moved2", 30, hold).await.unwrap();
        for key in [&b"moved"[..], b"moved2"] {
            assert!(s.check(policy, key, 1).await.unwrap().allowed, "{name}");
        }
        let stamp = moved.stamp.unwrap();
        assert_eq!(
            s.refund_held(policy, b"moved", stamp, 12).await.unwrap(),
            None
        );
        same_bucket(s, policy, b"moved", b"moved2").await;

        // Refunded after the hold ended, below.
        let late = s.take_held(policy, b"late", 30, hold).await.unwrap();
        s.take_held(policy, b"late2", 18, hold).await.unwrap();
        late_stamps.push(late.stamp.unwrap());

        let before = s.check(policy, b"all", 0).await.unwrap().remaining;
        let all = s.take_held(policy, b"all", 30, hold).await.unwrap();
        let stamp = all.stamp.unwrap();
        for (units, code) in [(0, "invalid_argument"), (31, "invalid_argument")] {
            let bad = s
                .refund_held(policy, b"all", stamp, units)
                .await
                .unwrap_err();
            assert_eq!(bad.code(), code, "{name}: {units} units");
        }
        let bad = s.refund_held(policy, b"", stamp, 1).await.unwrap_err();
        assert_eq!(bad.code(), "invalid_key");
        s.refund_held(policy, b"all", stamp, 30)
            .await
            .unwrap()
            .unwrap();
        let after = s.check(policy, b"all", 0).await.unwrap().remaining;
        assert!(
            after <= before,
            "{name}: {after} left, {before} before the take"
        );
    }
    let window = Policy::fixed_window("held-fw", 10, secs(60)).unwrap();
    let bad = s
        .refund_held(&window, b"k", late_stamps[0], 1)
        .await
        .unwrap_err();
    assert_eq!(bad.code(), "unsupported");
    clock.advance(Duration::from_millis(2_500));
    for (policy, stamp) in buckets.iter().zip(late_stamps) {
        let refunded = s.refund_held(policy, b"late", stamp, 12).await.unwrap();
        assert!(refunded.is_some(), "{}: after the hold", policy.name());
        same_bucket(s, policy, b"late", b"late2").await;
    }
}

/// Two keys are the same bucket: the same answers to the same requests
/// (a peek, then taking all there is, which leaves both alike).
async fn same_bucket(s: &dyn Store, policy: &Policy, a: &[u8], b: &[u8]) {
    let name = policy.algorithm().name();
    for _ in 0..2 {
        let (x, y) = (s.check(policy, a, 0).await, s.check(policy, b, 0).await);
        assert_eq!(x.unwrap(), y.unwrap(), "{name}: peeks");
    }
    let (x, y) = (
        s.check_at_most(policy, a, 1000).await.unwrap(),
        s.check_at_most(policy, b, 1000).await.unwrap(),
    );
    assert_eq!(x, y, "{name}: taking all there is");
}

//! Charge, refund and check_at_most where the differential test does not
//! reach: the server-clock forms, and through a resilient store.
use super::*;

/// Charge, refund and check_at_most in the server-clock forms (the fixed
/// window that keeps what is left with its window's expiry, and the
/// buckets whose TAT is their key's expiry), where the differential test
/// (client time) does not reach: a charge past the limit puts the key in
/// debt and every request is denied, alone and in an atomic batch, and the
/// key still expires; a refund pays the debt back; check_at_most grants
/// what is left. Hour-long windows and slow rates, so the server's clock
/// moving on changes nothing.
#[test]
fn usage_in_the_server_clock_forms() {
    let server = standalone();
    runtime().block_on(async {
        let store = connect(vec![server.url()], TimeSource::Server, "usage").await;
        let hour = Duration::from_secs(3600);
        let policies = [
            Policy::fixed_window("fw-usage", 10, hour).unwrap(),
            Policy::token_bucket("tb-usage", 1, hour, 10).unwrap(),
            Policy::gcra("gcra-usage", 1, hour, 10).unwrap(),
            Policy::leaky_bucket("lb-usage", 1, hour, 10).unwrap(),
        ];
        for policy in &policies {
            let name = policy.name();
            let key = store.key_of(policy, b"k");
            assert!(
                [":fws:3600000:10", ":tbs", ":gcras", ":lbs"]
                    .iter()
                    .any(|tag| key.ends_with(tag.as_bytes())),
                "{name}: the server-clock form is used"
            );
            let d = store.check_at_most(policy, b"k", 4).await.unwrap();
            assert_eq!((d.allowed, d.granted, d.remaining), (true, 4, 6), "{name}");
            let d = store.charge(policy, b"k", 9).await.unwrap();
            assert!(!d.allowed, "{name}: 13 of 10 does not fit");
            assert_eq!(d.remaining, 0, "{name}");
            assert!(d.retry_after > Duration::ZERO, "{name}");
            let d = store.check(policy, b"k", 1).await.unwrap();
            assert!(!d.allowed, "{name}: in debt, a check is denied");
            assert_eq!(d.remaining, 0, "{name}");
            let peek = store.check(policy, b"k", 0).await.unwrap();
            assert_eq!(peek.remaining, 0, "{name}");
            let batch = [Request {
                policy,
                key: b"k",
                cost: 1,
            }];
            let d = store.check_many(&batch, true).await.unwrap();
            assert!(!d[0].allowed, "{name}: denied in a batch too");
            let d = store.check_at_most(policy, b"k", 5).await.unwrap();
            assert_eq!((d.allowed, d.granted), (false, 0), "{name}");
            // 13 used: a refund of 4 leaves 9, so 1 is left.
            let d = store.refund(policy, b"k", 4).await.unwrap();
            assert!(d.allowed, "{name}");
            assert_eq!(d.remaining, 1, "{name}");
            let d = store.check_at_most(policy, b"k", 5).await.unwrap();
            assert_eq!((d.allowed, d.granted, d.remaining), (true, 1, 0), "{name}");
            // Refunding more than was used leaves a fresh key: no key.
            let d = store.refund(policy, b"k", 100).await.unwrap();
            assert_eq!((d.remaining, d.reset_after), (10, Duration::ZERO), "{name}");
            let exists: bool = redis::cmd("EXISTS")
                .arg(&key)
                .query_async(
                    &mut redis::Client::open(server.url())
                        .unwrap()
                        .get_multiplexed_async_connection()
                        .await
                        .unwrap(),
                )
                .await
                .unwrap();
            assert!(!exists, "{name}: a fresh state is no key");
            store.charge(policy, b"k", 25).await.unwrap();
        }
    });
    Deployment::Standalone.assert_every_key_expires();
}

/// Usage through a `ResilientStore`: passed through to Redis while it
/// answers; while it does not, an error, whatever the failure policy (a
/// usage record is never dropped, nor kept only in the local fallback),
/// while checks keep being answered by the fallback.
#[test]
fn usage_through_a_resilient_store_is_never_dropped() {
    use tollgate::store::resilient::{OnFailure, ResilientStore};
    let server = RedisServer::start();
    runtime().block_on(async {
        let redis = RedisStore::builder([server.url()])
            .prefix(fresh_prefix("resilient-usage"))
            .deadline(Duration::from_millis(200))
            .connect()
            .await
            .unwrap();
        let store = ResilientStore::builder(Arc::new(redis.clone()))
            .deadline(Duration::from_millis(200))
            .on_failure(OnFailure::Local)
            .build()
            .unwrap();
        let policy =
            Policy::fixed_window("resilient-usage", 10, Duration::from_secs(3600)).unwrap();
        let d = store.charge(&policy, b"k", 12).await.unwrap();
        assert!(!d.allowed);
        // The charge reached Redis.
        assert!(!redis.check(&policy, b"k", 1).await.unwrap().allowed);
        let d = store.refund(&policy, b"k", 5).await.unwrap();
        assert_eq!(d.remaining, 3);
        let d = store.check_at_most(&policy, b"k", 9).await.unwrap();
        assert_eq!(d.granted, 3);
        server.kill9();
        let e = store.charge(&policy, b"k", 1).await.unwrap_err();
        assert_eq!(e.code(), "store_unavailable");
        let e = store.settle(&policy, b"k", 3, 1).await.unwrap_err();
        assert_eq!(e.code(), "store_unavailable");
        let d = store.check(&policy, b"k", 1).await.unwrap();
        assert_eq!(d.source, tollgate::Source::Fallback);
    });
}

/// One step of a usage trace: a check (`None`) or a usage operation.
type Step = (Option<Usage>, u64);

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let op = prop_oneof![
        Just(None),
        Just(Some(Usage::Charge)),
        Just(Some(Usage::Refund)),
        Just(Some(Usage::AtMost)),
        // Held whole intervals of these policies (an hour), so that the
        // server's clock moving on changes no answer either: none, one,
        // two, and past a small bucket's refill from empty (an error).
        (0..=13u64).prop_map(|h| Some(Usage::AtMostHeld(Duration::from_secs(3600 * h)))),
    ];
    // Small costs, and some past every bound: 2^47 to 2^52 take the
    // general usage scripts, whose numbers would not stay exact in the
    // check-shaped ones.
    let cost =
        prop_oneof![6 => 0..=4u64, 3 => 0..=30u64, 1 => (47..=52u32).prop_map(|e| 1u64 << e)];
    prop::collection::vec((op, cost), 1..30)
}

/// The server-clock forms decide usage as memory does, on random traces
/// of checks, charges, refunds and check_at_most, held or not (small costs, costs past
/// the limit into debt, and huge ones), with and without a deadline (whose
/// arguments the scripts take in other places): the same admissions,
/// remaining and grants, and a retry or a reset where memory has one.
/// Windows of 365 days and rates of 1 an hour, so the server's clock
/// moving on during a trace changes nothing.
fn server_clock_usage(deployment: Deployment) {
    let rt = runtime();
    let year = Duration::from_secs(365 * 86_400);
    let hour = Duration::from_secs(3600);
    let config = ProptestConfig {
        cases: 48,
        ..ProptestConfig::default()
    };
    let policies = prop_oneof![
        (1..=12u64).prop_map(move |l| Policy::fixed_window("fw", l, year).unwrap()),
        (1..=12u64).prop_map(move |b| Policy::token_bucket("tb", 1, hour, b).unwrap()),
        (1..=12u64).prop_map(move |b| Policy::gcra("gcra", 1, hour, b).unwrap()),
        (1..=12u64).prop_map(move |c| Policy::leaky_bucket("lb", 1, hour, c).unwrap()),
    ];
    proptest!(config, |(policy in policies, trace in steps(), deadline in any::<bool>())| {
        rt.block_on(async {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
            let memory = MemoryStore::with_clock(ManualClock::new(now.as_micros() as u64));
            let mut builder = RedisStore::builder(deployment.urls()).prefix(fresh_prefix("usage-diff"));
            if deadline {
                builder = builder.deadline(Duration::from_secs(30));
            }
            let redis = builder.connect().await.unwrap();
            for (i, &(op, cost)) in trace.iter().enumerate() {
                let (want, got) = match op {
                    None => (
                        memory.check(&policy, b"k", cost.min(policy.limit())).await,
                        redis.check(&policy, b"k", cost.min(policy.limit())).await,
                    ),
                    Some(op) => (
                        memory.usage(&policy, b"k", op, cost).await,
                        redis.usage(&policy, b"k", op, cost).await,
                    ),
                };
                let (want, got) = match (want, got) {
                    (Ok(want), Ok(got)) => (want, got),
                    // A hold on a window, or past the refill from empty.
                    (Err(want), Err(got)) => {
                        prop_assert_eq!(got.code(), want.code(), "step {} {:?}", i, op);
                        continue;
                    }
                    (want, got) => {
                        prop_assert!(false, "step {i} {op:?}: want {want:?}, got {got:?}");
                        unreachable!()
                    }
                };
                let seen = |d: &Decision| {
                    (d.allowed, d.remaining, d.granted, d.retry_after > Duration::ZERO, d.reset_after > Duration::ZERO)
                };
                prop_assert_eq!(seen(&got), seen(&want), "step {} {:?} of {} on {:?}", i, op, cost, policy);
            }
            Ok(())
        })?;
    });
    deployment.assert_every_key_expires();
}

#[test]
fn usage_in_the_server_clock_forms_decides_like_memory() {
    server_clock_usage(Deployment::Standalone);
}

#[test]
fn usage_in_the_server_clock_forms_decides_like_memory_on_a_cluster() {
    server_clock_usage(Deployment::Cluster);
}

/// The server-clock window's refund, whose cap at a full window the
/// script tests without the limit while the window's value is below 10^6
/// (fixed_window_server_refund.lua): a limit·16 of 8 digits and one of
/// exactly 10^6, which the script reads from the key's name, and one just
/// below, which it is passed; with and without a deadline (other
/// arguments, other forms). Refunds below, at and past a full window, of
/// cost 1 and more, as memory does.
#[test]
fn refund_caps_a_large_window_at_its_limit() {
    let server = standalone();
    runtime().block_on(async {
        for deadline in [false, true] {
            let mut builder =
                RedisStore::builder(vec![server.url()]).prefix(fresh_prefix("refund-cap"));
            if deadline {
                builder = builder.deadline(Duration::from_secs(30));
            }
            let redis = builder.connect().await.unwrap();
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
            let memory = MemoryStore::with_clock(ManualClock::new(now.as_micros() as u64));
            for limit in [1_000_000, 62_500, 62_499] {
                let name = format!("fw-cap-{limit}");
                let policy = Policy::fixed_window(&name, limit, Duration::from_secs(3600)).unwrap();
                let steps = [
                    (Usage::Charge, limit - 10),
                    (Usage::Refund, 1),
                    (Usage::Refund, 4),
                    (Usage::Refund, limit),
                    (Usage::Charge, 1),
                    (Usage::Refund, 1),
                    (Usage::Charge, 2),
                    (Usage::Refund, 3),
                    (Usage::Charge, limit + 5),
                    (Usage::Refund, 1),
                    (Usage::Refund, 6),
                    (Usage::Refund, limit),
                    (Usage::Charge, 3),
                    (Usage::Refund, 1),
                    (Usage::Refund, 1),
                    (Usage::Refund, 1),
                    (Usage::Refund, 1),
                ];
                for (i, (op, cost)) in steps.into_iter().enumerate() {
                    let want = memory.usage(&policy, b"k", op, cost).await.unwrap();
                    let got = redis.usage(&policy, b"k", op, cost).await.unwrap();
                    assert_eq!(
                        (got.allowed, got.remaining),
                        (want.allowed, want.remaining),
                        "limit {limit}, deadline {deadline}, step {i}: {op:?} of {cost}"
                    );
                }
                let d = redis.check(&policy, b"k", 1).await.unwrap();
                assert_eq!(
                    d.remaining,
                    limit - 1,
                    "a refund past a full window stops at it (limit {limit}, deadline {deadline})"
                );
            }
        }
    });
}

/// check_at_most on a bucket whose interval is 1 ms, which the script
/// takes without the interval: a backlog near the capacity grants the
/// whole ms that fit, and leaves nothing.
#[test]
fn check_at_most_on_a_bucket_of_one_ms() {
    let server = standalone();
    runtime().block_on(async {
        let store = connect(vec![server.url()], TimeSource::Server, "at-most-ms").await;
        let policy =
            Policy::token_bucket("tb-ms", 1000, Duration::from_secs(1), 1_000_000).unwrap();
        store.charge(&policy, b"k", 999_990).await.unwrap();
        let d = store.check_at_most(&policy, b"k", 100_000).await.unwrap();
        // 10 left, and one more for every ms since the charge.
        assert!(d.allowed);
        assert!((10..=10_000).contains(&d.granted), "{d:?}");
        assert_eq!(d.remaining, 0);
    });
}

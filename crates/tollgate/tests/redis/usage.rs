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

//! Client time: callers whose clocks disagree, and late requests.
use super::*;

/// Two callers in client time, one clock 300 ms behind the other, share a
/// fixed window of one per second. The one ahead takes the window's last
/// admission 1 ms before its end; on the server's clock, which runs the
/// key's TTL, the window is then over 1 ms later. The caller behind, still
/// inside that window on its clock, must find the count (and be denied, as
/// memory decides), not a missing key and a fresh window.
#[test]
fn a_caller_whose_clock_is_behind_finds_the_windows_count() {
    let rt = runtime();
    rt.block_on(async {
        let start = 1_700_000_000_000_000u64;
        let (ahead, behind) = (
            ManualClock::new(start + 999_000),
            ManualClock::new(start + 699_000),
        );
        let prefix = fresh_prefix("skew");
        let store = |clock: &ManualClock| {
            RedisStore::builder(Deployment::Standalone.urls())
                .prefix(prefix.clone())
                .time_source(TimeSource::Client(Arc::new(clock.clone())))
                .connect()
        };
        let (a, b) = (store(&ahead).await.unwrap(), store(&behind).await.unwrap());
        let policy = Policy::fixed_window("skew", 1, Duration::from_secs(1)).unwrap();
        assert!(a.check(&policy, b"k", 1).await.unwrap().allowed);
        tokio::time::sleep(Duration::from_millis(20)).await;
        let late = b.check(&policy, b"k", 1).await.unwrap();
        assert!(!late.allowed, "the count was gone: {late:?}");
        // On the clock ahead the next window opens.
        ahead.set(start + 1_000_000);
        assert!(a.check(&policy, b"k", 1).await.unwrap().allowed);
    });
    Deployment::Standalone.assert_every_key_expires();
}

/// Client time can arrive late: an application server whose clock is behind
/// another's. For every algorithm but the token bucket, only an admission
/// changes a state in both stores (a denial's rolled window is not kept;
/// the sliding log's trim is the same in both), so a late request decides
/// as the memory store decides at the same instant: it counts in the latest
/// window, never sees a fuller bucket or a shorter queue. Steps back stay
/// within the life of the state, and the memory store never sweeps, so
/// both stores hold the same state. Windows and rates are per minute, so
/// that a Redis key, whose TTL runs on the server's real clock while the
/// test's clock jumps, outlives the trace by seconds even on a busy
/// machine. (The token bucket in memory keeps the refill a denial
/// computed, which Redis does not write, so a late request after a denial
/// may find in memory the tokens refilled up to the denial's time; see
/// `TokenBucket::reserve_micros`.)
#[test]
fn late_client_time_requests_decide_as_memory() {
    let rt = runtime();
    let minute = Duration::from_secs(60);
    let policies = prop_oneof![
        (2..=5u64).prop_map(move |l| Policy::fixed_window("fw", l, minute).unwrap()),
        (2..=5u64).prop_map(move |l| Policy::sliding_window("sw", l, minute).unwrap()),
        (2..=5u64).prop_map(move |l| Policy::sliding_log("sl", l, minute).unwrap()),
        (1..=4u64, 2..=5u64).prop_map(move |(r, b)| Policy::gcra("gcra", r, minute, b).unwrap()),
        (1..=4u64, 2..=5u64)
            .prop_map(move |(r, c)| Policy::leaky_bucket("lb", r, minute, c).unwrap()),
    ];
    // Steps in thousandths of a minute (60 ms), a third of them back; costs
    // 1..=2 (a peek of expired state may forget it in memory, which a late
    // request would then see).
    let trace = prop::collection::vec((-300..=400i64, 1..=2u64), 1..30);
    let config = ProptestConfig {
        cases: 120,
        ..ProptestConfig::default()
    };
    proptest!(config, |(policy in policies, trace in trace, t0 in 1_600_000_000u64..1_800_000_000)| {
        rt.block_on(async {
            let clock = ManualClock::new(t0 * 1_000_000);
            let memory = MemoryStore::builder()
                .clock(clock.clone())
                .sweep_interval(Duration::from_secs(1 << 30))
                .build();
            let redis = connect(
                Deployment::Standalone.urls(),
                TimeSource::Client(Arc::new(clock.clone())),
                "late",
            )
            .await;
            let mut now = t0 * 1_000_000;
            for (i, (dt, cost)) in trace.iter().enumerate() {
                now = now.saturating_add_signed(dt * 60_000);
                clock.set(now);
                let want = memory.check(&policy, b"k", *cost).await.unwrap();
                let got = redis.check(&policy, b"k", *cost).await.unwrap();
                prop_assert_eq!(got, want, "step {} at {}µs on {:?}", i, now, policy);
            }
            Ok(())
        })?;
    });
    Deployment::Standalone.assert_every_key_expires();
}

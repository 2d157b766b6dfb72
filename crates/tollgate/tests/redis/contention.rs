//! Bounds under contention (server time): 64 tasks on one key per
//! algorithm, never more admitted than the algorithm allows.
use super::*;

/// An admitted request: the server decided it somewhere in `[sent, received]`
/// (µs, the machine's clock, which the local server's TIME also reads).
#[derive(Debug, Clone, Copy)]
struct Admitted {
    sent: u64,
    received: u64,
}

/// 64 tasks on one key for `run`, server time; returns what was admitted.
async fn hammer(store: Arc<RedisStore>, policy: Arc<Policy>, run: Duration) -> Vec<Admitted> {
    let end = unix_micros() + run.as_micros() as u64;
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let (store, policy) = (store.clone(), policy.clone());
        tasks.push(tokio::spawn(async move {
            let mut admitted = Vec::new();
            while unix_micros() < end {
                let sent = unix_micros();
                let d = store
                    .check(&policy, b"hot", 1)
                    .await
                    .expect("no errors under contention");
                if d.allowed {
                    admitted.push(Admitted {
                        sent,
                        received: unix_micros(),
                    });
                }
            }
            admitted
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort_by_key(|a| a.sent);
    all
}

/// The most admitted requests certainly inside one interval, over every
/// interval from a request's send to another's receipt: for each, how many
/// lie wholly inside, and the interval's length.
fn certain_intervals(admitted: &[Admitted], mut visit: impl FnMut(usize, u64)) {
    for (i, a) in admitted.iter().enumerate() {
        let mut ends: Vec<u64> = admitted[i..]
            .iter()
            .map(|b| b.received)
            .filter(|&r| r >= a.sent)
            .collect();
        ends.sort_unstable();
        for (n, &end) in ends.iter().enumerate() {
            visit(n + 1, end - a.sent);
        }
    }
}

/// At most `limit` admitted in each window of `w` µs, counting those
/// certainly inside one (sent and received in it); how many windows had any.
fn fixed_window_bound(admitted: &[Admitted], limit: u64, w: u64) -> usize {
    let mut per_window = std::collections::HashMap::new();
    for a in admitted {
        if a.sent / w == a.received / w {
            *per_window.entry(a.sent / w).or_insert(0u64) += 1;
        }
    }
    for (&k, &n) in &per_window {
        assert!(
            n <= limit,
            "fixed window {k} of {w}µs: {n} admitted, limit {limit}"
        );
    }
    per_window.len()
}

/// The most 2 s runs [`hammer_windows`] makes.
const HAMMERS: usize = 15;

/// Runs [`hammer`] on a fixed window of `w` µs, 2 s at a time, until its
/// admissions lie certainly inside (sent and answered in) at least two
/// windows, so that a boundary was crossed, or [`HAMMERS`] runs have been
/// made; every window holds at most `limit` throughout ([`fixed_window_bound`]
/// over all the runs' admissions: they are real ones on one key, in real
/// time). Returns how many windows had any. One run was not always
/// enough: on a loaded machine few calls to a cluster are answered inside
/// the 100 ms window they were sent in.
async fn hammer_windows(store: &Arc<RedisStore>, policy: Arc<Policy>, limit: u64, w: u64) -> usize {
    let mut admitted = Vec::new();
    let mut windows = 0;
    for _ in 0..HAMMERS {
        admitted.extend(hammer(store.clone(), policy.clone(), Duration::from_secs(2)).await);
        windows = fixed_window_bound(&admitted, limit, w);
        if windows >= 2 {
            break;
        }
    }
    windows
}

fn contention(deployment: Deployment) {
    let rt = runtime();
    rt.block_on(async {
        let store = Arc::new(connect(deployment.urls(), TimeSource::Server, "hot").await);
        let run = Duration::from_secs(2);

        // Fixed window: a minute-long window, so at most one boundary.
        let limit = 150;
        let w = 60_000_000u64;
        let fw = Arc::new(Policy::fixed_window("fw", limit, Duration::from_micros(w)).unwrap());
        let admitted = hammer(store.clone(), fw, run).await;
        fixed_window_bound(&admitted, limit, w);
        if admitted.first().unwrap().sent / w == admitted.last().unwrap().received / w {
            assert_eq!(
                admitted.len() as u64,
                limit,
                "one window, demand far above the limit"
            );
        }

        // Fixed window, 100 ms windows: some 20 boundaries, each the first
        // admission of a window, which drops the last window's count. (Only
        // requests sent and answered inside one window count, so a slow
        // machine sees fewer windows; two are enough to cross a boundary.)
        let (limit, w) = (8u64, 100_000u64);
        let fw = Arc::new(Policy::fixed_window("short", limit, Duration::from_micros(w)).unwrap());
        let windows = hammer_windows(&store, fw, limit, w).await;
        assert!(
            windows >= 2,
            "admissions in only {windows} windows of 100 ms over {HAMMERS} runs of 2 s"
        );

        // The same with a window of 100.5 ms, not whole ms: the form that
        // reads `TIME` on every call (fixed_window.lua) instead of the key
        // expiring with its window (fixed_window_server.lua).
        let w = 100_500u64;
        let fw = Policy::fixed_window("short-us", limit, Duration::from_micros(w)).unwrap();
        assert!(store.key_of(&fw, b"hot").ends_with(b":fw"));
        let windows = hammer_windows(&store, Arc::new(fw), limit, w).await;
        assert!(
            windows >= 2,
            "admissions in only {windows} windows of 100.5 ms over {HAMMERS} runs of 2 s"
        );

        // Sliding log: at most `limit` in every window-long interval.
        let (limit, w) = (40u64, 500_000u64);
        let sl = Arc::new(Policy::sliding_log("sl", limit, Duration::from_micros(w)).unwrap());
        let admitted = hammer(store.clone(), sl, run).await;
        assert!(
            admitted.len() as u64 >= limit,
            "the log admits its limit at least once"
        );
        certain_intervals(&admitted, |n, len| {
            if len < w {
                assert!(
                    n as u64 <= limit,
                    "sliding log: {n} admitted within {len}µs"
                );
            }
        });

        // Token bucket and GCRA: at most burst + rate·T in every interval T.
        // An interval of 10 ms takes the form whose key expires at the TAT
        // (bucket_expiry.lua), on the server's clock in whole ms: a request
        // is decided at the ms it reached the server in, which may begin
        // before it was sent, so intervals count from that ms. One of
        // 10.005 ms takes the buckets' own scripts, which read `TIME` in µs.
        for (policy, per, form) in [
            (
                Policy::token_bucket("tb", 100, Duration::from_secs(1), 20),
                1_000_000,
                "tbs",
            ),
            (
                Policy::gcra("gcra", 100, Duration::from_secs(1), 20),
                1_000_000,
                "gcras",
            ),
            (
                Policy::token_bucket("tb-us", 100, Duration::from_micros(1_000_500), 20),
                1_000_500,
                "tb",
            ),
            (
                Policy::gcra("gcra-us", 100, Duration::from_micros(1_000_500), 20),
                1_000_500,
                "gcra",
            ),
        ] {
            let policy = policy.unwrap();
            assert!(
                store
                    .key_of(&policy, b"hot")
                    .ends_with(format!(":{form}").as_bytes())
            );
            let mut admitted = hammer(store.clone(), Arc::new(policy.clone()), run).await;
            assert!(
                admitted.len() >= 20,
                "{}: the burst is admitted",
                policy.name()
            );
            // The server-clock forms' suffixes end in `s` (tbs, gcras).
            if form.ends_with('s') {
                for a in &mut admitted {
                    a.sent -= a.sent % 1000;
                }
                admitted.sort_by_key(|a| a.sent);
            }
            certain_intervals(&admitted, |n, len| {
                let bound = 20 + 100 * len / per;
                assert!(
                    n as u64 <= bound,
                    "{}: {n} admitted within {len}µs, bound {bound}",
                    policy.name()
                );
            });
        }

        // No lost updates: k concurrent requests on a fresh bucket.
        let k = 300u64;
        let slow =
            Arc::new(Policy::token_bucket("slow", 1, Duration::from_secs(3600), 1000).unwrap());
        let fw = Arc::new(Policy::fixed_window("count", 1000, Duration::from_secs(3600)).unwrap());
        for policy in [slow, fw] {
            let tasks: Vec<_> = (0..k)
                .map(|_| {
                    let (store, policy) = (store.clone(), policy.clone());
                    tokio::spawn(async move { store.check(&policy, b"fresh", 1).await.unwrap() })
                })
                .collect();
            for t in tasks {
                assert!(t.await.unwrap().allowed);
            }
            let left = store.check(&policy, b"fresh", 0).await.unwrap().remaining;
            assert_eq!(left, 1000 - k, "{}: every update kept", policy.name());
        }
    });
    deployment.assert_every_key_expires();
}

#[test]
fn contention_stays_within_bounds_standalone() {
    contention(Deployment::Standalone);
}

#[test]
fn contention_stays_within_bounds_on_a_cluster() {
    contention(Deployment::Cluster);
}

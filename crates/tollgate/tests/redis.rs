//! The Redis store against real servers that this binary starts: the same
//! decisions as memory on random traffic (client time), bounds under
//! contention (server time), no lost updates, TTLs on every key, script
//! cache flushes, bad input that never reaches Redis, and hash tags that
//! keep a user key's braces from moving it to another slot.
#![cfg(feature = "redis")]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proptest::prelude::*;
use tollgate::algorithm::LeaseId;
use tollgate::store::redis::{RedisStore, TimeSource};
use tollgate::store::{Request, Store};
use tollgate::{Decision, ManualClock, MemoryStore, Policy, Usage};
use tollgate_testkit::{RedisCluster, RedisServer, key_slot};

fn standalone() -> &'static RedisServer {
    static SERVER: OnceLock<RedisServer> = OnceLock::new();
    SERVER.get_or_init(RedisServer::start)
}

fn cluster() -> &'static RedisCluster {
    static CLUSTER: OnceLock<RedisCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| RedisCluster::start(3, 1))
}

#[derive(Clone, Copy, Debug)]
enum Deployment {
    Standalone,
    Cluster,
}

impl Deployment {
    fn urls(self) -> Vec<String> {
        match self {
            Deployment::Standalone => vec![standalone().url()],
            Deployment::Cluster => cluster().seed_urls(),
        }
    }

    /// Every key of every node has an expiry: scripts write a key and its
    /// TTL in one call, so this holds at any moment, not only at the end.
    fn assert_every_key_expires(self) {
        let missing = match self {
            Deployment::Standalone => tollgate_testkit::scan_keys_without_ttl(standalone()),
            Deployment::Cluster => cluster().scan_keys_without_ttl(),
        };
        assert!(missing.is_empty(), "keys without a TTL: {missing:?}");
    }
}

fn fresh_prefix(tag: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("t{}-{tag}:", NEXT.fetch_add(1, Ordering::Relaxed))
}

async fn connect(urls: Vec<String>, time: TimeSource, tag: &str) -> RedisStore {
    RedisStore::builder(urls)
        .prefix(fresh_prefix(tag))
        .time_source(time)
        .connect()
        .await
        .expect("connect to the test server")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

// ------------------------------------------------------------ differential

/// One operation of a random trace.
#[derive(Debug, Clone)]
enum Op {
    Check {
        key: usize,
        cost: u64,
    },
    Reserve {
        key: usize,
        cost: u64,
        max_wait: u64,
    },
    Acquire {
        key: usize,
    },
    Release {
        key: usize,
        lease: usize,
    },
    Batch {
        keys: Vec<usize>,
        cost: u64,
        atomic: bool,
    },
    Reset {
        key: usize,
    },
    /// A charge, a refund or a `check_at_most`.
    Usage {
        key: usize,
        op: Usage,
        cost: u64,
    },
}

/// User keys that a careless layout would mangle: braces, spaces,
/// newlines, bytes that are not UTF-8, the longest allowed, and one too
/// long (an error on both sides).
fn user_keys() -> Vec<Vec<u8>> {
    vec![
        b"user-42".to_vec(),
        b"{user-42}".to_vec(),
        b"}{".to_vec(),
        b"a b\nc\\".to_vec(),
        vec![0xff, 0xfe, 0x00, b'{'],
        vec![b'k'; tollgate::MAX_KEY_LEN],
        vec![b'k'; tollgate::MAX_KEY_LEN + 1],
    ]
}

fn any_policy() -> impl Strategy<Value = Policy> {
    let ms = |lo: u64, hi: u64| (lo..=hi).prop_map(Duration::from_millis);
    prop_oneof![
        (1..=10u64, ms(1, 5_000)).prop_map(|(l, w)| Policy::fixed_window("fw", l, w).unwrap()),
        (1..=10u64, ms(1, 5_000)).prop_map(|(l, w)| Policy::sliding_window("sw", l, w).unwrap()),
        (1..=10u64, ms(1, 5_000)).prop_map(|(l, w)| Policy::sliding_log("sl", l, w).unwrap()),
        (1..=7u64, ms(1, 3_000), 1..=10u64)
            .prop_map(|(r, p, b)| Policy::token_bucket("tb", r, p, b).unwrap()),
        (1..=7u64, ms(1, 3_000), 1..=10u64)
            .prop_map(|(r, p, b)| Policy::gcra("gcra", r, p, b).unwrap()),
        (1..=7u64, ms(1, 3_000), 1..=10u64)
            .prop_map(|(r, p, c)| Policy::leaky_bucket("lb", r, p, c).unwrap()),
        (1..=4u64, ms(1, 3_000)).prop_map(|(l, d)| Policy::concurrency("cc", l, d).unwrap()),
    ]
}

fn ops() -> impl Strategy<Value = Vec<(u64, Op)>> {
    let key = 0..user_keys().len();
    let cost = prop_oneof![4 => 0..=2u64, 1 => 0..=12u64];
    let op = prop_oneof![
        6 => (key.clone(), cost.clone()).prop_map(|(key, cost)| Op::Check { key, cost }),
        2 => (key.clone(), cost.clone(), 0..=2_000_000u64)
            .prop_map(|(key, cost, max_wait)| Op::Reserve { key, cost, max_wait }),
        3 => key.clone().prop_map(|key| Op::Acquire { key }),
        2 => (key.clone(), 0..8usize).prop_map(|(key, lease)| Op::Release { key, lease }),
        1 => (prop::collection::vec(key.clone(), 1..4), cost, any::<bool>())
            .prop_map(|(keys, cost, atomic)| Op::Batch { keys, cost, atomic }),
        1 => key.clone().prop_map(|key| Op::Reset { key }),
        // Costs past the limit: charges go into debt, check_at_most asks
        // for more than is left.
        6 => (key, prop_oneof![Just(Usage::Charge), Just(Usage::Refund), Just(Usage::AtMost)], prop_oneof![3 => 0..=4u64, 1 => 0..=40u64])
            .prop_map(|(key, op, cost)| Op::Usage { key, op, cost }),
    ];
    // Time steps in ms: many small, some across whole windows.
    let dt = prop_oneof![3 => Just(0u64), 4 => 0..=50u64, 2 => 0..=3_000u64];
    prop::collection::vec((dt, op), 1..40)
}

/// What one store answered to one operation, comparable across stores.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Decision(Decision),
    Decisions(Vec<Decision>),
    Lease(Decision, bool),
    Released(bool),
    Done,
    Error(&'static str),
}

/// Runs one operation; `leases` are this store's lease ids, in the order
/// taken, so both stores release "the same" lease.
async fn apply(store: &dyn Store, policy: &Policy, op: &Op, leases: &mut Vec<LeaseId>) -> Answer {
    let keys = user_keys();
    let result = match op {
        Op::Check { key, cost } => store
            .check(policy, &keys[*key], *cost)
            .await
            .map(Answer::Decision),
        Op::Reserve {
            key,
            cost,
            max_wait,
        } => store
            .reserve(policy, &keys[*key], *cost, Duration::from_micros(*max_wait))
            .await
            .map(Answer::Decision),
        Op::Acquire { key } => store.acquire_lease(policy, &keys[*key]).await.map(|l| {
            if let Some(id) = l.id {
                leases.push(id);
            }
            Answer::Lease(l.decision, l.id.is_some())
        }),
        Op::Release { key, lease } => match leases.get(*lease) {
            Some(&id) => store
                .release_lease(policy, &keys[*key], id)
                .await
                .map(Answer::Released),
            None => Ok(Answer::Done),
        },
        Op::Batch {
            keys: which,
            cost,
            atomic,
        } => {
            let requests: Vec<Request<'_>> = which
                .iter()
                .map(|&k| Request {
                    policy,
                    key: &keys[k],
                    cost: *cost,
                })
                .collect();
            store
                .check_many(&requests, *atomic)
                .await
                .map(Answer::Decisions)
        }
        Op::Reset { key } => store
            .reset(policy, &keys[*key])
            .await
            .map(|()| Answer::Done),
        Op::Usage { key, op, cost } => store
            .usage(policy, &keys[*key], *op, *cost)
            .await
            .map(Answer::Decision),
    };
    result.unwrap_or_else(|e| {
        assert!(
            !e.is_transient(),
            "a store error from a healthy server: {e}"
        );
        Answer::Error(e.code())
    })
}

fn differential(deployment: Deployment) {
    let rt = runtime();
    let config = ProptestConfig {
        cases: 64,
        ..ProptestConfig::default()
    };
    proptest!(config, |(policy in any_policy(), trace in ops(), t0 in 1_600_000_000_000u64..1_800_000_000_000)| {
        rt.block_on(async {
            let clock = ManualClock::new(t0 * 1000);
            let memory = MemoryStore::with_clock(clock.clone());
            let redis = connect(
                deployment.urls(),
                TimeSource::Client(Arc::new(clock.clone())),
                "diff",
            )
            .await;
            let (mut mine, mut theirs) = (Vec::new(), Vec::new());
            for (i, (dt, op)) in trace.iter().enumerate() {
                clock.advance(Duration::from_millis(*dt));
                if let Op::Batch { keys, atomic: true, .. } = op {
                    // Keys in several slots cannot be one atomic script on a
                    // cluster: decided slot by slot with refunds, whose
                    // denials report a bound on the retry and whose sliding
                    // logs keep a denied batch's units (a documented
                    // difference, tested in tests/cluster_batch.rs).
                    let distinct: std::collections::HashSet<_> = keys.iter().collect();
                    if matches!(deployment, Deployment::Cluster) && distinct.len() > 1 {
                        continue;
                    }
                }
                let want = apply(&memory, &policy, op, &mut mine).await;
                let got = apply(&redis, &policy, op, &mut theirs).await;
                prop_assert_eq!(got, want, "step {} {:?} on {:?}", i, op, policy);
            }
            Ok(())
        })?;
    });
    deployment.assert_every_key_expires();
}

#[test]
fn redis_decides_like_memory_standalone() {
    differential(Deployment::Standalone);
}

#[test]
fn redis_decides_like_memory_on_a_cluster() {
    differential(Deployment::Cluster);
}

// -------------------------------------------------------------- contention

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
        let admitted = hammer(store.clone(), fw, run).await;
        let windows = fixed_window_bound(&admitted, limit, w);
        assert!(
            windows >= 2,
            "admissions in only {windows} windows of 100 ms over 2 s"
        );

        // The same with a window of 100.5 ms, not whole ms: the form that
        // reads `TIME` on every call (fixed_window.lua) instead of the key
        // expiring with its window (fixed_window_server.lua).
        let w = 100_500u64;
        let fw = Policy::fixed_window("short-us", limit, Duration::from_micros(w)).unwrap();
        assert!(store.key_of(&fw, b"hot").ends_with(b":fw"));
        let admitted = hammer(store.clone(), Arc::new(fw), run).await;
        let windows = fixed_window_bound(&admitted, limit, w);
        assert!(
            windows >= 2,
            "admissions in only {windows} windows of 100.5 ms over 2 s"
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
        // (bucket_server.lua), on the server's clock in whole ms: a request
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

// ------------------------------------------------------------ script cache

fn flush_under_load(deployment: Deployment, server: Option<&RedisServer>) {
    let rt = runtime();
    rt.block_on(async {
        let urls = match server {
            Some(s) => vec![s.url()],
            None => deployment.urls(),
        };
        let store = Arc::new(connect(urls, TimeSource::Server, "flush").await);
        let policies: Arc<Vec<Policy>> = Arc::new(vec![
            Policy::fixed_window("fw", 1 << 20, Duration::from_secs(60)).unwrap(),
            Policy::token_bucket("tb", 1000, Duration::from_secs(1), 1000).unwrap(),
            Policy::sliding_log("sl", 1000, Duration::from_secs(1)).unwrap(),
        ]);
        let loads_before = store.script_loads();
        // Callers run until the flushes are done: a count, not a time, so a
        // slow machine makes the test longer, never weaker.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Enough callers that calls on a standalone server leave in
        // pipelines, where a NOSCRIPT is one call's reply among others.
        let tasks: Vec<_> = (0..64)
            .map(|t| {
                let (store, policies, stop) = (store.clone(), policies.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut calls = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let p = &policies[(calls as usize + t) % policies.len()];
                        let key = format!("k{}", calls % 7);
                        store.check(p, key.as_bytes(), 1).await.expect("no caller sees NOSCRIPT");
                        calls += 1;
                    }
                    calls
                })
            })
            .collect();
        let mut flushes = 0u64;
        while flushes < 6 {
            tokio::time::sleep(Duration::from_millis(150)).await;
            match server {
                Some(s) => {
                    s.cli(&["SCRIPT", "FLUSH"]);
                }
                None => {
                    cluster().cli_all(&["SCRIPT", "FLUSH"]);
                }
            }
            flushes += 1;
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
        stop.store(true, Ordering::Relaxed);
        let mut calls = 0;
        for t in tasks {
            calls += t.await.unwrap();
        }
        let reloads = store.script_loads() - loads_before;
        let nodes = if server.is_some() { 1 } else { 3 };
        // Single-flight: each flush costs each script in use at most one
        // load per node, however many callers hit NOSCRIPT at once.
        let bound = (flushes + 1) * policies.len() as u64 * nodes;
        eprintln!("{deployment:?}: {calls} calls, {flushes} flushes, {reloads} script loads (bound {bound})");
        assert!(calls > 100, "only {calls} calls around {flushes} flushes");
        assert!(reloads <= bound, "{reloads} loads for {flushes} flushes: a reload storm");
    });
}

// ------------------------------------------------------------- pipelining

/// Many callers at once on a standalone server: their calls leave in
/// pipelines, several scripts in one, and each caller gets its own reply,
/// an error included (a key of the wrong type), exactly as when every call
/// leaves alone.
#[test]
fn busy_callers_share_pipelines_and_each_gets_its_own_reply() {
    let server = RedisServer::start();
    // On the multi-threaded runtime (where the flush must yield to let the
    // others queue) and on the current-thread one.
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for rt in [runtime(), current] {
        share_pipelines(&server, &rt);
    }
}

fn share_pipelines(server: &RedisServer, rt: &tokio::runtime::Runtime) {
    rt.block_on(async {
        // No window boundary, no refill, no ageing out during the test: a
        // key's first five checks are admitted, the next three denied.
        // The first three read their key's value, so a key of another type
        // is an error; the GCRA (whose interval is whole ms) keeps its
        // state in the key's expiry, which any type has.
        let policies = Arc::new([
            Policy::fixed_window("fw", 5, Duration::from_secs(364 * 86_400)).unwrap(),
            Policy::token_bucket("tb", 7, Duration::from_secs(3600), 5).unwrap(),
            Policy::sliding_log("sl", 5, Duration::from_secs(3600)).unwrap(),
            Policy::gcra("gcra", 1, Duration::from_secs(3600), 5).unwrap(),
        ]);
        let wrong = 3;
        for pipelining in [true, false] {
            let store = Arc::new(
                RedisStore::builder([server.url()])
                    .prefix(fresh_prefix("pipe"))
                    .pipelining(pipelining)
                    .connect()
                    .await
                    .unwrap(),
            );
            // A key of the wrong type under each policy.
            for p in &policies[..wrong] {
                let key = String::from_utf8(store.key_of(p, b"wrong")).unwrap();
                server.cli(&["RPUSH", &key, "x"]);
                server.cli(&["PEXPIRE", &key, "60000"]);
            }
            // Rounds on fresh keys until calls were pipelined (the first
            // round nearly always suffices).
            let mut round = 0;
            loop {
                let tasks = 240;
                let start = Arc::new(tokio::sync::Barrier::new(tasks));
                let handles: Vec<_> = (0..tasks)
                    .map(|t| {
                        let (store, policies, start) =
                            (store.clone(), policies.clone(), start.clone());
                        tokio::spawn(async move {
                            let p = &policies[t % policies.len()];
                            let key = if t < wrong {
                                "wrong".to_string()
                            } else {
                                format!("r{round}-k{t}")
                            };
                            start.wait().await;
                            let mut seen = Vec::new();
                            for _ in 0..8 {
                                seen.push(
                                    store
                                        .check(p, key.as_bytes(), 1)
                                        .await
                                        .map(|d| (d.allowed, d.remaining))
                                        .map_err(|e| e.to_string()),
                                );
                            }
                            (t, seen)
                        })
                    })
                    .collect();
                for h in handles {
                    let (t, seen) = h.await.unwrap();
                    if t < wrong {
                        for answer in seen {
                            let e = answer.expect_err("a key of the wrong type");
                            assert!(e.contains("WRONGTYPE"), "task {t}: {e}");
                        }
                    } else {
                        let expected: Vec<_> = [(true, 4), (true, 3), (true, 2), (true, 1)]
                            .into_iter()
                            .chain([(true, 0), (false, 0), (false, 0), (false, 0)])
                            .map(Ok)
                            .collect();
                        assert_eq!(seen, expected, "task {t}, pipelining {pipelining}");
                    }
                }
                round += 1;
                let sent = store.pipelined();
                if !pipelining {
                    assert_eq!(sent, Default::default());
                    break;
                }
                if sent.calls > 0 || round == 20 {
                    eprintln!("{round} rounds: {sent:?}");
                    assert!(
                        sent.calls > sent.pipelines,
                        "no pipeline carried two calls: {sent:?}"
                    );
                    break;
                }
            }
        }
    });
}

#[test]
fn script_flush_under_load_is_invisible_standalone() {
    let server = RedisServer::start();
    flush_under_load(Deployment::Standalone, Some(&server));
}

#[test]
fn script_flush_under_load_is_invisible_on_a_cluster() {
    flush_under_load(Deployment::Cluster, None);
}

// ------------------------------------------------- the server-clock window

/// One call of a server-clock form's script, pipelined between two `TIME`s
/// and followed by `PEXPIRETIME` of its key, so that the server's time at
/// the call is known within a round trip: the time before (s, µs), the
/// reply, the key's expiry (ms; -2 once gone) and the time after.
async fn bracketed_call(
    conn: &mut redis::aio::MultiplexedConnection,
    sha: &str,
    key: &[u8],
    args: &[String],
) -> ((u64, u64), i64, i64, (u64, u64)) {
    let mut pipe = redis::pipe();
    pipe.cmd("TIME")
        .cmd("EVALSHA")
        .arg(sha)
        .arg(1)
        .arg(key)
        .arg(args);
    pipe.cmd("PEXPIRETIME").arg(key).cmd("TIME");
    pipe.query_async(conn).await.unwrap()
}

/// One request of `cost` per policy, all on the key `k`: an atomic batch.
fn requests_on_k<'a, const N: usize>(policies: [&'a Policy; N], cost: u64) -> [Request<'a>; N] {
    policies.map(|policy| Request {
        policy,
        key: b"k",
        cost,
    })
}

/// The fixed window on the server's clock reads no clock on its hot path:
/// the key's expiry ends the window. Each call here is pipelined between
/// two `TIME`s, so the server's time at the call is known within a round
/// trip; the reply's tag names the window (k mod 4), which must lie in
/// that bracket, its count must be what the window admitted so far, and
/// the key must expire at the window's last millisecond (or, created in
/// the window's last 2 ms, one or two ms later, which the tag says). A key that
/// lived a millisecond too long, one that Redis deleted at once, or a
/// window counted from the wrong time shows as a wrong expiry, and as a
/// count carried into the next window or started over. Windows of 20 ms
/// and of 1 ms (where every key is created in its window's last ms), and a
/// cost of 2, which takes the script's form with an argument.
#[test]
fn the_server_clock_window_ends_exactly_at_the_windows_end() {
    let server = standalone();
    runtime().block_on(async {
        let store = connect(vec![server.url()], TimeSource::Server, "exact").await;
        let client = redis::Client::open(server.url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        // A cost of 1 has a form of the script that takes no arguments;
        // other costs pass theirs.
        for (limit, w, cost) in [(3u64, 20_000u64, 1u64), (2, 1_000, 1), (6, 20_000, 2)] {
            let name = format!("exact-{w}-{cost}");
            let policy = Policy::fixed_window(&name, limit, Duration::from_micros(w)).unwrap();
            let (sha, key, args) = store.evalsha_call(&policy, b"k", cost).unwrap();
            assert_eq!(args.is_empty(), cost == 1, "{args:?}");
            let suffix = format!(":fws:{}:{limit}", w / 1000);
            assert!(
                key.ends_with(suffix.as_bytes()),
                "the server-clock form is used"
            );
            let mut admitted = std::collections::HashMap::<u64, u64>::new();
            // Windows a call may have counted in that no bracket could name
            // (a round trip of 4 windows or more): not checked.
            let mut unknown = std::collections::HashSet::new();
            let (mut calls, mut first_ms_calls) = (0, 0);
            let end = unix_micros() + 300_000;
            while unix_micros() < end {
                let ((s0, u0), reply, expires, (s1, u1)) =
                    bracketed_call(&mut conn, &sha, &key, &args).await;
                let (k0, k1) = ((s0 * 1_000_000 + u0) / w, (s1 * 1_000_000 + u1) / w);
                if k1 - k0 >= 4 {
                    unknown.extend(k0..=k1);
                    continue;
                }
                // remaining·16 + tag, or -1 minus that when denied.
                let value = if reply >= 0 { reply } else { -1 - reply } as u64;
                let count = limit
                    .checked_sub(value / 16)
                    .unwrap_or_else(|| panic!("{value}: more left than the limit"));
                let tag = value % 16;
                assert!((1..=8).contains(&tag), "tag {tag}");
                let k = (k0..=k1)
                    .find(|k| k % 4 == (tag - 1) % 4)
                    .unwrap_or_else(|| panic!("tag {tag} names none of windows {k0}..={k1}"));
                if unknown.contains(&k) {
                    continue;
                }
                let so_far = admitted.entry(k).or_default();
                if reply >= 0 {
                    *so_far += cost;
                    assert!(*so_far <= limit, "window {k}: {so_far} admitted");
                } else {
                    assert!(*so_far + cost > limit, "window {k}: a denial at {so_far}");
                }
                assert_eq!(count, *so_far, "window {k}: the count");
                // The window's last ms; a key created in the window's last
                // 2 ms (tag > 4) lives one or two ms more.
                let last_ms = (k + 1) * w / 1000 - 1;
                let expiry = if tag > 4 {
                    last_ms + 1..=last_ms + 2
                } else {
                    last_ms..=last_ms
                };
                if expires == -2 {
                    // Gone by the PEXPIRETIME that followed: only past it.
                    assert!(
                        s1 * 1000 + u1 / 1000 > *expiry.start(),
                        "window {k}: the key vanished before its expiry"
                    );
                } else {
                    assert!(
                        expiry.contains(&(expires as u64)),
                        "window {k}: the expiry {expires}, tag {tag}, last ms {last_ms}"
                    );
                }
                calls += 1;
                if (s1 * 1_000_000 + u1) % w < 1000 {
                    first_ms_calls += 1;
                }
            }
            assert!(
                admitted.len() >= 3 && first_ms_calls > 0,
                "{w}µs windows: {calls} calls met {} windows, {first_ms_calls} in a first ms",
                admitted.len()
            );
        }

        // Through the store: the decision's times come from our estimate of
        // the server's clock, and a denied caller who waits retry_after is
        // admitted (nobody else uses the key).
        let policy = Policy::fixed_window("retry", 1, Duration::from_millis(30)).unwrap();
        let mut denied = 0;
        for _ in 0..20 {
            let d = store.check(&policy, b"k", 1).await.unwrap();
            assert!(d.reset_after > Duration::ZERO && d.reset_after <= Duration::from_millis(30));
            if !d.allowed {
                denied += 1;
                assert_eq!(d.remaining, 0);
                assert!(d.retry_after > Duration::ZERO && d.retry_after <= d.reset_after);
                tokio::time::sleep(d.retry_after).await;
                let again = store.check(&policy, b"k", 1).await.unwrap();
                assert!(again.allowed, "denied again after retry_after: {again:?}");
            }
        }
        assert!(denied > 0);

        // A peek counts nothing; the key names the window and the limit, so
        // a policy whose limit changes starts over under a key of its own.
        let hour = Duration::from_secs(3600);
        let two = Policy::fixed_window("changed", 2, hour).unwrap();
        assert_eq!(store.check(&two, b"k", 0).await.unwrap().remaining, 2);
        assert_eq!(store.check(&two, b"k", 2).await.unwrap().remaining, 0);
        let peek = store.check(&two, b"k", 0).await.unwrap();
        assert!(
            peek.allowed && peek.reset_after > Duration::ZERO,
            "{peek:?}"
        );
        assert_eq!(peek.remaining, 0);
        assert!(!store.check(&two, b"k", 1).await.unwrap().allowed);
        let three = Policy::fixed_window("changed", 3, hour).unwrap();
        assert_eq!(store.check(&three, b"k", 1).await.unwrap().remaining, 2);

        // In an atomic batch beside a bucket: all or nothing.
        let window = Policy::fixed_window("batch-fw", 2, hour).unwrap();
        let bucket = Policy::token_bucket("batch-tb", 1, hour, 5).unwrap();
        let batch = |cost| requests_on_k([&window, &bucket], cost);
        for left in [1, 0] {
            let both = store.check_many(&batch(1), true).await.unwrap();
            assert!(both.iter().all(|d| d.allowed), "{both:?}");
            assert_eq!(both[0].remaining, left);
            assert!(both[0].reset_after > Duration::ZERO && both[0].reset_after <= hour);
        }
        let over = store.check_many(&batch(1), true).await.unwrap();
        assert!(over.iter().all(|d| !d.allowed), "{over:?}");
        assert!(over[0].retry_after > Duration::ZERO && over[0].retry_after <= hour);
        assert_eq!(over[1].retry_after, Duration::ZERO, "the bucket had room");
        let peek = store.check_many(&batch(0), true).await.unwrap();
        assert_eq!((peek[0].remaining, peek[1].remaining), (0, 3), "{peek:?}");
    });
    Deployment::Standalone.assert_every_key_expires();
}

// ------------------------------------------------- the server-clock buckets

/// A token bucket, GCRA or leaky bucket whose interval is whole ms keeps
/// its theoretical arrival time (TAT) as its key's expiry and reads no
/// clock: the script reads the backlog with PTTL, on the server's clock in
/// ms. Each call here is pipelined between two `TIME`s and followed by
/// `PEXPIRETIME`, and checked against a model of the TAT: the reply is the
/// backlog at some ms of the bracket, the admission is what the algorithm
/// makes of it, an admission on a backlog moves the expiry by exactly the
/// cost times the interval (one made from a second reading of the clock
/// would drift by the ms that passed), one on a fresh bucket sets it that
/// far from a ms of the bracket, and a denial leaves it alone. Then,
/// through the store: a denied caller who waits retry_after is admitted, a
/// reservation's wait moves the TAT, and an atomic batch is all or nothing.
#[test]
fn the_server_clock_bucket_keeps_its_tat_as_the_keys_expiry() {
    let server = standalone();
    runtime().block_on(async {
        let store = connect(vec![server.url()], TimeSource::Server, "tat").await;
        let client = redis::Client::open(server.url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let second = Duration::from_secs(1);
        // (policy, interval ms, capacity ms, cost)
        let cases = [
            (
                Policy::gcra("tat-gcra", 200, second, 3).unwrap(),
                5u64,
                15u64,
                1u64,
            ),
            (
                Policy::token_bucket("tat-tb", 500, second, 4).unwrap(),
                2,
                8,
                2,
            ),
            (
                Policy::leaky_bucket("tat-lb", 1000, second, 2).unwrap(),
                1,
                2,
                1,
            ),
            // Calls a few ms apart (a busy machine) still pile up a backlog
            // here, which the intervals of a few ms above may not see.
            (Policy::gcra("tat-slow", 20, second, 3).unwrap(), 50, 150, 1),
        ];
        for (policy, interval, capacity, cost) in cases {
            let name = policy.name();
            let (sha, key, args) = store.evalsha_call(&policy, b"k", cost).unwrap();
            let need = cost * interval;
            assert_eq!(args, [need.to_string(), (capacity - need).to_string()]);
            let ms = |(s, u): (u64, u64)| s * 1000 + u / 1000;
            // The expiry the model expects: the TAT in ms, or none.
            let mut tat: Option<u64> = None;
            let (mut admitted, mut denied, mut on_backlog) = (0, 0, 0);
            // Until every path has been taken often enough, or 2 s.
            let end = unix_micros() + 2_000_000;
            while !(admitted > 10 && denied > 10 && on_backlog > 5) && unix_micros() < end {
                let (t0, reply, expires, t1) = bracketed_call(&mut conn, &sha, &key, &args).await;
                let (m0, m1) = (ms(t0), ms(t1));
                let backlog = if reply >= 0 { reply } else { -1 - reply } as u64;
                let (low, high) = match tat {
                    Some(t) => (t.saturating_sub(m1), t.saturating_sub(m0)),
                    None => (0, 0),
                };
                assert!(
                    (low..=high).contains(&backlog),
                    "{name}: backlog {backlog} outside {low}..={high}"
                );
                assert_eq!(
                    reply >= 0,
                    backlog + need <= capacity,
                    "{name}: backlog {backlog}, reply {reply}"
                );
                let expected = if reply < 0 {
                    denied += 1;
                    tat
                } else if backlog > 0 {
                    admitted += 1;
                    on_backlog += 1;
                    Some(tat.unwrap() + need)
                } else {
                    admitted += 1;
                    // Fresh: from the ms the script ran in.
                    let e = expires as u64;
                    assert!(
                        (m0 + need..=m1 + need).contains(&e),
                        "{name}: a fresh TAT {e} outside {}..={}",
                        m0 + need,
                        m1 + need
                    );
                    Some(e)
                };
                if expires == -2 {
                    // Gone by the PEXPIRETIME that followed: only past it.
                    assert!(
                        expected.is_none_or(|e| e < m1),
                        "{name}: the key vanished before its TAT {expected:?} (now {m1})"
                    );
                    tat = None;
                } else {
                    assert_eq!(Some(expires as u64), expected, "{name}: the expiry");
                    tat = Some(expires as u64);
                }
            }
            // Admissions come at any speed; the 50 ms interval sees denials
            // and admissions on a backlog at any pace under 20 ms a call.
            let counts =
                format!("{admitted} admitted ({on_backlog} on a backlog), {denied} denied");
            assert!(admitted > 10, "{name}: {counts}");
            if interval >= 50 {
                assert!(denied > 10 && on_backlog > 5, "{name}: {counts}");
            }
        }

        // Through the store: a denied caller who waits retry_after is
        // admitted (nobody else uses the key), and the decision's numbers
        // are the algorithm's.
        let policy = Policy::gcra("tat-retry", 50, second, 2).unwrap();
        let mut denials = 0;
        for _ in 0..12 {
            let d = store.check(&policy, b"k", 1).await.unwrap();
            assert!(d.reset_after > Duration::ZERO && d.reset_after <= Duration::from_millis(40));
            if !d.allowed {
                denials += 1;
                assert_eq!(d.remaining, 0);
                assert!(
                    d.retry_after > Duration::ZERO && d.retry_after <= Duration::from_millis(20)
                );
                tokio::time::sleep(d.retry_after).await;
                let again = store.check(&policy, b"k", 1).await.unwrap();
                assert!(again.allowed, "denied again after retry_after: {again:?}");
            }
        }
        assert!(denials > 0);

        // A reservation waits for its turn and moves the TAT that far: a
        // bucket of 1 per hour, emptied, then reserved for up to two hours.
        let hour = Duration::from_secs(3600);
        let slow = Policy::token_bucket("tat-reserve", 1, hour, 1).unwrap();
        let redis_key = store.key_of(&slow, b"k");
        assert!(store.check(&slow, b"k", 1).await.unwrap().allowed);
        let denied = store.reserve(&slow, b"k", 1, hour / 2).await.unwrap();
        assert!(!denied.allowed);
        assert!(
            denied.retry_after > hour / 2 - Duration::from_secs(1),
            "{denied:?}"
        );
        let reserved = store.reserve(&slow, b"k", 1, hour * 2).await.unwrap();
        assert!(reserved.allowed);
        assert!(
            reserved.delay > hour - Duration::from_secs(1) && reserved.delay <= hour,
            "{reserved:?}"
        );
        let pttl: i64 = redis::cmd("PTTL")
            .arg(&redis_key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(
            (2 * 3_590_000..=2 * 3_600_000).contains(&pttl),
            "two tokens owed: {pttl} ms"
        );

        // In an atomic batch beside a window: all or nothing.
        let window = Policy::fixed_window("tat-batch-fw", 5, hour).unwrap();
        let bucket = Policy::gcra("tat-batch-gcra", 1, hour, 2).unwrap();
        assert!(store.key_of(&bucket, b"k").ends_with(b":gcras"));
        let batch = |cost| requests_on_k([&window, &bucket], cost);
        for left in [1, 0] {
            let both = store.check_many(&batch(1), true).await.unwrap();
            assert!(both.iter().all(|d| d.allowed), "{both:?}");
            assert_eq!(both[1].remaining, left);
            assert!(
                both[1].reset_after > hour * (1 - left as u32) && both[1].reset_after <= hour * 2
            );
        }
        let over = store.check_many(&batch(1), true).await.unwrap();
        assert!(over.iter().all(|d| !d.allowed), "{over:?}");
        assert_eq!(over[0].retry_after, Duration::ZERO, "the window had room");
        assert!(over[1].retry_after > hour - Duration::from_secs(1) && over[1].retry_after <= hour);
        let peek = store.check_many(&batch(0), true).await.unwrap();
        assert_eq!((peek[0].remaining, peek[1].remaining), (3, 0), "{peek:?}");

        // A leaky bucket in a batch and alone: the second admission waits
        // for the first to leave (its delay is the backlog), the third finds
        // the queue full.
        let shaper = Policy::leaky_bucket("tat-batch-lb", 1, hour, 2).unwrap();
        assert!(store.key_of(&shaper, b"k").ends_with(b":lbs"));
        for batched in [true, false] {
            let key: &[u8] = if batched { b"batched" } else { b"alone" };
            let mut decisions = Vec::new();
            for _ in 0..3 {
                let request = Request {
                    policy: &shaper,
                    key,
                    cost: 1,
                };
                decisions.push(if batched {
                    store.check_many(&[request], true).await.unwrap()[0]
                } else {
                    store.check(&shaper, key, 1).await.unwrap()
                });
            }
            let [first, second, third] = decisions[..] else {
                unreachable!()
            };
            assert!(first.allowed && first.delay == Duration::ZERO, "{first:?}");
            assert!(second.allowed, "{second:?}");
            assert!(
                second.delay > hour - Duration::from_secs(1) && second.delay <= hour,
                "batched {batched}: {second:?}"
            );
            assert!(!third.allowed && third.remaining == 0, "{third:?}");
            assert!(third.retry_after > hour - Duration::from_secs(1) && third.retry_after <= hour);
        }

        // Asked not to, the store keeps the form that reads `TIME`, under the
        // bucket's own key: the same bucket empties there from full.
        let time_form = RedisStore::builder([server.url()])
            .prefix(fresh_prefix("tat-off"))
            .bucket_expiry_form(false)
            .connect()
            .await
            .unwrap();
        assert!(time_form.key_of(&bucket, b"k").ends_with(b":gcra"));
        for left in [1, 0] {
            assert_eq!(
                time_form.check(&bucket, b"k", 1).await.unwrap().remaining,
                left
            );
        }
        assert!(!time_form.check(&bucket, b"k", 1).await.unwrap().allowed);

        // So does a user whose ACL denies it PEXPIRETIME (a script calling it
        // would fail): the store connects and decides in the TIME form.
        server.cli(&[
            "ACL",
            "SETUSER",
            "no-expiretime",
            "on",
            ">secret",
            "~*",
            "+@all",
            "-pexpiretime",
        ]);
        let url = format!("redis://no-expiretime:secret@127.0.0.1:{}/", server.port());
        let limited = RedisStore::builder([url])
            .prefix(fresh_prefix("tat-acl"))
            .connect()
            .await
            .unwrap();
        assert!(limited.key_of(&bucket, b"k").ends_with(b":gcra"));
        assert_eq!(limited.check(&bucket, b"k", 1).await.unwrap().remaining, 1);
    });
    Deployment::Standalone.assert_every_key_expires();
}

// --------------------------------------------------------------- bad input

/// Calls of scripts and functions the server has counted so far.
fn script_calls(server: &RedisServer) -> u64 {
    server
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter(|l| l.starts_with("cmdstat_eval") || l.starts_with("cmdstat_fcall"))
        .filter_map(|l| l.split("calls=").nth(1))
        .filter_map(|rest| rest.split(',').next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn bad_input_never_reaches_redis() {
    let server = RedisServer::start();
    let rt = runtime();
    rt.block_on(async {
        let store = connect(vec![server.url()], TimeSource::Server, "bad").await;
        let fw = Policy::fixed_window("fw", 5, Duration::from_secs(1)).unwrap();
        let tb = Policy::token_bucket("tb", 1, Duration::from_secs(1), 5).unwrap();
        let cc = Policy::concurrency("cc", 2, Duration::from_secs(1)).unwrap();
        // Warm up: the connection and the scripts are loaded.
        store.check(&fw, b"warm", 1).await.unwrap();
        let before = script_calls(&server);
        let long = vec![b'x'; tollgate::MAX_KEY_LEN + 1];
        let cases: Vec<(&str, tollgate::Result<Decision>)> = vec![
            ("invalid_key", store.check(&fw, b"", 1).await),
            ("invalid_key", store.check(&fw, &long, 1).await),
            ("cost_exceeds_limit", store.check(&fw, b"k", 6).await),
            (
                "cost_exceeds_limit",
                store.reserve(&tb, b"k", 6, Duration::ZERO).await,
            ),
            (
                "unsupported",
                store.reserve(&fw, b"k", 1, Duration::from_secs(1)).await,
            ),
            (
                "invalid_argument",
                store
                    .reserve(&tb, b"k", 1, Duration::from_secs(1 << 40))
                    .await,
            ),
            ("unsupported", store.check(&cc, b"k", 1).await),
            (
                "unsupported",
                store.acquire_lease(&tb, b"k").await.map(|l| l.decision),
            ),
            (
                "invalid_key",
                store.acquire_lease(&cc, b"").await.map(|l| l.decision),
            ),
        ];
        for (i, (code, result)) in cases.into_iter().enumerate() {
            let err = result.expect_err(&format!("case {i} must fail"));
            assert_eq!(err.code(), code, "case {i}: {err}");
            assert!(!err.to_string().is_empty());
        }
        let dup = [
            Request {
                policy: &fw,
                key: b"a",
                cost: 1,
            },
            Request {
                policy: &fw,
                key: b"a",
                cost: 1,
            },
        ];
        let err = store.check_many(&dup, true).await.unwrap_err();
        assert_eq!(err.code(), "invalid_argument", "{err}");
        let bad_batch = [
            Request {
                policy: &fw,
                key: b"a",
                cost: 1,
            },
            Request {
                policy: &fw,
                key: b"",
                cost: 1,
            },
        ];
        assert_eq!(
            store
                .check_many(&bad_batch, false)
                .await
                .unwrap_err()
                .code(),
            "invalid_key"
        );
        assert_eq!(script_calls(&server), before, "bad input reached Redis");
    });
}

// ---------------------------------------------------------------- hash tags

/// The documented layout: `<prefix>{<policy>:<escaped key>}:<algorithm>`,
/// where `\` becomes `\\` and `}` becomes `\]`, so the tag ends at the
/// first `}` after `{` and contains the whole user key.
fn escaped(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in key {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'}' => out.extend_from_slice(b"\\]"),
            b => out.push(b),
        }
    }
    out
}

#[test]
fn braces_in_user_keys_keep_their_slot_and_never_collide() {
    let rt = runtime();
    rt.block_on(async {
        let store = connect(Deployment::Cluster.urls(), TimeSource::Server, "tags").await;
        let policy = Policy::fixed_window("p", 1, Duration::from_secs(60)).unwrap();
        let keys: Vec<&[u8]> = vec![
            b"a", b"{a}", b"a}", b"}a", b"{", b"}", b"}{", b"a\\]", b"a}", b"\\", b"{p:a}",
        ];
        let mut seen = std::collections::HashSet::new();
        for key in &keys {
            let redis_key = store.key_of(&policy, key);
            let mut tag = b"p:".to_vec();
            tag.extend(escaped(key));
            assert_eq!(
                key_slot(&redis_key),
                key_slot(&tag),
                "{:?} left its hash tag",
                String::from_utf8_lossy(key)
            );
            if seen.insert(redis_key) {
                // A key new to this loop starts fresh: no other key's count.
                assert!(
                    store.check(&policy, key, 1).await.unwrap().allowed,
                    "{key:?}"
                );
                assert!(!store.check(&policy, key, 1).await.unwrap().allowed);
            }
        }
        assert_eq!(
            seen.len(),
            keys.len() - 1,
            "only the repeated `a}}` may coincide"
        );

        // All-or-nothing needs one script, so one slot.
        let batch = [
            Request {
                policy: &policy,
                key: b"x",
                cost: 1,
            },
            Request {
                policy: &policy,
                key: b"y",
                cost: 1,
            },
        ];
        let slots = [
            key_slot(&store.key_of(&policy, b"x")),
            key_slot(&store.key_of(&policy, b"y")),
        ];
        assert_ne!(slots[0], slots[1], "pick keys in two slots");
        let err = store.check_many(&batch, true).await.unwrap_err();
        assert_eq!(err.code(), "invalid_argument");
        assert!(err.to_string().contains("one slot"), "{err}");
    });
    Deployment::Cluster.assert_every_key_expires();
}

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

// ------------------------------------------------------------------- usage

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

// -------------------------------------------------------- calendar windows

/// µs of a local civil time in `zone`.
fn local(zone: &str, (y, m, d): (i16, i8, i8), (h, min, s): (i8, i8, i8)) -> u64 {
    let tz = jiff::tz::TimeZone::get(zone).unwrap();
    jiff::civil::date(y, m, d)
        .at(h, min, s, 0)
        .to_zoned_datetime(tz)
        .unwrap()
        .timestamp()
        .as_microsecond() as u64
}

/// Calendar windows on Redis (client time, so a manual clock can stand on
/// DST days and month ends) decide as memory does, call by call, and as
/// the calendar says: a day in Paris of 23 hours (2026-03-29) and one of
/// 25 (2026-10-25) reset at local midnight, February's month ends on the
/// 28th at midnight, a week on Monday; checks, charges, refunds and
/// check_at_most alike, each answer's `reset_after` the time to the
/// window's real end.
#[test]
fn calendar_windows_follow_dst_and_month_ends_as_memory_does() {
    use tollgate::algorithm::Period;
    const HOUR: u64 = 3_600_000_000;
    let paris = "Europe/Paris";
    let cases = [
        // (period, zone, start of a window, its length, a moment inside)
        (
            Period::Day,
            paris,
            local(paris, (2026, 3, 29), (0, 0, 0)),
            23 * HOUR,
        ),
        (
            Period::Day,
            paris,
            local(paris, (2026, 10, 25), (0, 0, 0)),
            25 * HOUR,
        ),
        (
            Period::Month,
            paris,
            local(paris, (2026, 2, 1), (0, 0, 0)),
            28 * 24 * HOUR,
        ),
        (
            Period::Month,
            "UTC",
            local("UTC", (2028, 2, 1), (0, 0, 0)),
            29 * 24 * HOUR,
        ),
        (
            Period::Week,
            "America/New_York",
            local("America/New_York", (2026, 11, 2), (0, 0, 0)),
            7 * 24 * HOUR,
        ),
    ];
    for deployment in [Deployment::Standalone, Deployment::Cluster] {
        runtime().block_on(async {
            for (period, zone, start, length) in cases {
                let end = start + length;
                let clock = ManualClock::new(start - 1);
                let memory = MemoryStore::with_clock(clock.clone());
                let redis = connect(
                    deployment.urls(),
                    TimeSource::Client(Arc::new(clock.clone())),
                    "calendar",
                )
                .await;
                let policy = Policy::fixed_window_calendar("cal", 5, period, zone).unwrap();
                let label = format!("{period} in {zone} on {deployment:?}");
                // The last µs of the window before, the first of this one,
                // its middle, its last µs, the first of the next.
                let steps = [
                    (start - 1, 3, Usage::Charge),
                    (start, 4, Usage::AtMost),
                    (start + length / 2, 2, Usage::Charge),
                    (start + length / 2, 1, Usage::Refund),
                    (end - 1, 1, Usage::AtMost),
                    (end, 9, Usage::AtMost),
                ];
                for (i, (at, cost, op)) in steps.into_iter().enumerate() {
                    clock.set(at);
                    let want = memory.usage(&policy, b"k", op, cost).await.unwrap();
                    let got = redis.usage(&policy, b"k", op, cost).await.unwrap();
                    assert_eq!(got, want, "{label}, step {i}");
                    let check_want = memory.check(&policy, b"k", 0).await.unwrap();
                    let check_got = redis.check(&policy, b"k", 0).await.unwrap();
                    assert_eq!(check_got, check_want, "{label}, step {i}: a peek");
                    let window_end = if at < start {
                        start
                    } else if at < end {
                        end
                    } else {
                        0
                    };
                    if window_end > 0 && want.reset_after > Duration::ZERO {
                        assert_eq!(
                            want.reset_after,
                            Duration::from_micros(window_end - at),
                            "{label}, step {i}: the window ends at local midnight"
                        );
                    }
                }
                // What each window counted: the window before held the
                // first charge alone, this one 4 + 2 - 1 + 0 (nothing left
                // at its end), the next 5 of the 9 asked.
                clock.set(start + 1);
                let d = redis.check(&policy, b"k", 0).await.unwrap();
                assert_eq!(d.remaining, 0, "{label}");
                clock.set(end);
                let d = redis.check(&policy, b"k", 0).await.unwrap();
                assert_eq!(d.remaining, 0, "{label}: the next window granted 5");
            }
        });
        deployment.assert_every_key_expires();
    }
}

/// A calendar window on the server's clock: the bounds are computed from
/// our estimate of the server's time and handed to the script, which
/// counts in the window its own clock names; the answer's reset is the
/// time to the next local midnight.
#[test]
fn a_calendar_window_on_the_servers_clock_ends_at_local_midnight() {
    use tollgate::algorithm::{Calendar, Period};
    let server = standalone();
    runtime().block_on(async {
        let store = connect(vec![server.url()], TimeSource::Server, "calendar-server").await;
        let policy =
            Policy::fixed_window_calendar("cal-server", 3, Period::Day, "Asia/Kolkata").unwrap();
        let before = unix_micros();
        let d = store.check(&policy, b"k", 2).await.unwrap();
        let after = unix_micros();
        assert!(d.allowed);
        assert_eq!(d.remaining, 1);
        let (_, end) = Calendar::new(Period::Day, "Asia/Kolkata")
            .unwrap()
            .window(before)
            .unwrap();
        let reset = d.reset_after.as_micros() as u64;
        assert!(
            end - after <= reset && reset <= end - before,
            "reset {reset} µs, the day ends in {} µs",
            end - before
        );
        assert!(!store.check(&policy, b"k", 2).await.unwrap().allowed);
        let d = store.charge(&policy, b"k", 4).await.unwrap();
        assert_eq!((d.allowed, d.remaining), (false, 0));
        let d = store.refund(&policy, b"k", 5).await.unwrap();
        assert_eq!(d.remaining, 2);
    });
    Deployment::Standalone.assert_every_key_expires();
}

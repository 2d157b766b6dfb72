//! The memory store's cost per decision, beside governor's limiters.
//!
//! `cargo bench -p tollgate --bench memory` measures, for every algorithm,
//! one hot key and 1,000,000 keys, on one thread and on two; governor's
//! direct and keyed GCRA limiters run in the same process as the peer.
//! Limits are generous so that both sides mostly take the admit path (the
//! `denied` cases take the other). `tollgate/direct` is the
//! [`DirectLimiter`], one key without a map, beside governor's direct
//! limiter. Before the timings it prints the
//! resident memory per key of each algorithm, each measured in a child
//! process of its own so that one measurement's freed memory does not hide
//! the next one's growth (set `TOLLGATE_BENCH_NO_BYTES=1` to skip that,
//! for example under a profiler). `-- --paired` compares the keyed rows
//! with governor's in alternating batches instead (see [`paired`]), and
//! `-- --usage` the usage operations with `check` (see [`usage`]; add
//! `--instructions` to count instructions under callgrind instead).
//!
//! Kept whole on purpose: one benchmark, whose figures are compared with governor's in the same run.

#[path = "support/callgrind.rs"]
mod callgrind;

use std::hint::black_box;
use std::num::NonZeroU32;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use governor::{Quota, RateLimiter};
use tollgate::store::Store;
use tollgate::store::memory::MemoryStore;
use tollgate::{Algorithm, DirectLimiter, ManualClock, Policy, Usage};

const MANY: usize = 1_000_000;
const MEMORY_PROBE: &str = "TOLLGATE_BENCH_BYTES_PER_KEY";
/// Set in the child processes of `-- --usage --instructions`.
const USAGE_CALLS: &str = "TOLLGATE_BENCH_USAGE_CALLS";

fn policies() -> Vec<(&'static str, Policy)> {
    let hour = Duration::from_secs(3600);
    let second = Duration::from_secs(1);
    vec![
        (
            "fixed_window",
            Policy::fixed_window("fw", 1 << 40, hour).unwrap(),
        ),
        (
            "sliding_window",
            Policy::sliding_window("sw", 1 << 30, second).unwrap(),
        ),
        // A log keeps every admitted request: a realistic size, not a huge one.
        (
            "sliding_log",
            Policy::sliding_log("sl", 100, second).unwrap(),
        ),
        (
            "token_bucket",
            Policy::token_bucket("tb", 1_000_000_000, second, 1_000_000_000).unwrap(),
        ),
        (
            "gcra",
            Policy::gcra("gcra", 1_000_000_000, second, 1_000_000_000).unwrap(),
        ),
        (
            "leaky_bucket",
            Policy::leaky_bucket("lb", 1_000_000_000, second, 1_000_000_000).unwrap(),
        ),
        (
            "concurrency",
            Policy::concurrency("cc", 1_000, Duration::from_secs(60)).unwrap(),
        ),
    ]
}

fn keys(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("user-{i:08}").into_bytes())
        .collect()
}

/// One decision (for concurrency: take a lease and give it back).
fn decide(store: &MemoryStore, policy: &Policy, key: &[u8]) {
    if matches!(policy.algorithm(), Algorithm::Concurrency(_)) {
        let lease = store.acquire_lease_sync(policy, key).unwrap();
        if let Some(id) = lease.id {
            store.release_lease_sync(policy, key, id).unwrap();
        }
    } else {
        black_box(store.check_sync(policy, key, 1).unwrap());
    }
}

/// Runs `iters` calls of `f(i)` split over `threads` threads; the wall time.
fn spread(iters: u64, threads: usize, f: impl Fn(usize) + Sync) -> Duration {
    let next = AtomicUsize::new(0);
    let per = iters as usize / threads + 1;
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let base = next.fetch_add(per, Ordering::Relaxed);
                for i in base..base + per {
                    f(i);
                }
            });
        }
    });
    start.elapsed()
}

fn bench_tollgate(c: &mut Criterion) {
    let many = keys(MANY);
    for (name, policy) in policies() {
        let mut group = c.benchmark_group(format!("tollgate/{name}"));
        group.throughput(Throughput::Elements(1));
        let store = MemoryStore::builder().max_keys(2 * MANY).build();
        for threads in [1, 2] {
            group.bench_function(BenchmarkId::new("hot_key", threads), |b| {
                b.iter_custom(|iters| spread(iters, threads, |_| decide(&store, &policy, b"hot")))
            });
            group.bench_function(BenchmarkId::new("1M_keys", threads), |b| {
                b.iter_custom(|iters| {
                    spread(iters, threads, |i| decide(&store, &policy, &many[i % MANY]))
                })
            });
        }
        group.finish();
    }

    // One key without a map: the DirectLimiter, beside governor's direct
    // limiter (the rate algorithms; concurrency takes leases). As governor's
    // `check` answers only "ok or not", the caller here reads `allowed`
    // (so the compiler may skip the fields nobody reads); `full` keeps the
    // whole decision.
    let mut group = c.benchmark_group("tollgate/direct");
    group.throughput(Throughput::Elements(1));
    for (name, policy) in policies() {
        if matches!(policy.algorithm(), Algorithm::Concurrency(_)) {
            continue;
        }
        let limiter = DirectLimiter::new(policy);
        for threads in [1, 2] {
            group.bench_function(BenchmarkId::new(name, threads), |b| {
                b.iter_custom(|iters| {
                    spread(iters, threads, |_| {
                        black_box(limiter.check(1).is_ok_and(|d| d.allowed));
                    })
                })
            });
        }
        if matches!(name, "gcra" | "token_bucket") {
            group.bench_function(BenchmarkId::new(format!("{name}_full"), 1), |b| {
                b.iter_custom(|iters| {
                    spread(iters, 1, |_| {
                        black_box(limiter.check(1).unwrap());
                    })
                })
            });
        }
    }
    group.finish();

    // The other path: every request denied.
    let mut group = c.benchmark_group("tollgate/denied");
    let store = MemoryStore::new();
    let tb = Policy::token_bucket("tb-denied", 1, Duration::from_secs(3600), 1).unwrap();
    let fw = Policy::fixed_window("fw-denied", 1, Duration::from_secs(3600)).unwrap();
    for (name, policy) in [("token_bucket", &tb), ("fixed_window", &fw)] {
        store.check_sync(policy, b"hot", 1).unwrap();
        group.bench_function(name, |b| {
            b.iter(|| black_box(store.check_sync(policy, b"hot", 1).unwrap()))
        });
    }
    group.finish();

    // A long sliding log: 5,000 a second with one request a µs (a manual
    // clock), so the log holds 5,000 entries and the cost of a decision
    // must not grow with them.
    let mut group = c.benchmark_group("tollgate/sliding_log_5000");
    let clock = ManualClock::new(1_700_000_000_000_000);
    let store = MemoryStore::builder().clock(clock.clone()).build();
    let log = Policy::sliding_log("sl-5000", 5_000, Duration::from_secs(1)).unwrap();
    group.bench_function("hot_key", |b| {
        b.iter(|| {
            clock.advance(Duration::from_micros(1));
            black_box(store.check_sync(&log, b"hot", 1).unwrap())
        })
    });
    group.finish();

    // The same decision through the object-safe async trait: the cost of
    // boxing the future (the memory store's future is ready at once).
    let mut group = c.benchmark_group("tollgate/async");
    let store: Box<dyn Store> = Box::new(MemoryStore::new());
    let (_, gcra) = policies().swap_remove(4);
    let mut cx = Context::from_waker(Waker::noop());
    group.bench_function("gcra_hot_key", |b| {
        b.iter(|| {
            let fut = pin!(store.check(&gcra, b"hot", 1));
            match fut.poll(&mut cx) {
                Poll::Ready(d) => black_box(d.unwrap()),
                Poll::Pending => unreachable!("the memory store never waits"),
            }
        })
    });
    group.finish();
}

fn bench_governor(c: &mut Criterion) {
    let quota = Quota::per_second(NonZeroU32::new(1_000_000_000).unwrap());
    let mut group = c.benchmark_group("governor");
    group.throughput(Throughput::Elements(1));
    let direct = RateLimiter::direct(quota);
    let keyed = RateLimiter::keyed(quota);
    let many = keys(MANY);
    let hot = b"hot".to_vec();
    for threads in [1, 2] {
        group.bench_function(BenchmarkId::new("direct", threads), |b| {
            b.iter_custom(|iters| {
                spread(iters, threads, |_| {
                    let _ = black_box(direct.check());
                })
            })
        });
        group.bench_function(BenchmarkId::new("keyed_hot_key", threads), |b| {
            b.iter_custom(|iters| {
                spread(iters, threads, |_| {
                    let _ = black_box(keyed.check_key(&hot));
                })
            })
        });
        group.bench_function(BenchmarkId::new("keyed_1M_keys", threads), |b| {
            b.iter_custom(|iters| {
                spread(iters, threads, |i| {
                    let _ = black_box(keyed.check_key(&many[i % MANY]));
                })
            })
        });
    }
    group.finish();
}

/// In a child process: the resident memory that 1,000,000 keys of one
/// algorithm add, per key.
fn bytes_per_key(name: &str) {
    let (_, policy) = policies()
        .into_iter()
        .find(|(n, _)| *n == name)
        .expect("a known algorithm");
    let many = keys(MANY);
    let store = MemoryStore::builder()
        .clock(ManualClock::new(1_000_000))
        .max_keys(2 * MANY)
        .build();
    let before = resident_bytes();
    for key in &many {
        if name == "concurrency" {
            store.acquire_lease_sync(&policy, key).unwrap();
        } else {
            store.check_sync(&policy, key, 1).unwrap();
        }
    }
    let after = resident_bytes();
    assert_eq!(store.len(), MANY);
    println!("{}", (after - before) / MANY as u64);
}

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("Linux /proc");
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

fn print_bytes_per_key() {
    let exe = std::env::current_exe().unwrap();
    println!("resident bytes per key, 1,000,000 keys (key length 13 bytes):");
    for (name, _) in policies() {
        let out = std::process::Command::new(&exe)
            .env(MEMORY_PROBE, name)
            .output()
            .unwrap();
        let figure = String::from_utf8_lossy(&out.stdout).trim().to_string();
        println!("  {name:<15} {figure}");
    }
}

/// `-- --paired`: the keyed rows again, ours against governor's keyed
/// limiter in short alternating batches in one process (each round in a
/// new order), and the median of each round's ratio: on a shared machine
/// whose speed drifts from second to second, a ratio of neighbours is
/// steadier than a ratio of two criterion runs taken a minute apart.
/// `-- --paired hot_key/2` (say) runs that row alone.
fn paired(only: Option<&str>) {
    const ROUNDS: usize = 15;
    const BATCH: u64 = 400_000;
    let quota = Quota::per_second(NonZeroU32::new(1_000_000_000).unwrap());
    let keyed = RateLimiter::keyed(quota);
    let many = keys(MANY);
    let hot = b"hot".to_vec();
    // A store per policy, as in the criterion rows: 1,000,000 keys each.
    let ours: Vec<(&str, Policy, MemoryStore)> = policies()
        .into_iter()
        .filter(|(name, _)| matches!(*name, "gcra" | "token_bucket"))
        .map(|(name, policy)| {
            (
                name,
                policy,
                MemoryStore::builder().max_keys(2 * MANY).build(),
            )
        })
        .collect();
    println!(
        "paired: ns per decision, median of {ROUNDS} rounds; ratio = ours / governor keyed, per round"
    );
    for (label, spread_keys) in [("hot_key", false), ("1M_keys", true)] {
        for threads in [1, 2] {
            if only.is_some_and(|row| row != format!("{label}/{threads}")) {
                continue;
            }
            let key = |i: usize| -> &Vec<u8> { if spread_keys { &many[i % MANY] } else { &hot } };
            let governor = || {
                spread(BATCH, threads, |i| {
                    let _ = black_box(keyed.check_key(key(i)));
                })
            };
            // Fill both maps once, so that no round pays for the inserts.
            governor();
            if spread_keys {
                spread(MANY as u64, threads, |i| {
                    let _ = black_box(keyed.check_key(&many[i % MANY]));
                });
            }
            let mut times: Vec<Vec<f64>> = vec![Vec::new(); 1 + ours.len()];
            for (_, policy, store) in &ours {
                spread(MANY as u64, threads, |i| decide(store, policy, key(i)));
            }
            for round in 0..ROUNDS {
                for turn in 0..=ours.len() {
                    let which = (turn + round) % (1 + ours.len());
                    let elapsed = if which == 0 {
                        governor()
                    } else {
                        let (_, policy, store) = &ours[which - 1];
                        spread(BATCH, threads, |i| decide(store, policy, key(i)))
                    };
                    times[which].push(elapsed.as_nanos() as f64 / BATCH as f64);
                }
            }
            let median = |mut v: Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            let gov = median(times[0].clone());
            print!("  {label}/{threads}: governor {gov:.1}");
            for (i, (name, _, _)) in ours.iter().enumerate() {
                let mut ratios: Vec<f64> = times[i + 1]
                    .iter()
                    .zip(&times[0])
                    .map(|(o, g)| o / g)
                    .collect();
                ratios.sort_by(f64::total_cmp);
                print!(
                    ", {name} {:.1} (ratio {:.2}, middle half {:.2}–{:.2})",
                    median(times[i + 1].clone()),
                    ratios[ROUNDS / 2],
                    ratios[ROUNDS / 4],
                    ratios[ROUNDS * 3 / 4]
                );
            }
            println!();
        }
    }
}

/// An operation of `-- --usage`, named, as one call.
type UsageOp<'a> = (&'static str, Box<dyn Fn() + 'a>);

/// The four operations `-- --usage` compares, each of cost 1 on a key of
/// its own: `check`, `charge` and `check_at_most` as the hot key of the
/// criterion rows, `refund` on a key charged deep into debt first (see
/// [`prepare`]), so that every refund has something to give back.
fn usage_ops<'a>(store: &'a MemoryStore, policy: &'a Policy) -> [UsageOp<'a>; 4] {
    let op = move |key: &'static [u8], op: Usage| {
        Box::new(move || {
            black_box(store.usage_sync(policy, key, op, 1).unwrap());
        }) as Box<dyn Fn() + 'a>
    };
    [
        (
            "check",
            Box::new(move || {
                black_box(store.check_sync(policy, b"check", 1).unwrap());
            }),
        ),
        ("charge", op(b"charge", Usage::Charge)),
        ("refund", op(b"refund", Usage::Refund)),
        ("check_at_most", op(b"at_most", Usage::AtMost)),
    ]
}

/// Before a batch of `op`: `refund`'s key charged deep into debt.
fn prepare(store: &MemoryStore, policy: &Policy, op: &str) {
    if op == "refund" {
        let debt = tollgate::algorithm::MAX_USAGE_COST;
        store
            .usage_sync(policy, b"refund", Usage::Charge, debt)
            .unwrap();
    }
}

/// `-- --usage`: `charge`, `refund` and `check_at_most` beside `check` on
/// every rate algorithm (see [`usage_ops`]), one hot key, one thread, in
/// short alternating batches (each round in a new order); ns per call,
/// the median of the rounds, and the median of each round's ratio to
/// `check`. `-- --usage --instructions` counts instructions per call
/// instead (see [`usage_instructions`]).
fn usage() {
    const ROUNDS: usize = 15;
    const BATCH: u64 = 400_000;
    println!(
        "usage: ns per call, hot key, 1 thread, median of {ROUNDS} rounds; ratio = op / check, per round"
    );
    for (name, policy) in policies() {
        if matches!(policy.algorithm(), Algorithm::Concurrency(_)) {
            continue;
        }
        let store = MemoryStore::builder().max_keys(2 * MANY).build();
        let ops = usage_ops(&store, &policy);
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); ops.len()];
        for round in 0..ROUNDS {
            for turn in 0..ops.len() {
                let which = (turn + round) % ops.len();
                prepare(&store, &policy, ops[which].0);
                let start = Instant::now();
                for _ in 0..BATCH {
                    ops[which].1();
                }
                times[which].push(start.elapsed().as_nanos() as f64 / BATCH as f64);
            }
        }
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        print!("  {name}: check {:.1}", median(times[0].clone()));
        for (i, (op, _)) in ops.iter().enumerate().skip(1) {
            let ratios: Vec<f64> = times[i].iter().zip(&times[0]).map(|(o, c)| o / c).collect();
            print!(
                ", {op} {:.1} (ratio {:.2})",
                median(times[i].clone()),
                median(ratios)
            );
        }
        println!();
    }
}

/// How many calls `-- --usage --instructions` counts per operation.
const COUNTED_CALLS: u64 = 100_000;

/// `-- --usage --instructions`: the instructions per call of each
/// operation of [`usage_ops`], counted by callgrind (needs valgrind) in a
/// child process of this benchmark per algorithm and operation, inside
/// [`counted`] only: repeatable where timings on a shared machine are not.
fn usage_instructions() {
    let dir =
        std::env::temp_dir().join(format!("tollgate-memory-callgrind-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    println!(
        "usage: instructions per call (callgrind, {COUNTED_CALLS} calls on one hot key after 1,000 uncounted)"
    );
    for (name, policy) in policies() {
        if matches!(policy.algorithm(), Algorithm::Concurrency(_)) {
            continue;
        }
        let mut line = format!("  {name}:");
        let mut check = 0.0;
        for op in ["check", "charge", "refund", "check_at_most"] {
            let out = dir.join(format!("{}-{op}", policy.name()));
            let calls = format!("{}:{op}", policy.name());
            let total = callgrind::counted_instructions(
                &out,
                (USAGE_CALLS, &calls),
                &format!("{name} {op}"),
            );
            let per_call = total / COUNTED_CALLS as f64;
            if op == "check" {
                check = per_call;
                line += &format!(" check {per_call:.0}");
            } else {
                line += &format!(", {op} {per_call:.0} (ratio {:.2})", per_call / check);
            }
        }
        println!("{line}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The child of [`usage_instructions`]: `policy:op` from [`USAGE_CALLS`].
fn usage_calls(which: &str) {
    let (name, op) = which.split_once(':').expect("policy:op");
    let (_, policy) = policies()
        .into_iter()
        .find(|(_, p)| p.name() == name)
        .expect("a policy of the benchmark");
    let store = MemoryStore::builder().max_keys(2 * MANY).build();
    let ops = usage_ops(&store, &policy);
    let (_, f) = ops.iter().find(|(o, _)| *o == op).expect("an operation");
    prepare(&store, &policy, op);
    for _ in 0..1_000 {
        f();
    }
    // Prepared again before every 1,000 calls, outside what is counted:
    // under callgrind 100,000 calls take seconds, in which a one-second
    // window would age a refund's debt out, and the rest of its refunds
    // would be counted on an empty key (cheaper, and in a share that
    // depends on how fast the machine runs callgrind).
    for _ in 0..COUNTED_CALLS / 1_000 {
        prepare(&store, &policy, op);
        counted(f.as_ref(), 1_000);
    }
}

/// The calls callgrind counts (its `--toggle-collect`).
#[inline(never)]
fn counted(f: &dyn Fn(), calls: u64) {
    for _ in 0..calls {
        f();
    }
}

fn main() {
    if let Ok(name) = std::env::var(MEMORY_PROBE) {
        bytes_per_key(&name);
        return;
    }
    if let Ok(which) = std::env::var(USAGE_CALLS) {
        usage_calls(&which);
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--paired") {
        // cargo passes its own `--bench` after ours.
        let row = args.get(at + 1).filter(|a| !a.starts_with("--"));
        paired(row.map(String::as_str));
        return;
    }
    if args.iter().any(|a| a == "--usage") {
        if args.iter().any(|a| a == "--instructions") {
            usage_instructions();
        } else {
            usage();
        }
        return;
    }
    let probing = std::env::var_os("TOLLGATE_BENCH_NO_BYTES").is_none();
    if probing && !args.iter().any(|a| a == "--list" || a == "--test") {
        print_bytes_per_key();
    }
    let mut c = Criterion::default().configure_from_args();
    bench_governor(&mut c);
    bench_tollgate(&mut c);
    c.final_summary();
}

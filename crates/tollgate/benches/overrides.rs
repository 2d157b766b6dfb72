//! A check under a policy with 10,000 overrides beside one with none, in
//! the same run: the override's lookup (in an [`Overrides::snapshot`], as
//! a caller deciding at once takes it) and the memory store's check.
//!
//! `cargo bench -p tollgate --bench overrides` times five rows in short
//! alternating batches (each round in a new order), over 1,000 keys each:
//! `none` (a policy without overrides), `10k, no match` (a key none of the
//! 10,000 matches, the common case), `10k, exact` and `10k, prefix` (a key
//! under one of the 5,000 exact overrides, or one of the 5,000 prefixes,
//! whose parameters then decide), and `10k, exact, shared` (the exact
//! row through [`Overrides::resolve`], which shares what a snapshot
//! lends). It prints ns per call, the median of the
//! rounds, and the median of each round's ratio to `none`.
//! `-- --instructions` counts instructions per call under callgrind
//! instead (needs valgrind), each row in a child process of its own:
//! repeatable where timings on a shared machine are not.

#[path = "support/callgrind.rs"]
mod callgrind;

use std::hint::black_box;
use std::time::{Duration, Instant};

use tollgate::overrides::{Limits, Override, Overrides, Resolved, Selector};
use tollgate::store::memory::MemoryStore;
use tollgate::{Decision, Policy};

/// Set in the child processes of `-- --instructions`: the row to run.
const ROW: &str = "TOLLGATE_BENCH_OVERRIDES_ROW";
const ROWS: [&str; 5] = [
    "none",
    "10k, no match",
    "10k, exact",
    "10k, prefix",
    "10k, exact, shared",
];
/// The row resolved through `Overrides::resolve` (shared, not lent).
const SHARED: usize = 4;
const KEYS: usize = 1_000;
const OVERRIDES: usize = 10_000;

/// What every row shares: the two policies, the overrides, the store.
struct Bench {
    plain: Policy,
    busy: Policy,
    overrides: Overrides,
    store: MemoryStore,
    keys: [Vec<Vec<u8>>; 5],
}

impl Bench {
    fn new() -> Bench {
        let hour = Duration::from_secs(3600);
        let plain = Policy::fixed_window("plain", 1 << 40, hour).unwrap();
        let busy = Policy::fixed_window("busy", 1 << 40, hour).unwrap();
        let overrides = Overrides::new();
        let raised = |n: usize| {
            Override::limits(Limits {
                limit: Some((1 << 40) + n as u64),
                ..Limits::default()
            })
        };
        // Half exact keys, half prefixes (in four lengths, as
        // `tenant0_*` to `tenant4999_*` are).
        overrides
            .replace(
                &busy,
                (0..OVERRIDES / 2)
                    .map(|i| (format!("cust-{i}"), raised(i)))
                    .chain((0..OVERRIDES / 2).map(|i| (format!("tenant{i}_*"), raised(i))))
                    .map(|(s, o)| (Selector::parse(s.as_bytes()).unwrap(), o)),
            )
            .unwrap();
        let keys = |f: &dyn Fn(usize) -> String| -> Vec<Vec<u8>> {
            (0..KEYS).map(|i| f(i).into_bytes()).collect()
        };
        Bench {
            keys: [
                keys(&|i| format!("user-{i}")),
                keys(&|i| format!("user-{i}")),
                keys(&|i| format!("cust-{}", i * 5)),
                keys(&|i| format!("tenant{}_x", i * 5)),
                keys(&|i| format!("cust-{}", i * 5)),
            ],
            plain,
            busy,
            overrides,
            store: MemoryStore::builder().max_keys(1 << 20).build(),
        }
    }

    /// One decision of row `row` on its `n`th key, as a caller deciding at
    /// once takes it: the overrides' snapshot, the key resolved in it, the
    /// store's check.
    #[inline(always)]
    fn decide(&self, row: usize, n: usize) -> Decision {
        let (policy, key) = self.request(row, n);
        let overrides = self.overrides.snapshot();
        self.check(overrides.resolve(policy, key, None).unwrap(), key)
    }

    /// [`Bench::decide`] as a caller that holds the answer across an
    /// `.await` must (the service, tollgate-tower): the override's policy
    /// and selector shared, not lent (the last row).
    #[inline(always)]
    fn decide_shared(&self, row: usize, n: usize) -> Decision {
        let (policy, key) = self.request(row, n);
        self.check(self.overrides.resolve(policy, key, None).unwrap(), key)
    }

    #[inline(always)]
    fn request(&self, row: usize, n: usize) -> (&Policy, &[u8]) {
        let policy = if row == 0 { &self.plain } else { &self.busy };
        (policy, &self.keys[row][n % KEYS])
    }

    #[inline(always)]
    fn check(&self, resolved: Resolved<'_>, key: &[u8]) -> Decision {
        match resolved {
            Resolved::Decide { policy, .. } => self.store.check_sync(&policy, key, 1).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    /// Row `row`'s decision on keys `n` for `n` in `ns`, each kept.
    #[inline(always)]
    fn run(&self, row: usize, ns: std::ops::Range<usize>) {
        if row == SHARED {
            for n in ns {
                black_box(self.decide_shared(row, n));
            }
        } else {
            for n in ns {
                black_box(self.decide(row, n));
            }
        }
    }

    /// Checks that each row decides as it says (the override's limit, or
    /// the policy's) before anything is measured.
    fn verify(&self) {
        for (row, name) in ROWS.iter().enumerate() {
            let limit = if row == SHARED {
                self.decide_shared(row, 1)
            } else {
                self.decide(row, 1)
            }
            .limit;
            let overridden = limit != 1 << 40;
            assert_eq!(overridden, row >= 2, "row {name}: limit {limit}");
        }
    }
}

/// The timed rows: ns per call, alternating batches.
fn timed(bench: &Bench) {
    const ROUNDS: usize = 15;
    const BATCH: usize = 200_000;
    println!(
        "overrides: ns per check, {KEYS} keys a row, 1 thread, median of {ROUNDS} rounds; ratio = row / none, per round"
    );
    let mut times = vec![Vec::new(); ROWS.len()];
    for round in 0..ROUNDS {
        for turn in 0..ROWS.len() {
            let row = (turn + round) % ROWS.len();
            let start = Instant::now();
            bench.run(row, 0..BATCH);
            times[row].push(start.elapsed().as_nanos() as f64 / BATCH as f64);
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (row, name) in ROWS.iter().enumerate() {
        let ratios: Vec<f64> = times[row]
            .iter()
            .zip(&times[0])
            .map(|(t, n)| t / n)
            .collect();
        println!(
            "  {name:18} {:7.1} ns  (ratio {:.3})",
            median(times[row].clone()),
            median(ratios)
        );
    }
}

/// How many calls `-- --instructions` counts per row.
const COUNTED_CALLS: usize = 100_000;

/// `-- --instructions`: each row in a child process under callgrind,
/// counting inside [`counted`] only.
fn instructions() {
    let dir = std::env::temp_dir().join(format!(
        "tollgate-overrides-callgrind-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    println!(
        "overrides: instructions per check (callgrind, {COUNTED_CALLS} calls over {KEYS} keys after {KEYS} uncounted)"
    );
    let mut none = 0.0;
    for (row, name) in ROWS.iter().enumerate() {
        let out = dir.join(format!("row-{row}"));
        let total = callgrind::counted_instructions(&out, (ROW, &row.to_string()), name);
        let per_call = total / COUNTED_CALLS as f64;
        if row == 0 {
            none = per_call;
        }
        println!("  {name:18} {per_call:7.0}  (ratio {:.3})", per_call / none);
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The calls callgrind counts (its `--toggle-collect`).
#[inline(never)]
fn counted(bench: &Bench, row: usize) {
    bench.run(row, 0..COUNTED_CALLS);
}

fn main() {
    let bench = Bench::new();
    bench.verify();
    if let Ok(row) = std::env::var(ROW) {
        let row: usize = row.parse().expect("a row");
        bench.run(row, 0..KEYS);
        counted(&bench, row);
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list" || a == "--test") {
        return;
    }
    if args.iter().any(|a| a == "--instructions") {
        instructions();
    } else {
        timed(&bench);
    }
}

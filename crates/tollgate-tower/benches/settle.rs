//! The layer's cost per request on the memory store: a plain check against
//! estimate-then-settle, in one process.
//!
//! Three rows, each a request through `RateLimit` (the service cloned per
//! request, as axum does) to an inner service answering a one-chunk body,
//! the body read to its end, then one yield so that a spawned settle runs:
//!
//! - `check`: a limit of cost 100 (`limit_with_cost`);
//! - `settle`: a usage limit estimating 100, the response reporting
//!   `Usage(40)`, so the body's end spawns a settle that refunds 60;
//! - `settle_no_report`: the same usage limit, the response reporting
//!   nothing, so the estimate stands and no settle is spawned.
//!
//! ```text
//! cargo bench -p tollgate-tower --bench settle                  # paired timings
//! cargo bench -p tollgate-tower --bench settle -- --instructions  # callgrind, per request
//! ```
//!
//! Timings: 15 rounds of a batch of each row, alternating in a new order
//! each round; the median ns per request of each row, and the median of
//! each round's ratio to `check`. Instructions (needs valgrind): each row
//! runs in a child process under callgrind with two request counts, and
//! the difference divided by the difference in requests is one request's
//! instructions, the setup cancelled out. After every run the bench checks
//! that the store holds exactly what the requests used, so a settle that
//! did not run fails it.

use std::convert::Infallible;
use std::hint::black_box;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use tollgate::{ManualClock, MemoryStore, Policy, Store};
use tollgate_tower::extract::Global;
use tollgate_tower::{RateLimitLayer, Usage};
use tower::{Layer, ServiceExt, service_fn};

const ROWS: [&str; 3] = ["check", "settle", "settle_no_report"];
const ESTIMATE: u64 = 100;
const REPORTED: u64 = 40;

/// A limit no run comes near, on a frozen clock: every request passes and
/// the count only grows.
fn policy() -> Policy {
    Policy::fixed_window("bench", 1 << 40, Duration::from_secs(60)).unwrap()
}

/// One row's store and layer.
struct Row {
    name: &'static str,
    store: Arc<MemoryStore<ManualClock>>,
    layer: RateLimitLayer,
    /// Whether the inner service reports `Usage`.
    reports: bool,
}

impl Row {
    fn new(name: &'static str) -> Row {
        let store = Arc::new(MemoryStore::with_clock(ManualClock::new(1_000_000)));
        let builder = RateLimitLayer::builder_shared(store.clone());
        let layer = match name {
            "check" => builder.limit_with_cost(policy(), Global, ESTIMATE),
            _ => builder.usage_limit(policy(), Global).estimate(ESTIMATE),
        }
        .build()
        .unwrap();
        Row {
            name,
            store,
            layer,
            reports: name == "settle",
        }
    }

    /// What each request leaves in the store.
    fn per_request(&self) -> u64 {
        if self.reports { REPORTED } else { ESTIMATE }
    }

    /// Sends `n` requests, one after another.
    async fn run(&self, n: u64) {
        let reports = self.reports;
        let service = self
            .layer
            .layer(service_fn(move |_: Request<()>| async move {
                let mut response = Response::new(Full::new(Bytes::from_static(b"answer")));
                if reports {
                    response.extensions_mut().insert(Usage(REPORTED));
                }
                Ok::<_, Infallible>(response)
            }));
        for _ in 0..n {
            let response = service.clone().oneshot(Request::new(())).await.unwrap();
            black_box(response.into_body().collect().await.unwrap());
            tokio::task::yield_now().await;
        }
    }

    /// What the store holds: the units of every request so far.
    async fn used(&self) -> u64 {
        let remaining = self
            .store
            .check(&policy(), b"global", 0)
            .await
            .unwrap()
            .remaining;
        (1 << 40) - remaining
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The paired timings.
fn paired() {
    const ROUNDS: usize = 15;
    const BATCH: u64 = 20_000;
    let runtime = runtime();
    let rows: Vec<Row> = ROWS.iter().map(|name| Row::new(name)).collect();
    let mut sent = vec![0u64; rows.len()];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); rows.len()];
    for round in 0..ROUNDS {
        for turn in 0..rows.len() {
            let which = (turn + round) % rows.len();
            let start = Instant::now();
            runtime.block_on(rows[which].run(BATCH));
            times[which].push(start.elapsed().as_nanos() as f64 / BATCH as f64);
            sent[which] += BATCH;
        }
    }
    for (row, sent) in rows.iter().zip(&sent) {
        let used = runtime.block_on(row.used());
        assert_eq!(
            used,
            sent * row.per_request(),
            "{}: the store's count",
            row.name
        );
    }
    println!(
        "ns per request, median of {ROUNDS} rounds of {BATCH}; ratio to check per round (median, middle half)"
    );
    for (i, row) in rows.iter().enumerate() {
        let mut ratios: Vec<f64> = times[i].iter().zip(&times[0]).map(|(t, c)| t / c).collect();
        ratios.sort_by(f64::total_cmp);
        println!(
            "  {:<17} {:>8.0} ns   ratio {:.2} ({:.2}–{:.2})",
            row.name,
            median(times[i].clone()),
            ratios[ratios.len() / 2],
            ratios[ratios.len() / 4],
            ratios[ratios.len() * 3 / 4],
        );
    }
}

/// `--row NAME --requests N`: sends N requests of one row and checks the
/// store (the child process callgrind counts).
fn child(name: &str, n: u64) {
    let runtime = runtime();
    let row = Row::new(ROWS.into_iter().find(|r| *r == name).expect("a row name"));
    runtime.block_on(row.run(n));
    assert_eq!(runtime.block_on(row.used()), n * row.per_request());
}

/// Instructions of one run of `row` with `n` requests, under callgrind.
fn callgrind(row: &str, n: u64) -> u64 {
    let dir = std::env::temp_dir().join(format!("tollgate-tower-callgrind-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("{row}-{n}.out"));
    let status = Command::new("valgrind")
        .args(["--tool=callgrind", "--quiet"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(std::env::current_exe().unwrap())
        .args(["--row", row, "--requests", &n.to_string()])
        .status()
        .expect("valgrind (package valgrind)");
    assert!(status.success(), "callgrind run of {row} failed");
    let text = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    text.lines()
        .find_map(|l| l.strip_prefix("summary: "))
        .and_then(|s| s.trim().parse().ok())
        .expect("callgrind's summary line")
}

fn instructions() {
    const FEW: u64 = 2_000;
    const MANY: u64 = 12_000;
    println!(
        "instructions per request (callgrind: runs of {MANY} and {FEW} requests, the difference / {})",
        MANY - FEW
    );
    let mut check = 0.0;
    for row in ROWS {
        let per = (callgrind(row, MANY) - callgrind(row, FEW)) as f64 / (MANY - FEW) as f64;
        if row == "check" {
            check = per;
        }
        println!("  {row:<17} {per:>8.0}   ratio {:.2}", per / check);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    if let (Some(row), Some(n)) = (value("--row"), value("--requests")) {
        child(&row, n.parse().expect("--requests N"));
    } else if args.iter().any(|a| a == "--instructions") {
        instructions();
    } else if args.iter().any(|a| a == "--bench") || args.len() == 1 {
        paired();
    }
}

//! One limit across regions (docs/regions.md), on real servers this
//! benchmark starts: 2 and 3 regions, each a `redis-server` with its
//! regional store and replicator, linked through `TcpProxy`s adding 80 ms
//! each way; sync every 100 ms and 1 s; windows of 1 s, 60 s and 1 h.
//!
//! Each region runs 4 callers on one hot key, each pausing 8 ms between
//! calls (at most 500 calls/s a region). Windows are named by a clock the
//! benchmark holds in each window for `min(window, 3 s)` of real time,
//! then moves on: a 60 s window's limit is reached in its first second,
//! and the rest of it admits nothing, so holding it longer would change
//! no figure (a 1 h window's the same: docs/regions.md).
//!
//! Per row: the worst excess over the limit of any window, beside the
//! bound computed for that window (`limit + Σ_{j ≠ i*} a_j(Δ)`, with the
//! measured Δ); the decision latency p50/p99 beside a plain fixed window
//! on the same local Redis (one region's decision), measured in the same
//! run under the same callers; and Redis calls per decision: the
//! decision's own in each region (script calls its server counted, `INFO
//! commandstats`, less the other replicators' scripts landing there) and
//! replication's (every command the replicators sent, local and remote,
//! per decision).
//!
//! `cargo bench -p tollgate --features redis --bench regions [-- --windows N] [--regions 2|3]`
//! (1 h windows: the limit 1000 as for 60 s; the row checks that nothing
//! changes with the window's length, as the docs claim.)

#[path = "../tests/regions/support.rs"]
#[allow(dead_code)]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tollgate::{Policy, Store};

use support::{Mesh, MeshSpec, aligned_now};

const CALLERS: usize = 4;
const PAUSE: Duration = Duration::from_millis(8);
const DELAY: Duration = Duration::from_millis(80);
const HOLD: Duration = Duration::from_secs(3);

struct Row {
    regions: usize,
    sync: Duration,
    window: Duration,
    limit: u64,
    worst_excess: u64,
    bound_excess: u64,
    delta: Duration,
    p50: Duration,
    p99: Duration,
    base_p50: Duration,
    base_p99: Duration,
    /// Per region.
    local_calls: Vec<f64>,
    remote_calls: f64,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

/// Runs the callers of every region on `policy`'s hot key for `hold`:
/// each region's admissions (sent, returned) and every call's latency.
async fn load(
    mesh: &Arc<Mesh>,
    policy: &Policy,
    hold: Duration,
) -> (Vec<Vec<(Instant, Instant)>>, Vec<Vec<Duration>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for region in 0..mesh.stores.len() {
        for _ in 0..CALLERS {
            let (mesh, policy, stop) = (mesh.clone(), policy.clone(), stop.clone());
            tasks.push((
                region,
                tokio::spawn(async move {
                    let (mut admitted, mut latency) = (Vec::new(), Vec::new());
                    while !stop.load(Ordering::Relaxed) {
                        let sent = Instant::now();
                        let d = mesh.stores[region].check(&policy, b"hot", 1).await;
                        let back = Instant::now();
                        latency.push(back - sent);
                        // A call that failed (the client's response timeout
                        // on a machine under load) admitted no request; if
                        // its script ran, Redis counted it as taken, which
                        // leaves the others less.
                        if d.is_ok_and(|d| d.allowed) {
                            admitted.push((sent, back));
                        }
                        tokio::time::sleep(PAUSE).await;
                    }
                    (admitted, latency)
                }),
            ));
        }
    }
    tokio::time::sleep(hold).await;
    stop.store(true, Ordering::Relaxed);
    let mut admitted = vec![Vec::new(); mesh.stores.len()];
    let mut latency = vec![Vec::new(); mesh.stores.len()];
    for (region, task) in tasks {
        let (a, l) = task.await.unwrap();
        admitted[region].extend(a);
        latency[region].extend(l);
    }
    (admitted, latency)
}

async fn row(regions: usize, sync: Duration, window: Duration, windows: usize) -> Row {
    let names = &["eu", "us", "ap"][..regions];
    let mesh = Arc::new(
        Mesh::start(MeshSpec {
            names,
            cluster: None,
            delay: DELAY,
            sync,
            partition_after: Duration::from_secs(60),
            global: &["hot"],
            start: aligned_now(window),
        })
        .await,
    );
    let limit = if window < Duration::from_secs(60) {
        400
    } else {
        1000
    };
    let policy = Policy::fixed_window("hot", limit, window).unwrap();
    let plain = Policy::fixed_window("plain", limit, window).unwrap();
    // Connected before the load (a first connect over the 160 ms round
    // trip may fail on a loaded machine: tried again).
    let mut tries = 0;
    while !mesh.round().await.is_empty() {
        tries += 1;
        assert!(tries < 5, "the links never connected");
    }
    let replicators = mesh.run();
    let hold = window.min(HOLD);
    let (mut worst, mut bound_worst, mut delta_worst) = (0, 0, Duration::ZERO);
    let mut latencies = Vec::new();
    let evalsha_before: Vec<u64> = mesh.redis.iter().map(|r| r.evalsha()).collect();
    let calls_before: u64 = mesh.replicators.iter().map(|r| r.calls()).sum();
    let scripts_before: Vec<u64> = mesh.replicators.iter().map(|r| r.script_calls()).collect();
    let mut decisions = vec![0u64; regions];
    for _ in 0..windows {
        mesh.stores.iter().for_each(|s| s.reset_max_staleness());
        let (admitted, latency) = load(&mesh, &policy, hold).await;
        for (region, latency) in latency.into_iter().enumerate() {
            decisions[region] += latency.len() as u64;
            latencies.extend(latency);
        }
        let delta_into = |i: usize| {
            (0..regions)
                .filter(|&j| j != i)
                .map(|j| {
                    let links = mesh.stores[j].links();
                    links
                        .iter()
                        .find(|l| l.region == names[i])
                        .unwrap()
                        .max_staleness
                })
                .max()
                .unwrap()
        };
        let last = |i: usize| admitted[i].last().map(|&(sent, _)| sent);
        let i_star = (0..regions)
            .filter(|&i| last(i).is_some())
            .max_by_key(|&i| last(i))
            .unwrap();
        let (t, delta) = (last(i_star).unwrap(), delta_into(i_star));
        let unseen: u64 = (0..regions)
            .filter(|&j| j != i_star)
            .map(|j| {
                admitted[j]
                    .iter()
                    .filter(|&&(_, at)| at + delta > t)
                    .count() as u64
            })
            .sum();
        let total: u64 = admitted.iter().map(|a| a.len() as u64).sum();
        assert!(
            total <= limit + unseen,
            "{total} admitted, bound {}",
            limit + unseen
        );
        worst = worst.max(total.saturating_sub(limit));
        bound_worst = bound_worst.max(unseen);
        delta_worst = delta_worst.max(delta);
        mesh.clock.advance(window);
    }
    // Redis calls per decision in each region: the decision's own
    // (`EVALSHA`s the region's server ran, less the merges and heartbeats
    // the other regions' replicators ran there, which are scripts too:
    // each sends every remote region the same rounds, so a replicator's
    // script calls are split evenly over its remotes), and the
    // replicators' (every command they sent, local and remote).
    let replication: u64 = mesh.replicators.iter().map(|r| r.calls()).sum::<u64>() - calls_before;
    let scripts: Vec<u64> = mesh
        .replicators
        .iter()
        .zip(&scripts_before)
        .map(|(r, before)| r.script_calls() - before)
        .collect();
    let local_calls = (0..regions)
        .map(|i| {
            let evalsha = mesh.redis[i].evalsha() - evalsha_before[i];
            let landed: u64 = (0..regions)
                .filter(|&j| j != i)
                .map(|j| scripts[j] / (regions as u64 - 1))
                .sum();
            evalsha.saturating_sub(landed) as f64 / decisions[i] as f64
        })
        .collect();
    let decisions: u64 = decisions.iter().sum();
    for r in replicators {
        r.abort();
    }
    // The baseline: one region's plain fixed window on the same Redis,
    // under the same callers (replication stopped).
    let (_, base) = load(&mesh, &plain, Duration::from_secs(2)).await;
    let mut base: Vec<Duration> = base.into_iter().flatten().collect();
    base.sort();
    latencies.sort();
    Row {
        regions,
        sync,
        window,
        limit,
        worst_excess: worst,
        bound_excess: bound_worst,
        delta: delta_worst,
        p50: percentile(&latencies, 0.5),
        p99: percentile(&latencies, 0.99),
        base_p50: percentile(&base, 0.5),
        base_p99: percentile(&base, 0.99),
        local_calls,
        remote_calls: replication as f64 / decisions as f64,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let windows = args
        .iter()
        .position(|a| a == "--windows")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(3);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "| regions | sync | window | limit | worst excess | bound's excess | Δ measured | p50 / p99 | one region p50 / p99 | decision's Redis calls, per region | replication calls / decision |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let counts: Vec<usize> = match args.iter().position(|a| a == "--regions") {
        Some(i) => vec![args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(2)],
        None => vec![2, 3],
    };
    for regions in counts {
        for sync in [Duration::from_millis(100), Duration::from_secs(1)] {
            for window in [
                Duration::from_secs(1),
                Duration::from_secs(60),
                Duration::from_secs(3600),
            ] {
                let r = runtime.block_on(row(regions, sync, window, windows));
                println!(
                    "| {} | {} | {} | {} | {} | {} | {:.2?} | {:.2?} / {:.2?} | {:.2?} / {:.2?} | {} | {:.2} |",
                    r.regions,
                    tollgate::format_duration(r.sync),
                    tollgate::format_duration(r.window),
                    r.limit,
                    r.worst_excess,
                    r.bound_excess,
                    r.delta,
                    r.p50,
                    r.p99,
                    r.base_p50,
                    r.base_p99,
                    r.local_calls
                        .iter()
                        .map(|c| format!("{c:.2}"))
                        .collect::<Vec<_>>()
                        .join(" / "),
                    r.remote_calls,
                );
            }
        }
    }
}

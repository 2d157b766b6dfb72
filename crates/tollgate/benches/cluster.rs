//! Client CPU per decision on a Redis Cluster against a standalone server:
//! 256 concurrent callers deciding fixed-window checks on keys spread over
//! every slot, for a few seconds per setup, with this process's CPU time
//! (user + system, all threads, from `/proc/self/stat`) and each server's
//! (from `/proc/<pid>/stat`) read around the run. A 2-core machine cannot
//! show three primaries' worth of throughput, but it can count what each
//! decision costs the client and the servers, which is what the capacity
//! of a larger cluster follows from.
//!
//! `cargo bench -p tollgate --features redis --bench cluster [-- --seconds N]
//! [--rounds N] [--only TEXT] [--callers N]` (256 by default) prints, for a standalone server and a
//! 3-primary cluster, each with per-node pipelining on and off, round after
//! round (3 by default; `--only` keeps the setups whose name contains
//! TEXT, for a profiler): decisions/s, client CPU µs per decision,
//! servers' CPU µs per decision, and the 99th percentile of a call's
//! latency (one call in 16 timed), then per round and as medians the ratios
//! to standalone, and the load average the run saw.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tollgate::Policy;
use tollgate::store::Store;
use tollgate::store::redis::RedisStore;
use tollgate_testkit::{RedisCluster, RedisServer};

/// CPU seconds (user + system) of a process, from `/proc/<pid>/stat`.
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc (Linux)");
    // Fields after the command (in parentheses): state is field 3, utime 14, stime 15.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / clock_ticks()
}

fn clock_ticks() -> f64 {
    let out = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .expect("getconf");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

struct Measured {
    per_second: f64,
    client_us: f64,
    server_us: f64,
    /// Of the decisions, the share that left in pipelines, and the
    /// pipelines' mean length.
    piped: f64,
    pipeline_len: f64,
    /// The 99th percentile of a call's latency (of one call in 16).
    p99: Duration,
}

async fn run(store: Arc<RedisStore>, servers: &[u32], seconds: f64, callers: usize) -> Measured {
    let policy = Arc::new(Policy::fixed_window("cpu", 1 << 40, Duration::from_secs(3600)).unwrap());
    // Warm: every key's window exists, as in steady traffic.
    let warm: Vec<_> = (0..callers)
        .map(|c| {
            let (store, policy) = (store.clone(), policy.clone());
            tokio::spawn(async move {
                for n in 0..100 {
                    store
                        .check(&policy, format!("k{c}-{n}").as_bytes(), 1)
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for w in warm {
        w.await.unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let sent_before = store.pipelined();
    let client_before = cpu_seconds("self");
    let servers_before: f64 = servers.iter().map(|p| cpu_seconds(&p.to_string())).sum();
    let start = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|c| {
            let (store, policy, stop, done) =
                (store.clone(), policy.clone(), stop.clone(), done.clone());
            tokio::spawn(async move {
                let mut n = 0u64;
                let mut took = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("k{c}-{}", n % 100);
                    // One call in 16 timed: a clock read on every call
                    // would add to the CPU this counts.
                    let start = n.is_multiple_of(16).then(Instant::now);
                    store.check(&policy, key.as_bytes(), 1).await.unwrap();
                    if let Some(start) = start {
                        took.push(start.elapsed());
                    }
                    n += 1;
                }
                done.fetch_add(n, Ordering::Relaxed);
                took
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut took = Vec::new();
    for t in tasks {
        took.extend(t.await.unwrap());
    }
    took.sort_unstable();
    let p99 = took.get(took.len() * 99 / 100).copied().unwrap_or_default();
    let elapsed = start.elapsed().as_secs_f64();
    let client = cpu_seconds("self") - client_before;
    let servers_cpu = servers
        .iter()
        .map(|p| cpu_seconds(&p.to_string()))
        .sum::<f64>()
        - servers_before;
    let decisions = done.load(Ordering::Relaxed) as f64;
    let sent = store.pipelined();
    let (pipelines, calls) = (
        (sent.pipelines - sent_before.pipelines) as f64,
        (sent.calls - sent_before.calls) as f64,
    );
    Measured {
        per_second: decisions / elapsed,
        client_us: client / decisions * 1e6,
        server_us: servers_cpu / decisions * 1e6,
        piped: calls / decisions,
        pipeline_len: if pipelines > 0.0 {
            calls / pipelines
        } else {
            0.0
        },
        p99,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let seconds = flag("--seconds").map_or(4.0, |s| s.parse().expect("--seconds N"));
    let rounds = flag("--rounds").map_or(3, |s| s.parse().expect("--rounds N"));
    let only = flag("--only").unwrap_or_default();
    let callers = flag("--callers").map_or(256, |s| s.parse().expect("--callers N"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = RedisServer::start();
    let cluster = RedisCluster::start(3, 0);
    let cluster_pids: Vec<u32> = cluster.primaries().iter().map(|n| n.pid()).collect();
    println!(
        "{callers} callers, fixed window (server clock), keys over every slot, {seconds} s per row"
    );
    println!(
        "{:<34} {:>12} {:>16} {:>17} {:>7} {:>9} {:>9}",
        "setup", "decisions/s", "client µs/dec", "servers µs/dec", "piped", "pipe len", "p99 ms"
    );
    let mut rows = Vec::new();
    let load_before = load_average();
    rt.block_on(async {
        for round in 0..rounds {
            for (name, cluster_on, pipelining) in SETUPS {
                if !name.contains(&only) {
                    continue;
                }
                let urls = if cluster_on {
                    cluster.seed_urls()
                } else {
                    vec![server.url()]
                };
                let store = Arc::new(
                    RedisStore::builder(urls)
                        .prefix(format!("r{round}:"))
                        .pipelining(pipelining)
                        .connect()
                        .await
                        .unwrap(),
                );
                let pids = if cluster_on {
                    cluster_pids.clone()
                } else {
                    vec![server.pid()]
                };
                let m = run(store, &pids, seconds, callers).await;
                println!(
                    "{name:<34} {:>12.0} {:>16.2} {:>17.2} {:>7.2} {:>9.1} {:>9.2}",
                    m.per_second,
                    m.client_us,
                    m.server_us,
                    m.piped,
                    m.pipeline_len,
                    m.p99.as_secs_f64() * 1e3
                );
                rows.push((round, name, m));
            }
        }
    });
    println!(
        "load average before: {load_before}; after: {}",
        load_average()
    );
    let client = |round: usize, name: &str| {
        rows.iter()
            .find(|r| r.0 == round && r.1 == name)
            .map(|r| r.2.client_us)
    };
    let mut ratios = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let Some(base) = client(round, SETUPS[0].0) else {
            continue;
        };
        let mut line = format!("round {round}: client CPU per decision, cluster / standalone:");
        if let Some(piped) = client(round, SETUPS[1].0) {
            line += &format!(" per-node pipes {:.2}", piped / base);
            ratios.0.push(piped / base);
        }
        if let Some(alone) = client(round, SETUPS[3].0) {
            line += &format!(" alone {:.2}", alone / base);
            ratios.1.push(alone / base);
        }
        println!("{line}");
    }
    for (name, ..) in SETUPS {
        let mut client: Vec<f64> = rows
            .iter()
            .filter(|r| r.1 == name)
            .map(|r| r.2.client_us)
            .collect();
        let mut server: Vec<f64> = rows
            .iter()
            .filter(|r| r.1 == name)
            .map(|r| r.2.server_us)
            .collect();
        if !client.is_empty() {
            println!(
                "median {name:<34} client {:.2} µs/dec, servers {:.2} µs/dec",
                median(&mut client),
                median(&mut server)
            );
        }
    }
    for (name, ratios) in [("per-node pipes", &mut ratios.0), ("alone", &mut ratios.1)] {
        if !ratios.is_empty() {
            println!(
                "median ratio, cluster / standalone (pipelined) client CPU, {name}: {:.2}",
                median(ratios)
            );
        }
    }
}

/// The setups, in the order each round runs them: name, on the cluster,
/// pipelined.
const SETUPS: [(&str, bool, bool); 4] = [
    ("standalone, pipelined", false, true),
    ("3-primary cluster, per-node pipes", true, true),
    ("standalone, alone", false, false),
    ("3-primary cluster, alone", true, false),
];

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// The 1-, 5- and 15-minute load averages, from `/proc/loadavg`.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

//! `tollgate simulate --regions` against real regions: one trace replayed
//! by the simulator, and sent in real time to two `tollgate serve`
//! regions (each its own `redis-server`, 80 ms links, sync every 100 ms),
//! request i to region i mod 2 as the simulator deals them.
//!
//! Neither run is exact about the other (the real Δ is what the machine
//! gives), so they are compared through what docs/regions.md proves of
//! both: in every window, the total admitted is at most the limit plus
//! the bound's excess (the simulator's for its run; for the real run, the
//! same sum counted from the requests' times with the Δ the regions
//! measured), and at least the limit once a request was denied. So the
//! two totals differ by at most the larger of the two bounds' excesses.

mod common;

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::regions::{Regions, Setup, answer, links};
use common::service::{Service, temp_dir};
use common::{simulate, stdout};

const LIMIT: u64 = 100;
const WINDOW_MS: u64 = 4000;
const POLICIES: &str = r#"
[[policy]]
name = "api"
algorithm = "fixed_window"
limit = 100
window = "4s"
"#;

/// The trace: in each of two windows, 150 requests 10 ms apart from 200 ms
/// in (well inside the window, so a late request stays in it).
fn trace() -> Vec<u64> {
    (0..2)
        .flat_map(|w| (0..150).map(move |i| w * WINDOW_MS + 200 + i * 10))
        .collect()
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// One request of the real run: its region, when it was sent and answered
/// (unix ms), and whether it was admitted.
#[derive(Debug, Clone, Copy)]
struct Sent {
    region: usize,
    sent: u64,
    back: u64,
    allowed: bool,
}

/// Sends the trace in real time from `start` (a window's start, unix ms),
/// each region's share from a thread of its own, on `key`.
fn send(services: &[Service], times: &[u64], start: u64, key: &str) -> Vec<Sent> {
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..services.len())
            .map(|region| {
                scope.spawn(move || {
                    let body = format!(r#"{{"policy":"api","key":"{key}"}}"#);
                    let mut sent = Vec::new();
                    for (i, &t) in times.iter().enumerate() {
                        if i % services.len() != region {
                            continue;
                        }
                        let due = start + t;
                        let now = unix_ms();
                        if due > now {
                            std::thread::sleep(Duration::from_millis(due - now));
                        }
                        let at = unix_ms();
                        let (status, body) =
                            answer(&services[region].request("POST", "/v1/check", &body));
                        assert!(status == 200 || status == 429, "{status}: {body}");
                        sent.push((
                            i,
                            Sent {
                                region,
                                sent: at,
                                back: unix_ms(),
                                allowed: status == 200,
                            },
                        ));
                    }
                    sent
                })
            })
            .collect();
        let mut all: Vec<(usize, Sent)> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        all.sort_by_key(|&(i, _)| i);
        all.into_iter().map(|(_, s)| s).collect()
    })
}

/// The real run's bound's excess in one window: what every region but
/// the one whose admission came last admitted within `delta` ms before it.
fn real_bound(admitted: &[Sent], delta: u64) -> u64 {
    let Some(last) = admitted.iter().max_by_key(|s| s.sent) else {
        return 0;
    };
    admitted
        .iter()
        .filter(|s| s.region != last.region && s.back + delta > last.sent)
        .count() as u64
}

/// The simulator's decisions (`allowed` per request, in trace order) and
/// its regions report's `bound_excess`.
fn simulated(dir: &Path, times: &[u64]) -> (Vec<bool>, u64) {
    let config = dir.join("policies.toml");
    std::fs::write(&config, POLICIES).unwrap();
    let trace = dir.join("trace.csv");
    let mut text = String::from("t_ms,policy,key,cost\n");
    for t in times {
        text += &format!("{t},api,k,1\n");
    }
    std::fs::write(&trace, text).unwrap();
    let (config, trace) = (config.display().to_string(), trace.display().to_string());
    let out = simulate(&[
        "--config",
        &config,
        "--trace",
        &trace,
        "--regions",
        "2",
        "--sync-interval",
        "100ms",
        "--link-latency",
        "80ms",
    ]);
    let decisions: Vec<bool> = stdout(&out)
        .lines()
        .skip(1)
        .map(|line| line.split(',').nth(4).unwrap() == "true")
        .collect();
    // The regions report, on stderr without --summary.
    let report = String::from_utf8(out.stderr).unwrap();
    let mut lines = report
        .lines()
        .skip_while(|l| !l.starts_with("policy,limit"));
    let header: Vec<&str> = lines.next().expect("a regions report").split(',').collect();
    let row: Vec<&str> = lines.next().expect("a row for api").split(',').collect();
    let field = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
    assert_eq!(field("policy"), "api");
    assert_eq!(field("delta"), "260ms", "100 ms + 2 × 80 ms");
    (decisions, field("bound_excess").parse().unwrap())
}

#[test]
fn the_simulator_and_two_real_regions_agree_within_the_bound() {
    let dir = temp_dir();
    let times = trace();
    let (sim, sim_bound) = simulated(&dir, &times);
    assert_eq!(sim.len(), times.len());

    let setup = Setup {
        sync: "100ms",
        // Never partitioned here: the comparison is of linked regions.
        partition_after: "60s",
        policies: POLICIES,
    };
    let regions = Regions::start(&dir, &["eu", "us"], &setup);
    regions.wait_connected();
    // A request that the machine delays past its window's end would be
    // counted in the next one: such a run is tried again, on a fresh key.
    let (real, start) = (0..3)
        .find_map(|attempt| {
            let start = (unix_ms() / WINDOW_MS + 1) * WINDOW_MS;
            let real = send(&regions.services, &times, start, &format!("k{attempt}"));
            let in_window = real
                .iter()
                .zip(&times)
                .all(|(s, t)| s.back < start + (t / WINDOW_MS + 1) * WINDOW_MS);
            in_window.then_some((real, start))
        })
        .expect("three runs with a request sent past its window's end");
    let delta = regions
        .services
        .iter()
        .flat_map(|s| links(s)["links"].as_array().unwrap().clone())
        .map(|l| l["max_staleness_ms"].as_u64().unwrap())
        .max()
        .unwrap();
    eprintln!("measured Δ {delta} ms; the simulator's bound's excess {sim_bound}");

    for w in 0..2 {
        let in_window = |i: &usize| times[*i] / WINDOW_MS == w;
        let indices: Vec<usize> = (0..times.len()).filter(in_window).collect();
        let sim_total = indices.iter().filter(|&&i| sim[i]).count() as u64;
        let admitted: Vec<Sent> = indices
            .iter()
            .map(|&i| real[i])
            .filter(|s| s.allowed)
            .collect();
        let real_total = admitted.len() as u64;
        let bound = real_bound(&admitted, delta);
        eprintln!(
            "window {w} (from {start}): simulated {sim_total}, real {real_total} (bound's excess {bound})"
        );
        assert!(sim_total <= LIMIT + sim_bound, "simulated {sim_total}");
        assert!(real_total <= LIMIT + bound, "real {real_total}");
        if indices.iter().any(|&i| !sim[i]) {
            assert!(sim_total >= LIMIT, "simulated {sim_total} with denials");
        }
        if indices.iter().any(|&i| !real[i].allowed) {
            assert!(real_total >= LIMIT, "real {real_total} with denials");
        }
        assert!(
            sim_total.abs_diff(real_total) <= sim_bound.max(bound),
            "simulated {sim_total}, real {real_total}"
        );
    }
}

#[test]
fn bad_region_options_are_refused_with_what_is_wrong() {
    let cases: [(&[&str], &str); 6] = [
        // books.toml's other policies are sliding: not global.
        (&["--regions", "2"], "policy `books-log` cannot be global"),
        (&["--regions", "1"], "--regions"),
        (&["--regions", "17"], "--regions"),
        (
            &["--sync-interval", "1s"],
            "--sync-interval is for --regions N",
        ),
        (
            &["--regions", "2", "--sync-interval", "0ms"],
            "sync_interval",
        ),
        (
            &["--regions", "2", "--redis", "redis://127.0.0.1:1"],
            "give one",
        ),
    ];
    for (args, needle) in cases {
        let mut all = vec![
            "--config",
            "examples/books.toml",
            "--trace",
            "examples/boundary-burst.csv",
        ];
        all.extend(args);
        let out = simulate(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {needle:?} not in {err}");
    }
}

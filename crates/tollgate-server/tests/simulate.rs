//! `tollgate simulate`, run as a user runs it: the README's example, its
//! CSV, bad input (exit 2, a message naming file, line and field), and
//! `--redis` on a standalone server and a cluster that the test starts.

mod common;

use common::{simulate, stdout};

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use tollgate::{ManualClock, MemoryStore, Policy};
use tollgate_testkit::{RedisCluster, RedisServer};

fn example(extra: &[&str]) -> Output {
    let mut args = vec![
        "--config",
        "examples/books.toml",
        "--trace",
        "examples/boundary-burst.csv",
    ];
    args.extend_from_slice(extra);
    simulate(&args)
}

#[test]
fn the_readme_example_shows_the_boundary_burst() {
    let summary = stdout(&example(&["--summary"]));
    let mut lines = summary.lines();
    assert_eq!(
        lines.next(),
        Some("policy,algorithm,requests,admitted,denied,max_admitted_in_window,window")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let row = |name: &str| rows.iter().find(|r| r[0] == name).expect(name).clone();
    let num = |r: &[&str], i: usize| r[i].parse::<u64>().unwrap();
    // The trace: 20, 100, 100, 20 requests in four half-minutes.
    let fixed = row("books");
    assert_eq!(
        (num(&fixed, 2), num(&fixed, 3)),
        (240, 240),
        "fixed windows admit all"
    );
    assert_eq!(
        num(&fixed, 5),
        200,
        "200 inside one minute across the boundary"
    );
    for name in ["books-log", "books-sliding"] {
        let r = row(name);
        assert_eq!(num(&r, 2), 240);
        assert_eq!(num(&r, 3) + num(&r, 4), 240);
        assert!(num(&r, 3) < 240, "{name} denies part of the burst");
    }
    assert!(
        num(&row("books-log"), 5) <= 120,
        "the log never exceeds 120 a minute"
    );
}

#[test]
fn the_csv_matches_the_library_decision_by_decision() {
    let csv = stdout(&example(&[]));
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("t_ms,policy,key,cost,allowed,remaining,retry_after_ms,reset_after_ms,delay_ms,error")
    );
    let minute = Duration::from_secs(60);
    let policies = [
        Policy::fixed_window("books", 120, minute).unwrap(),
        Policy::sliding_log("books-log", 120, minute).unwrap(),
        Policy::sliding_window("books-sliding", 120, minute).unwrap(),
    ];
    let clock = ManualClock::new(0);
    let store = MemoryStore::with_clock(clock.clone());
    let mut n = 0;
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 10, "{line}");
        let t_ms: u64 = f[0].parse().unwrap();
        clock.set(t_ms * 1000);
        let policy = policies.iter().find(|p| p.name() == f[1]).unwrap();
        let d = store
            .check_sync(policy, f[2].as_bytes(), f[3].parse().unwrap())
            .unwrap();
        let ms = |d: Duration| d.as_micros().div_ceil(1000).to_string();
        assert_eq!(f[4], d.allowed.to_string(), "{line}");
        assert_eq!(f[5], d.remaining.to_string(), "{line}");
        assert_eq!(f[6], ms(d.retry_after), "{line}");
        assert_eq!(f[7], ms(d.reset_after), "{line}");
        assert_eq!(f[8], ms(d.delay), "{line}");
        assert_eq!(f[9], "", "{line}");
        n += 1;
    }
    assert_eq!(n, 720, "240 requests under each of three policies");
}

/// Writes `config` and `trace` to a temporary directory and runs them.
fn run_files(config: &str, trace: &str) -> (Output, PathBuf) {
    let dir = common::temp_dir();
    let (c, t) = (dir.join("limits.toml"), dir.join("trace.csv"));
    std::fs::write(&c, config).unwrap();
    std::fs::write(&t, trace).unwrap();
    let out = simulate(&[
        "--config",
        c.to_str().unwrap(),
        "--trace",
        t.to_str().unwrap(),
    ]);
    (out, dir)
}

const GOOD_CONFIG: &str =
    "[[policy]]\nname = \"p\"\nalgorithm = \"fixed_window\"\nlimit = 2\nwindow = \"1s\"\n";
const HEADER: &str = "t_ms,policy,key,cost\n";

#[test]
fn bad_input_exits_2_and_names_file_line_and_field() {
    let cases: Vec<(String, String, Vec<&str>)> = vec![
        (
            GOOD_CONFIG.into(),
            format!("{HEADER}0,nope,k,1\n"),
            vec!["trace.csv:2", "nope"],
        ),
        (
            GOOD_CONFIG.replace("fixed_window", "fixed_windo"),
            format!("{HEADER}0,p,k,1\n"),
            vec!["limits.toml:3", "algorithm"],
        ),
        (
            GOOD_CONFIG.replace("limit = 2\n", ""),
            format!("{HEADER}0,p,k,1\n"),
            vec!["limits.toml", "limit"],
        ),
        (
            GOOD_CONFIG.replace("\"1s\"", "\"0s\""),
            format!("{HEADER}0,p,k,1\n"),
            vec!["limits.toml:5", "window"],
        ),
        (
            GOOD_CONFIG.into(),
            format!("{HEADER}0,p,k\n"),
            vec!["trace.csv:2"],
        ),
        (
            GOOD_CONFIG.into(),
            format!("{HEADER}5,p,k,1\n4,p,k,1\n"),
            vec!["trace.csv:3", "t_ms"],
        ),
        (
            GOOD_CONFIG.into(),
            format!("{HEADER}0,p,k,-1\n"),
            vec!["trace.csv:2", "cost"],
        ),
        (
            GOOD_CONFIG.into(),
            "time,policy,key,cost\n".into(),
            vec!["trace.csv:1"],
        ),
    ];
    for (config, trace, needles) in cases {
        let (out, dir) = run_files(&config, &trace);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{needles:?}: {err}");
        assert!(out.stdout.is_empty() || !String::from_utf8_lossy(&out.stdout).contains("true"));
        for needle in &needles {
            assert!(err.contains(needle), "{needle:?} not in: {err}");
        }
        std::fs::remove_dir_all(dir).ok();
    }
}

/// Hostile traces: a key over the library's 1,024 bytes, numbers with a
/// sign or spaces, a time whose microseconds overflow, bad UTF-8, a huge
/// bad line (not echoed whole).
#[test]
fn hostile_traces_are_refused_with_a_bounded_message() {
    let long_key = "k".repeat(1_025);
    let huge = "x".repeat(10 << 20);
    let cases: Vec<(String, Vec<&str>)> = vec![
        (
            format!("{HEADER}0,p,{long_key},1\n"),
            vec![
                "trace.csv:2",
                "`key` is 1025 bytes long; the maximum is 1024",
            ],
        ),
        (
            format!("{HEADER}0,p,k,+3\n"),
            vec!["trace.csv:2", "`cost`", "+3"],
        ),
        (format!("{HEADER} 5,p,k,1\n"), vec!["trace.csv:2", "`t_ms`"]),
        (format!("{HEADER}+5,p,k,1\n"), vec!["trace.csv:2", "`t_ms`"]),
        (format!("{HEADER}0,p,k, 3\n"), vec!["trace.csv:2", "`cost`"]),
        (
            format!("{HEADER}9223372036854775807,p,k,1\n"),
            vec!["trace.csv:2", "`t_ms` must be at most 18446744073709551"],
        ),
        (
            format!("{HEADER}0,p,{huge}\n"),
            vec!["trace.csv:2", "bytes in all"],
        ),
        (format!("{HEADER}0,p,k,1\n0,p,caf\u{e9},1\n"), vec![]),
    ];
    for (trace, needles) in cases {
        let (out, dir) = run_files(GOOD_CONFIG, &trace);
        let err = String::from_utf8_lossy(&out.stderr);
        if needles.is_empty() {
            // valid UTF-8 passes
            assert_eq!(out.status.code(), Some(0), "{err}");
            continue;
        }
        assert_eq!(
            out.status.code(),
            Some(2),
            "{needles:?}: {}",
            &err[..err.len().min(300)]
        );
        assert!(err.len() < 1_000, "{} bytes of error", err.len());
        assert!(out.stdout.is_empty(), "nothing replayed");
        for needle in &needles {
            assert!(err.contains(needle), "{needle:?} not in: {err}");
        }
        std::fs::remove_dir_all(dir).ok();
    }
    // bad UTF-8 names its line
    let (_, dir) = run_files(GOOD_CONFIG, HEADER);
    std::fs::write(
        dir.join("trace.csv"),
        b"t_ms,policy,key,cost\n0,p,k,1\n0,p,\xff,1\n",
    )
    .unwrap();
    let out = simulate(&[
        "--config",
        dir.join("limits.toml").to_str().unwrap(),
        "--trace",
        dir.join("trace.csv").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("trace.csv:3: the text is not UTF-8"), "{err}");
    std::fs::remove_dir_all(dir).ok();
}

/// A header after a byte-order mark (as some editors save a CSV) is the
/// header.
#[test]
fn a_byte_order_mark_before_the_header_is_accepted() {
    let (out, dir) = run_files(GOOD_CONFIG, &format!("\u{feff}{HEADER}0,p,k,1\n"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        stdout(&out)
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("0,p,k,1,true")),
        "{}",
        stdout(&out)
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_missing_file_is_named() {
    let out = simulate(&[
        "--config",
        "no/such.toml",
        "--trace",
        "examples/boundary-burst.csv",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no/such.toml"));
}

#[test]
fn redis_replays_exactly_like_memory() {
    let memory = stdout(&example(&[]));
    let server = RedisServer::start();
    let on_redis = stdout(&example(&["--redis", &server.url()]));
    assert_eq!(on_redis, memory, "standalone Redis");
    let cluster = RedisCluster::start(3, 0);
    let mut args = vec![];
    let seeds = cluster.seed_urls();
    for url in &seeds {
        args.push("--redis");
        args.push(url.as_str());
    }
    assert_eq!(stdout(&example(&args)), memory, "Redis Cluster");
    let summary = stdout(&example(&["--summary", "--redis", &server.url()]));
    assert_eq!(summary, stdout(&example(&["--summary"])));
}

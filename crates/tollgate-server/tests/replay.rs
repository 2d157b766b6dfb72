//! `tollgate simulate` replaying access logs: a combined log and a JSON-lines
//! log decide exactly as the CSV trace of the same requests (which
//! `tests/simulate.rs` checks against the library), `--key` picks the key,
//! `--top` lists the keys denied most, and a bad line is an error naming
//! the file, the line and the field unless `--skip-bad-lines` counts it.

mod common;

use common::{simulate, stdout};

/// A file in this test process's scratch directory.
fn scratch(name: &str, text: &str) -> String {
    let path = common::temp_dir().join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

const CONFIG: &str = "[[policy]]\nname = \"p\"\nalgorithm = \"sliding_log\"\nlimit = 5\nwindow = \"10s\"\n\n[[policy]]\nname = \"q\"\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"10s\"\n";

/// 2026-03-02T09:00:00Z, in seconds since the epoch.
const NINE: u64 = 1_772_442_000;

/// Requests as (ms after 09:00:00 UTC, client, path): a client that sends
/// one request every 400 ms for 12 s, and two quiet ones.
fn requests() -> Vec<(u64, &'static str, &'static str)> {
    let mut r = Vec::new();
    for i in 0..30 {
        r.push((i * 400, "203.0.113.9", "/api/books/1"));
    }
    for i in 0..6 {
        r.push((i * 2_100, "198.51.100.4", "/api/authors/2"));
        r.push((i * 2_100 + 50, "198.51.100.17", "/search"));
    }
    r.sort();
    r
}

fn combined_time(ms: u64) -> String {
    let s = ms / 1_000;
    // The same instant written in UTC+01:00, as a server in Paris logs it.
    format!(
        "02/Mar/2026:{:02}:{:02}:{:02} +0100",
        10 + s / 3_600,
        s / 60 % 60,
        s % 60
    )
}

fn combined_log(whole_seconds: bool) -> String {
    requests()
        .iter()
        .filter(|(ms, _, _)| !whole_seconds || ms % 1_000 == 0)
        .map(|(ms, client, path)| {
            format!(
                "{client} - - [{}] \"GET {path}?page=2 HTTP/1.1\" 200 512 \"-\" \"curl/8.5.0\"\n",
                combined_time(*ms)
            )
        })
        .collect()
}

fn json_log() -> String {
    requests()
        .iter()
        .map(|(ms, client, path)| {
            let s = ms / 1_000;
            format!(
                "{{\"start_time\":\"2026-03-02T09:{:02}:{:02}.{:03}Z\",\"method\":\"GET\",\"path\":\"{path}\",\"downstream_remote_address\":\"{client}:40000\",\"tenant\":{{\"id\":\"t-{}\"}}}}\n",
                s / 60,
                s % 60,
                ms % 1_000,
                &client[client.len() - 1..]
            )
        })
        .collect()
}

/// The CSV trace of the same requests under policy `p`, keyed by `key`.
fn csv_trace(key: impl Fn(&str, &str) -> String, whole_seconds: bool) -> String {
    let mut csv = "t_ms,policy,key,cost\n".to_string();
    for (ms, client, path) in requests() {
        if whole_seconds && ms % 1_000 != 0 {
            continue;
        }
        csv.push_str(&format!(
            "{},p,{},1\n",
            NINE * 1_000 + ms,
            key(client, path)
        ));
    }
    csv
}

#[test]
fn logs_decide_exactly_like_the_csv_trace_of_their_requests() {
    let config = scratch("limits.toml", CONFIG);
    let run = |trace: &str, extra: &[&str]| {
        let mut args = vec!["--config", config.as_str(), "--trace", trace];
        args.extend_from_slice(extra);
        stdout(&simulate(&args))
    };
    // A combined log has whole seconds: only the requests on a second.
    let combined = scratch("access.log", &combined_log(true));
    let csv = scratch("combined.csv", &csv_trace(|c, _| c.into(), true));
    assert_eq!(run(&combined, &["--policy", "p"]), run(&csv, &[]));

    let by_path = scratch(
        "by-path.csv",
        &csv_trace(|_, p| format!("/{}", p.split('/').nth(1).unwrap()), true),
    );
    assert_eq!(
        run(&combined, &["--policy", "p", "--key", "path:1"]),
        run(&by_path, &[])
    );

    let json = scratch("envoy.jsonl", &json_log());
    let csv = scratch("json.csv", &csv_trace(|c, _| c.into(), false));
    let from_json = run(&json, &["--policy", "p"]);
    assert_eq!(from_json, run(&csv, &[]));
    assert!(from_json.contains(",false,"), "the busy client is denied");

    let by_field = scratch(
        "by-field.csv",
        &csv_trace(|c, p| format!("t-{} {p}", &c[c.len() - 1..]), false),
    );
    assert_eq!(
        run(&json, &["--policy", "p", "--key", "field:tenant.id,path"]),
        run(&by_field, &[])
    );
}

#[test]
fn top_lists_the_keys_denied_most() {
    let config = scratch("top.toml", CONFIG);
    let json = scratch("top.jsonl", &json_log());
    let out = stdout(&simulate(&[
        "--config",
        &config,
        "--trace",
        &json,
        "--compare",
        "--top",
        "2",
    ]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "policy,key,requests,denied");
    // 30 requests in 12 s at 5 per 10 s: the sliding log admits 5 in each
    // 10 s, so 10 of 30; the fixed window admits 5 per calendar 10 s.
    assert_eq!(lines[1], "p,203.0.113.9,30,20", "{out}");
    assert!(lines[2].starts_with("q,203.0.113.9,30,"), "{out}");
    assert_eq!(lines.len(), 3, "quiet clients are never denied: {out}");
}

#[test]
fn the_sample_logs_replay() {
    for (trace, key) in [
        ("examples/access.log", "client"),
        ("examples/envoy-access.jsonl", "header:x-api-key"),
    ] {
        let out = stdout(&simulate(&[
            "--config",
            "examples/books.toml",
            "--trace",
            trace,
            "--policy",
            "books-log",
            "--key",
            key,
            "--summary",
            "--top",
            "3",
        ]));
        assert!(
            out.starts_with("policy,algorithm,requests,admitted,denied"),
            "{out}"
        );
        let row = out.lines().nth(1).unwrap();
        assert!(
            row.starts_with("books-log,sliding_log,240,210,30,"),
            "{trace}: {row}"
        );
        let top = out
            .lines()
            .skip_while(|l| !l.starts_with("policy,key"))
            .nth(1);
        let busy = if key == "client" {
            "203.0.113.9"
        } else {
            "k-9"
        };
        assert_eq!(
            top,
            Some(format!("books-log,{busy},150,30").as_str()),
            "{out}"
        );
    }
}

#[test]
fn a_bad_line_names_file_line_and_field_or_is_skipped() {
    let config = scratch("bad.toml", CONFIG);
    let mut log = combined_log(true);
    let second = log.find('\n').unwrap() + 1;
    log.insert_str(
        second,
        "203.0.113.9 - - [02/Mar/2026:25:00:00 +0100] \"GET / HTTP/1.1\" 200 1\n",
    );
    let path = scratch("bad.log", &log);
    let out = simulate(&["--config", &config, "--trace", &path, "--policy", "p"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{path}:2: field `time`")),
        "file, line and field: {err}"
    );
    assert!(out.stdout.is_empty());

    let out = simulate(&[
        "--config",
        &config,
        "--trace",
        &path,
        "--policy",
        "p",
        "--skip-bad-lines",
        "--summary",
    ]);
    let summary = stdout(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("skipped 1 bad line;") && err.contains(":2:"),
        "{err}"
    );
    let good = log.lines().count() - 1;
    assert!(
        summary.contains(&format!("p,sliding_log,{good},")),
        "{summary}"
    );

    let json = scratch(
        "bad.jsonl",
        "{\"time\":1}\n{\"time\":2,\"path\":\"/\"}\nnot json\n",
    );
    let out = simulate(&[
        "--config", &config, "--trace", &json, "--policy", "p", "--key", "path",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("bad.jsonl:1: field `path`"), "{err}");
}

#[test]
fn lines_out_of_order_replay_in_time_order() {
    let config = scratch("order.toml", CONFIG);
    let log = json_log();
    let mut lines: Vec<&str> = log.lines().collect();
    lines.swap(3, 4);
    lines.swap(10, 12);
    let shuffled = scratch("shuffled.jsonl", &(lines.join("\n") + "\n"));
    let sorted = scratch("sorted.jsonl", &log);
    let run = |path: &str| simulate(&["--config", &config, "--trace", path, "--policy", "p"]);
    let out = run(&shuffled);
    let mut a: Vec<String> = stdout(&out).lines().map(String::from).collect();
    let mut b: Vec<String> = stdout(&run(&sorted)).lines().map(String::from).collect();
    let times: Vec<u64> = a[1..]
        .iter()
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert!(times.is_sorted(), "decided in time order");
    // Lines of one instant may swap; each decision is the same.
    a.sort();
    b.sort();
    assert_eq!(a, b);
    assert!(String::from_utf8_lossy(&out.stderr).contains("replayed in time order"));
}

#[test]
fn log_options_are_checked() {
    let config = scratch("options.toml", CONFIG);
    let log = scratch("options.log", &combined_log(true));
    let json = scratch("options.jsonl", &json_log());
    for (trace, extra, needle) in [
        (log.as_str(), vec![], "--policy NAME"),
        (&log, vec!["--policy", "nope"], "--policy nope"),
        (&log, vec!["--policy", "p", "--compare"], "give one"),
        (
            &log,
            vec!["--policy", "p", "--key", "field:tenant"],
            "field:tenant",
        ),
        (
            &log,
            vec!["--policy", "p", "--key", "header:x-api-key"],
            "header:x-api-key",
        ),
        (
            &log,
            vec!["--policy", "p", "--time-field", "ts"],
            "--time-field",
        ),
        (&json, vec!["--policy", "p", "--key", "ip"], "`ip`"),
        (
            "examples/boundary-burst.csv",
            vec!["--policy", "p"],
            "CSV trace",
        ),
        ("examples/boundary-burst.csv", vec!["--compare"], "--plot"),
    ] {
        let mut args = vec!["--config", config.as_str(), "--trace", trace];
        args.extend_from_slice(&extra);
        let out = simulate(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(needle), "{extra:?}: {needle:?} not in {err}");
    }
}

//! `tollgate serve`, `check` and `validate`, run as users run them: the
//! binary on an ephemeral port, spoken to over real sockets; the memory
//! store and Redis servers that the tests start.
//!
//! Kept whole on purpose: one concern, the binary as users run it; its
//! process helpers are `common`'s.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tollgate_testkit::{RedisSentinel, RedisServer};

mod common;

use common::service::{Service, temp_dir};

const CONFIG: &str = r#"
[[policy]]
name = "books"
algorithm = "fixed_window"
limit = 3
window = "1h"

[[policy]]
name = "api"
algorithm = "token_bucket"
rate = 1
per = "1h"
burst = 5

[[policy]]
name = "reports"
algorithm = "concurrency"
limit = 1
lease = "30s"
"#;

#[test]
fn check_admits_then_denies_with_headers_and_json() {
    let s = Service::with_config(CONFIG, &[]);
    for i in 0..3 {
        let r = s.post("/v1/check", json!({"policy": "books", "key": "user-42"}));
        assert_eq!(r.status, 200, "{r:?}");
        let d = r.json();
        assert_eq!(d["allowed"], true);
        assert_eq!(d["remaining"], 2 - i);
        assert_eq!(d["limit"], 3);
        assert_eq!(d["source"], "store");
        assert_eq!(r.header("ratelimit-policy"), Some("\"books\";q=3;w=3600"));
        assert!(
            r.header("ratelimit")
                .unwrap()
                .starts_with(&format!("\"books\";r={};t=", 2 - i))
        );
        assert!(r.header("retry-after").is_none());
    }
    let r = s.post("/v1/check", json!({"policy": "books", "key": "user-42"}));
    assert_eq!(r.status, 429);
    let d = r.json();
    assert_eq!(d["allowed"], false);
    let retry_ms = d["retry_after_ms"].as_u64().unwrap();
    let retry_s: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert_eq!(retry_s, retry_ms.div_ceil(1000), "Retry-After rounds up");
    // Another key is untouched; a peek consumes nothing.
    assert_eq!(
        s.post(
            "/v1/check",
            json!({"policy": "books", "key": "user-7", "cost": 0})
        )
        .json()["remaining"],
        3
    );
    assert_eq!(
        s.post("/v1/check", json!({"policy": "books", "key": "user-7"}))
            .json()["remaining"],
        2
    );
}

#[test]
fn batches_reservations_leases_resets_and_listings() {
    let s = Service::with_config(CONFIG, &[]);
    // Atomic: the bucket has 5, the window 3: cost 4 fails the window, so
    // the bucket keeps its 5.
    let r = s.post(
        "/v1/check",
        json!({"checks": [{"policy": "api", "key": "k", "cost": 4}, {"policy": "books", "key": "k", "cost": 4}], "atomic": true}),
    );
    assert_eq!(r.status, 400, "cost 4 exceeds the window's 3: {r:?}");
    let r = s.post(
        "/v1/check",
        json!({"checks": [{"policy": "api", "key": "k", "cost": 2}, {"policy": "books", "key": "k", "cost": 3}], "atomic": true}),
    );
    assert_eq!(r.status, 200);
    let r = s.post(
        "/v1/check",
        json!({"checks": [{"policy": "api", "key": "k", "cost": 1}, {"policy": "books", "key": "k"}], "atomic": true}),
    );
    assert_eq!(r.status, 429);
    assert_eq!(r.json()["decisions"][0]["allowed"], false);
    assert_eq!(
        s.post("/v1/check", json!({"policy": "api", "key": "k", "cost": 0}))
            .json()["remaining"],
        3,
        "nothing consumed"
    );

    // Reserve: 3 left, asking 4 with a long enough wait borrows the future.
    let r = s.post(
        "/v1/reserve",
        json!({"policy": "api", "key": "k", "cost": 4, "max_wait_ms": 3_600_000}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.json()["wait_ms"].as_u64().unwrap() > 0);
    let r = s.post(
        "/v1/reserve",
        json!({"policy": "api", "key": "k", "cost": 1, "max_wait_ms": 0}),
    );
    assert_eq!(r.status, 429);
    let r = s.post("/v1/reserve", json!({"policy": "books", "key": "k"}));
    assert_eq!(
        (r.status, r.error_code()),
        (400, "unsupported".to_string()),
        "no reservations on a window"
    );

    // Leases: one at a time; release is idempotent.
    let r = s.post("/v1/acquire", json!({"policy": "reports", "key": "u"}));
    assert_eq!(r.status, 200);
    let lease = r.json()["lease"].as_str().unwrap().to_string();
    assert_eq!(r.json()["expires_in_ms"], 30_000);
    assert_eq!(
        s.post("/v1/acquire", json!({"policy": "reports", "key": "u"}))
            .status,
        429
    );
    let release = json!({"policy": "reports", "key": "u", "lease": lease});
    assert_eq!(
        s.post("/v1/release", release.clone()).json()["released"],
        true
    );
    assert_eq!(s.post("/v1/release", release).json()["released"], false);
    assert_eq!(
        s.post("/v1/acquire", json!({"policy": "reports", "key": "u"}))
            .status,
        200
    );

    // Reset one key.
    assert_eq!(
        s.post("/v1/check", json!({"policy": "books", "key": "k"}))
            .status,
        429
    );
    let r = s.call("DELETE", "/v1/keys/books/k", "", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(
        s.post("/v1/check", json!({"policy": "books", "key": "k"}))
            .status,
        200
    );

    let list = s.call("GET", "/v1/policies", "", &[]).json();
    let names: Vec<&str> = list["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["books", "api", "reports"]);
    assert_eq!(s.call("GET", "/healthz", "", &[]).status, 200);
    assert_eq!(s.call("GET", "/readyz", "", &[]).json()["ready"], true);
    let metrics = s.call("GET", "/metrics", "", &[]);
    assert!(metrics.body.contains(
        "tollgate_decisions_total{policy=\"books\",outcome=\"allowed\",source=\"store\"}"
    ));
    assert!(metrics.body.contains("tollgate_http_requests_total"));
    assert!(!metrics.body.contains("\"k\""), "no user key in a label");
}

#[test]
fn every_bad_request_gets_its_code() {
    let s = Service::with_config(CONFIG, &[]);
    let cases: Vec<(&str, String, u16, &str, &str)> = vec![
        (
            "/v1/check",
            "{not json".into(),
            400,
            "invalid_request",
            "malformed JSON",
        ),
        (
            "/v1/check",
            json!({"key": "k"}).to_string(),
            400,
            "invalid_request",
            "`policy`",
        ),
        (
            "/v1/check",
            json!({"policy": "books"}).to_string(),
            400,
            "invalid_request",
            "`key`",
        ),
        (
            "/v1/check",
            json!({"policy": "books", "key": 5}).to_string(),
            400,
            "invalid_request",
            "`key`",
        ),
        (
            "/v1/check",
            json!({"policy": "books", "key": "k", "cost": -1}).to_string(),
            400,
            "invalid_request",
            "`cost`",
        ),
        (
            "/v1/check",
            json!({"policy": "books", "key": "k", "cost": "1"}).to_string(),
            400,
            "invalid_request",
            "`cost`",
        ),
        (
            "/v1/check",
            json!({"policy": "books", "key": ""}).to_string(),
            400,
            "invalid_key",
            "key",
        ),
        (
            "/v1/check",
            json!({"policy": "books", "key": "k".repeat(1025)}).to_string(),
            400,
            "invalid_key",
            "1024",
        ),
        (
            "/v1/check",
            json!({"policy": "books", "key": "k", "cost": 4}).to_string(),
            400,
            "cost_exceeds_limit",
            "4",
        ),
        (
            "/v1/check",
            json!({"policy": "nope", "key": "k"}).to_string(),
            404,
            "unknown_policy",
            "nope",
        ),
        (
            "/v1/check",
            json!({"checks": [{"policy": "books"}]}).to_string(),
            400,
            "invalid_request",
            "checks[0]",
        ),
        (
            "/v1/release",
            json!({"policy": "reports", "key": "k", "lease": "zz"}).to_string(),
            400,
            "invalid_request",
            "lease",
        ),
        (
            "/v1/check",
            format!(
                "{{\"policy\": \"books\", \"key\": \"{}\"}}",
                "k".repeat(70_000)
            ),
            413,
            "payload_too_large",
            "bytes",
        ),
    ];
    for (path, body, status, code, needle) in cases {
        let r = s.call("POST", path, &body, &[]);
        assert_eq!(r.status, status, "{path} {:.80}: {r:?}", body);
        assert_eq!(r.error_code(), code, "{:.80}", body);
        let message = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(
            message.contains(needle),
            "{message:?} should name {needle:?}"
        );
    }
}

#[test]
fn a_token_guards_everything_but_healthz() {
    let s = Service::with_config(CONFIG, &["--token", "s3cret"]);
    let body = json!({"policy": "books", "key": "k"}).to_string();
    let r = s.call("POST", "/v1/check", &body, &[]);
    assert_eq!(
        (r.status, r.error_code()),
        (401, "unauthorized".to_string())
    );
    let r = s.call(
        "POST",
        "/v1/check",
        &body,
        &[("Authorization", "Bearer wrong")],
    );
    assert_eq!(r.status, 401);
    let r = s.call(
        "POST",
        "/v1/check",
        &body,
        &[("Authorization", "Bearer s3cret")],
    );
    assert_eq!(r.status, 200);
    assert_eq!(s.call("GET", "/healthz", "", &[]).status, 200);
    assert_eq!(s.call("GET", "/metrics", "", &[]).status, 401);
}

#[test]
fn sighup_reloads_and_a_bad_config_keeps_the_old_one() {
    let s = Service::with_config(CONFIG, &[]);
    assert_eq!(
        s.post("/v1/check", json!({"policy": "new", "key": "k"}))
            .status,
        404
    );
    let added = format!(
        "{CONFIG}\n[[policy]]\nname = \"new\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1m\"\n"
    );
    std::fs::write(s.config(), added).unwrap();
    s.signal("HUP");
    let reload = s.last_reload(|r| r["ok"] == true);
    assert!(
        reload["message"].as_str().unwrap().contains("new"),
        "{reload}"
    );
    assert_eq!(
        s.post("/v1/check", json!({"policy": "new", "key": "k", "cost": 0}))
            .status,
        200,
        "reloaded"
    );
    std::fs::write(
        s.config(),
        "[[policy]]\nname = \"broken\"\nalgorithm = \"nope\"\n",
    )
    .unwrap();
    s.signal("HUP");
    // The refusal is seen first: the check below then proves it was kept.
    let reload = s.last_reload(|r| r["ok"] == false);
    assert!(
        reload["message"]
            .as_str()
            .unwrap()
            .starts_with("refused, the running config stays:"),
        "{reload}"
    );
    assert!(
        reload["message"].as_str().unwrap().contains("nope"),
        "{reload}"
    );
    assert_eq!(
        s.post("/v1/check", json!({"policy": "new", "key": "k", "cost": 0}))
            .status,
        200,
        "old config kept"
    );
}

/// `/v1/stats`'s `reload`, once `done` says it has the reload awaited.
fn await_reload(s: &Service, done: impl Fn(&Value) -> bool) -> Value {
    let t = Instant::now();
    loop {
        let stats: Value = serde_json::from_str(&s.call("GET", "/v1/stats", "", &[]).body).unwrap();
        if done(&stats["reload"]) {
            return stats["reload"].clone();
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no such reload: {stats}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Once the service's watcher has seen the file: a change is applied (a
/// write before the watcher started goes unnoticed, so it is repeated).
fn watched(s: &Service) {
    let t = Instant::now();
    for n in 1.. {
        std::fs::write(s.config(), format!("{CONFIG}{}", "\n".repeat(n))).unwrap();
        let tried = Instant::now();
        while tried.elapsed() < Duration::from_secs(3) {
            let stats: Value =
                serde_json::from_str(&s.call("GET", "/v1/stats", "", &[]).body).unwrap();
            if stats["reload"]["ok"] == true {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the file is not watched"
        );
    }
}

/// An emptied file (a truncated save, `cat > file`) and one left with no
/// policies are refused like invalid ones: the policies stay, and
/// `/v1/stats` shows the refusal and counts it.
#[test]
fn a_reload_that_would_drop_every_policy_is_refused() {
    let s = Service::with_config(CONFIG, &[]);
    let books = || {
        s.post(
            "/v1/check",
            json!({"policy": "books", "key": "k", "cost": 0}),
        )
        .status
    };
    watched(&s);
    std::fs::write(s.config(), "").unwrap();
    let reload = await_reload(&s, |r| r["refused"] == 1);
    assert_eq!(reload["ok"], false);
    assert!(
        reload["message"]
            .as_str()
            .unwrap()
            .contains("the file is empty"),
        "{reload}"
    );
    assert_eq!(books(), 200, "the policies stay");
    std::fs::write(
        s.config(),
        "# nothing left
[store]
",
    )
    .unwrap();
    let reload = await_reload(&s, |r| r["refused"] == 2);
    assert!(
        reload["message"]
            .as_str()
            .unwrap()
            .contains("defines no policies where 3 are in force"),
        "{reload}"
    );
    assert_eq!(books(), 200, "the policies stay");
    std::fs::write(s.config(), CONFIG.replace("\"books\"", "\"novels\"")).unwrap();
    let reload = await_reload(&s, |r| r["ok"] == true);
    assert_eq!(reload["refused"], 2);
    assert_eq!(books(), 404, "the new file is in force");
}

/// A file written in pieces is applied once whole: no prefix of it that
/// happens to parse is put in force while the writer is still writing.
#[test]
fn a_file_still_being_written_is_not_applied() {
    let s = Service::with_config(CONFIG, &[]);
    watched(&s);
    let policy = |i: usize| {
        format!(
            "[[policy]]\nname = \"p{i}\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1m\"\n\n"
        )
    };
    let count = 60;
    let writer = {
        let path = s.config().to_path_buf();
        std::thread::spawn(move || {
            let mut file = std::fs::File::create(&path).unwrap();
            for i in 0..count {
                // a whole policy at a time: every prefix is a valid file
                file.write_all(policy(i).as_bytes()).unwrap();
                file.flush().unwrap();
                std::thread::sleep(Duration::from_millis(40));
            }
        })
    };
    let whole = (0..count)
        .map(|i| format!("p{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let reload = await_reload(&s, |r| {
        if let Some(message) = r["message"].as_str().filter(|m| !m.ends_with("reports")) {
            assert!(
                message.ends_with(&whole),
                "a partial file was applied or refused: {message}"
            );
            return true;
        }
        false
    });
    assert_eq!(reload["ok"], true);
    writer.join().unwrap();
}

#[test]
fn sigterm_finishes_and_exits_0() {
    let mut s = Service::with_config(CONFIG, &[]);
    assert_eq!(
        s.post("/v1/check", json!({"policy": "books", "key": "k"}))
            .status,
        200
    );
    s.signal("TERM");
    assert_eq!(s.wait_for_exit().code(), Some(0));
}

#[test]
fn check_and_validate_exit_codes() {
    let s = Service::with_config(CONFIG, &[]);
    let url = format!("http://{}", s.addr);
    let check = |cost: &str| {
        common::tollgate()
            .args([
                "check", "--url", &url, "--policy", "books", "--key", "cli", "--cost", cost,
            ])
            .env_remove("TOLLGATE_TOKEN")
            .output()
            .unwrap()
    };
    let ok = check("3");
    assert_eq!(ok.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&ok.stdout).contains("\"allowed\":true"));
    assert_eq!(check("1").status.code(), Some(1), "denied");
    assert_eq!(check("9").status.code(), Some(2), "an error");

    let validate = |text: &str| {
        let path = temp_dir().join("c.toml");
        std::fs::write(&path, text).unwrap();
        common::tollgate()
            .args(["validate", "--config"])
            .arg(&path)
            .output()
            .unwrap()
    };
    assert_eq!(validate(CONFIG).status.code(), Some(0));
    let bad = validate(
        "[store]\nkind = \"redis\"\n\n[[policy]]\nname = \"a\"\nalgorithm = \"gcra\"\nrate = 0\nper = \"1s\"\nburst = 1\n",
    );
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("c.toml:2") && err.contains("urls"), "{err}");
    assert!(err.contains("c.toml:7") && err.contains("rate"), "{err}");
}

/// `lease = "auto"`, the old name of `batch = "auto"`: `validate` warns
/// (exit 0) and `serve` logs a WARN, each naming the new key and the line;
/// both keys at once is an error naming both.
#[test]
fn the_old_lease_auto_warns_naming_batch() {
    let path = temp_dir().join("old.toml");
    // `tollgate validate` on `text`: its exit code and standard error.
    let validate = |text: &str| {
        std::fs::write(&path, text).unwrap();
        let out = common::tollgate()
            .args(["validate", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), err)
    };
    let (code, err) = validate(
        "[[policy]]\nname = \"hot\"\nalgorithm = \"fixed_window\"\nlimit = 10\nwindow = \"1s\"\nlease = \"auto\"\n",
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("warning: ")
            && err.contains("old.toml:6")
            && err.contains("`batch = \"auto\"`"),
        "{err}"
    );
    let mut serve = common::tollgate()
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&path)
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The config is read before the service listens: once it says where,
    // the warning has been written.
    let mut first = String::new();
    BufReader::new(serve.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("tollgate listening on"), "{first:?}");
    serve.kill().unwrap();
    serve.wait().unwrap();
    let mut err = String::new();
    serve
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let line = err
        .lines()
        .find(|l| l.contains("`batch = \"auto\"`"))
        .unwrap_or_else(|| panic!("no warning naming `batch`: {err}"));
    assert!(
        line.contains("WARN") && line.contains("old.toml:6"),
        "{line}"
    );

    let (code, err) = validate(
        "[[policy]]\nname = \"hot\"\nalgorithm = \"gcra\"\nrate = 10\nper = \"1s\"\nburst = 5\nbatch = \"auto\"\nlease = \"auto\"\n",
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("old.toml:8") && err.contains("`lease`") && err.contains("`batch`"),
        "{err}"
    );
}

/// `validate` refuses what `serve` refuses, with the same message: the two
/// share the checks (TLS files, a gRPC listener for TLS, a zero deadline).
#[test]
fn validate_refuses_what_serve_refuses() {
    let dir = temp_dir();
    std::fs::write(dir.join("not-pem.crt"), "hello\n").unwrap();
    std::fs::write(dir.join("not-pem.key"), "hello\n").unwrap();
    let cases = [
        (
            "[server]\ngrpc_listen = \"127.0.0.1:0\"\ngrpc_tls_cert = \"not-pem.crt\"\n",
            "needs --grpc-tls-key",
        ),
        (
            "[server]\ngrpc_tls_cert = \"not-pem.crt\"\ngrpc_tls_key = \"not-pem.key\"\n",
            "needs a gRPC server",
        ),
        (
            "[server]\ngrpc_listen = \"127.0.0.1:0\"\ngrpc_tls_cert = \"not-pem.crt\"\ngrpc_tls_key = \"not-pem.key\"\n",
            "no PEM certificate",
        ),
        (
            "[store]\ndeadline = \"0ms\"\n",
            "`deadline` must be more than 0",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let path = dir.join(format!("c{i}.toml"));
        std::fs::write(&path, format!("{text}{CONFIG}")).unwrap();
        let validate = Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .args(["validate", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&validate.stderr);
        assert_eq!(validate.status.code(), Some(2), "{text}: {said}");
        assert!(said.contains(want), "{text}: {said}");
        let mut serve = Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&path)
            .env_remove("TOLLGATE_TOKEN")
            .env_remove("TOLLGATE_GRPC_LISTEN")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = serve.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = serve.kill();
                panic!("serve started with a config validate refuses: {text}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        serve
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert_eq!(status.code(), Some(2), "{text}: {err}");
        assert!(err.contains(want), "{text}: {err}");
    }
}

/// 64 clients spread over `services`, 5 checks each of `policy`: the
/// admissions, and how many of them came from a lease.
fn drive_three(services: &[Service], policy: &str) -> (u32, u32) {
    let (admitted, leased) = (AtomicU32::new(0), AtomicU32::new(0));
    std::thread::scope(|scope| {
        for c in 0..64 {
            let (s, admitted, leased) = (&services[c % 3], &admitted, &leased);
            scope.spawn(move || {
                for _ in 0..5 {
                    let r = s.post("/v1/check", json!({"policy": policy, "key": "hot"}));
                    match r.status {
                        200 => {
                            admitted.fetch_add(1, Ordering::Relaxed);
                            if r.json()["source"] == "lease" {
                                leased.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        429 => {}
                        other => panic!("status {other}: {}", r.body),
                    }
                }
            });
        }
    });
    (admitted.into_inner(), leased.into_inner())
}

/// The hour since the epoch (the windows of an hour).
fn hour() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 3600
}

#[test]
fn three_instances_on_one_redis_admit_exactly_the_limit() {
    let server = RedisServer::start();
    // A deadline no busy test machine reaches: a call past it would be
    // decided by the local fallback, which this test is not about.
    let config = "[store]\ndeadline = \"10s\"\n\n[[policy]]\nname = \"shared\"\nalgorithm = \"fixed_window\"\nlimit = 100\nwindow = \"1h\"\n";
    let services: Vec<Service> = (0..3)
        .map(|_| Service::with_config(config, &["--redis", &server.url()]))
        .collect();
    let started = hour();
    let (n, _) = drive_three(&services, "shared");
    // 320 requests on a limit of 100 in one hour-long window: exactly 100,
    // unless the run straddled the hour (two windows, then at most 200).
    if hour() == started {
        assert_eq!(n, 100);
    } else {
        assert!((100..=200).contains(&n), "{n} admitted across two windows");
    }
    assert_eq!(
        services[0].call("GET", "/readyz", "", &[]).json()["breaker"],
        "closed"
    );
}

#[test]
fn three_leasing_instances_never_pass_the_limit() {
    let server = RedisServer::start();
    // A window of an hour and a bucket refilling one an hour, both leased:
    // 320 requests on 100, over three instances.
    let config = "[store]\ndeadline = \"10s\"\nexpected_instances = 3\n\n\
        [[policy]]\nname = \"window\"\nalgorithm = \"fixed_window\"\nlimit = 100\nwindow = \"1h\"\nbatch = \"auto\"\n\n\
        [[policy]]\nname = \"bucket\"\nalgorithm = \"token_bucket\"\nrate = 1\nper = \"1h\"\nburst = 100\nbatch = \"auto\"\n";
    let services: Vec<Service> = (0..3)
        .map(|_| Service::with_config(config, &["--redis", &server.url()]))
        .collect();
    for policy in ["window", "bucket"] {
        let started = hour();
        let (n, leased) = drive_three(&services, policy);
        eprintln!("{policy}: {n} admitted, {leased} from leases");
        // Never more than the store consumed: 100 (a bucket's refill in
        // the run is under one unit; a window straddling the hour 200). A
        // batch held when the load stops is consumed and not admitted.
        let most = if policy == "window" && hour() != started {
            200
        } else {
            100
        };
        assert!(n <= most, "{policy}: {n} admitted");
        assert!(
            n > 0 && leased > 0,
            "{policy}: {n} admitted, {leased} from leases"
        );
    }
}

#[test]
fn bench_drives_the_service_and_reports() {
    let s = Service::with_config(CONFIG, &[]);
    let out = common::tollgate()
        .args([
            "bench",
            "--url",
            &format!("http://{}", s.addr),
            "--policy",
            "books",
        ])
        .args(["--duration", "1s", "--connections", "2", "--keys", "10"])
        .env_remove("TOLLGATE_TOKEN")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let rate: f64 = text.split_whitespace().next().unwrap().parse().unwrap();
    assert!(rate > 0.0, "{text}");
    assert!(text.contains("p99") && text.contains(" denied"), "{text}");
    // Ten keys of limit 3: most of the traffic is denied, none is an error.
    assert!(text.contains(", 0 errors)"), "{text}");
    // With --timeline, every decision is in the file, sent before it was
    // answered, within the run. The first run spent the ten keys (an
    // hour's window of 3): every answer is a denial counting down to the
    // window's end.
    let timeline = temp_dir().join("timeline");
    let out = common::tollgate()
        .args(["bench", "--url", &format!("http://{}", s.addr)])
        .args([
            "--policy",
            "books",
            "--duration",
            "1s",
            "--connections",
            "2",
        ])
        .args(["--keys", "10", "--timeline"])
        .arg(&timeline)
        .env_remove("TOLLGATE_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let file = std::fs::read_to_string(&timeline).unwrap();
    let mut lines = file.lines();
    let run: Vec<u64> = lines.next().unwrap()[2..]
        .split(' ')
        .map(|n| n.parse().unwrap())
        .collect();
    let (mut allowed, mut denied) = (0, 0);
    for line in lines {
        let f: Vec<&str> = line.split(' ').collect();
        let (sent, received): (u64, u64) = (f[1].parse().unwrap(), f[2].parse().unwrap());
        assert!(
            run[0] <= sent && sent <= received && received <= run[1],
            "{line}"
        );
        let reset: u64 = f[3].parse().unwrap();
        assert!(reset > 0 && reset <= 3_600_000, "{line}");
        match f[0] {
            "A" => allowed += 1,
            "D" => denied += 1,
            _ => panic!("{line}"),
        }
        assert!(["s", "c"].contains(&f[4]), "{line}");
    }
    assert_eq!(allowed, 0, "the keys were spent by the first run");
    assert!(
        text.contains(&format!("({allowed} allowed, {denied} denied, 0 errors)")),
        "{text} against {denied} denials in the timeline"
    );
    let bad = common::tollgate()
        .args(["bench", "--url", "ftp://x", "--duration", "1s"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn rediss_urls_speak_tls_to_redis() {
    // A self-signed certificate for a TLS port beside the plain one (which
    // the testkit uses to see the server up).
    let dir = temp_dir();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let tls_port = tollgate_testkit::free_port().to_string();
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let server = RedisServer::start_with(&[
        "--tls-port",
        &tls_port,
        "--tls-cert-file",
        cert,
        "--tls-key-file",
        key,
        "--tls-ca-cert-file",
        cert,
        "--tls-auth-clients",
        "no",
    ]);
    // `#insecure`: the certificate is self-signed, not under a public root.
    let url = format!("rediss://127.0.0.1:{tls_port}/#insecure");
    let s = Service::with_config(CONFIG, &["--redis", &url]);
    let r = s.post("/v1/check", json!({"policy": "books", "key": "tls"}));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["source"], "store", "decided by Redis over TLS");
    let keys = server.cli(&["--scan", "--pattern", "*tls*"]);
    assert!(keys.contains("tls"), "the key is in Redis: {keys:?}");
}

/// Redis Sentinel from the flags and from the file; a grouped pair of
/// limits decided atomically on the master the sentinels name.
#[test]
fn serve_finds_the_master_through_the_sentinels() {
    let topology = RedisSentinel::start();
    let sentinels = topology.sentinel_urls().join(",");
    let policies = "[[policy]]\nname = \"second\"\nalgorithm = \"token_bucket\"\nrate = 1\nper = \"1h\"\nburst = 2\ngroup = \"user\"\n\n[[policy]]\nname = \"day\"\nalgorithm = \"fixed_window\"\nlimit = 100\nwindow = \"24h\"\ngroup = \"user\"\n";
    let config = format!("[store]\ndeadline = \"10s\"\n\n{policies}");
    let by_flags = Service::with_config(
        &config,
        &[
            "--redis-sentinel",
            &sentinels,
            "--redis-master-name",
            topology.master_name(),
        ],
    );
    let batch = json!({"checks": [{"policy": "second", "key": "u1"}, {"policy": "day", "key": "u1"}], "atomic": true});
    for status in [200, 200, 429] {
        assert_eq!(by_flags.post("/v1/check", batch.clone()).status, status);
    }
    let ready = by_flags.call("GET", "/readyz", "", &[]).json();
    assert!(
        ready["store"].as_str().unwrap().contains("sentinel"),
        "{ready}"
    );
    let keys = topology.master().cli(&["KEYS", "*"]);
    assert!(
        keys.contains("{user/u1}:second:") && keys.contains("{user/u1}:day:"),
        "{keys}"
    );

    let in_file = format!(
        "[store]\ndeadline = \"10s\"\nsentinels = [{}]\nmaster_name = \"{}\"\n\n{policies}",
        topology
            .sentinel_urls()
            .iter()
            .map(|u| format!("{u:?}"))
            .collect::<Vec<_>>()
            .join(", "),
        topology.master_name()
    );
    let by_file = Service::with_config(&in_file, &[]);
    // The same master: the pair is spent already.
    assert_eq!(by_file.post("/v1/check", batch).status, 429);

    let half = common::tollgate()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--redis-sentinel",
            &sentinels,
        ])
        .env_remove("TOLLGATE_REDIS_MASTER_NAME")
        .env_remove("TOLLGATE_CONFIG")
        .output()
        .unwrap();
    assert_eq!(half.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&half.stderr).contains("--redis-master-name"),
        "{}",
        String::from_utf8_lossy(&half.stderr)
    );
}

/// Redis down at startup (a pod restarted in the middle of a failover):
/// the service starts anyway, answers by its failure policy (`local`
/// decides, `deny` answers `store_unavailable`), says so on `/readyz` as
/// during any outage, and connects as soon as Redis answers.
#[test]
fn starts_while_redis_is_down_and_connects_when_it_answers() {
    let server = RedisServer::start();
    server.kill9();
    let url = server.url();
    let local = Service::with_config(CONFIG, &["--redis", &url]);
    let deny_config = format!("[store]\non_failure = \"deny\"\n{CONFIG}");
    let deny = Service::with_config(&deny_config, &["--redis", &url]);
    let check = json!({"policy": "books", "key": "k"});
    for i in 0..4 {
        let r = local.post("/v1/check", check.clone());
        assert_eq!(r.status, if i < 3 { 200 } else { 429 }, "{r:?}");
        assert_eq!(r.json()["source"], "fallback");
    }
    let ready = local.call("GET", "/readyz", "", &[]);
    assert_eq!(ready.status, 200, "{ready:?}");
    assert_eq!(ready.json()["breaker"], "open");
    let r = deny.post("/v1/check", check.clone());
    assert_eq!(
        (r.status, r.error_code()),
        (503, "store_unavailable".into())
    );
    assert_eq!(deny.call("GET", "/readyz", "", &[]).status, 503);

    server.restart();
    for s in [&local, &deny] {
        let start = Instant::now();
        while s.call("GET", "/readyz", "", &[]).json()["breaker"] != "closed" {
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "not connected after Redis came up"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let r = s.post("/v1/check", check.clone());
        assert_eq!(
            (r.status, r.json()["source"].clone()),
            (200, json!("store"))
        );
    }
}

/// `--require-redis`, or `[store] require_at_startup = true`: the old
/// refusal, exit code 1 with the reason.
#[test]
fn require_redis_refuses_to_start_while_redis_is_down() {
    let server = RedisServer::start();
    server.kill9();
    let dir = temp_dir();
    let plain = dir.join("plain.toml");
    std::fs::write(&plain, CONFIG).unwrap();
    let required = dir.join("required.toml");
    std::fs::write(
        &required,
        format!("[store]\nrequire_at_startup = true\n{CONFIG}"),
    )
    .unwrap();
    for (config, flag) in [(&plain, Some("--require-redis")), (&required, None)] {
        let out = common::tollgate()
            .args(["serve", "--listen", "127.0.0.1:0", "--redis", &server.url()])
            .arg("--config")
            .arg(config)
            .args(flag)
            .env_remove("TOLLGATE_REQUIRE_REDIS")
            .env_remove("TOLLGATE_REDIS")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("cannot connect"), "{stderr}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("listening"));
    }
}

#[test]
fn shadow_policies_and_shadow_mode_never_refuse() {
    let config = "[[policy]]\nname = \"new\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1h\"\nmode = \"shadow\"\n\n[[policy]]\nname = \"old\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1h\"\n";
    let svc = Service::with_config(config, &[]);
    let first = svc.post("/v1/check", json!({"policy": "new", "key": "k"}));
    assert_eq!(first.status, 200);
    assert!(first.json().get("shadow").is_none());
    let second = svc.post("/v1/check", json!({"policy": "new", "key": "k"}));
    assert_eq!(second.status, 200);
    let body = second.json();
    assert_eq!(body["shadow"], true, "{body}");
    assert_eq!(body["allowed"], true);
    assert_eq!(body["remaining"], 0);
    assert!(body["retry_after_ms"].as_u64().unwrap() > 0, "{body}");
    svc.post("/v1/check", json!({"policy": "old", "key": "k"}));
    assert_eq!(
        svc.post("/v1/check", json!({"policy": "old", "key": "k"}))
            .status,
        429
    );
    let metrics = svc.call("GET", "/metrics", "", &[]).body;
    assert!(
        metrics.contains("tollgate_shadow_denials_total{policy=\"new\"} 1"),
        "{metrics}"
    );
    drop(svc);

    // --shadow (SHADOW_MODE=true) puts every policy in shadow mode
    let svc = Service::with_config(config, &["--shadow"]);
    for _ in 0..3 {
        assert_eq!(
            svc.post("/v1/check", json!({"policy": "old", "key": "k"}))
                .status,
            200
        );
    }

    let dir = temp_dir();
    let path = dir.join("bad.toml");
    std::fs::write(
        &path,
        config.replace("mode = \"shadow\"", "mode = \"dry-run\""),
    )
    .unwrap();
    let out = common::tollgate()
        .args(["validate", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "bad.toml:6: policy `new`: `mode` must be \"enforce\" or \"shadow\", got \"dry-run\""
        ),
        "{stderr}"
    );
}

/// Usage over HTTP: a charge past the limit is recorded (200, `"allowed":
/// false`) and then denies; a refund gives back; a settle charges or
/// refunds the difference; `/v1/check` with `"at_most"` answers
/// `"granted"`; costs that are negative, fractions or missing are 400s
/// naming the field, an unknown policy a 404, a concurrency policy
/// unsupported; and the metrics count the units charged, refunded and
/// granted per policy.
#[test]
fn charge_refund_settle_and_at_most_over_http() {
    let s = Service::with_config(CONFIG, &[]);
    let k = |extra: Value| {
        let mut body = json!({"policy": "books", "key": "u"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let r = s.post("/v1/check", k(json!({"at_most": 2})));
    assert_eq!(
        (r.status, r.json()["granted"].clone()),
        (200, json!(2)),
        "{r:?}"
    );
    assert_eq!(r.json()["remaining"], 1);
    let r = s.post("/v1/charge", k(json!({"cost": 4})));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        (r.json()["allowed"].clone(), r.json()["remaining"].clone()),
        (json!(false), json!(0))
    );
    assert!(r.header("ratelimit").is_some());
    assert_eq!(s.post("/v1/check", k(json!({}))).status, 429);
    let r = s.post("/v1/check", k(json!({"at_most": 5})));
    assert_eq!((r.status, r.json()["granted"].clone()), (429, json!(0)));
    // Used 6 of 3: a refund of 4 leaves 2 used.
    let r = s.post("/v1/refund", k(json!({"cost": 4})));
    assert_eq!((r.status, r.json()["remaining"].clone()), (200, json!(1)));
    // A settle below its estimate refunds, above it charges.
    let r = s.post("/v1/settle", k(json!({"estimate": 2, "actual": 0})));
    assert_eq!((r.status, r.json()["remaining"].clone()), (200, json!(3)));
    let r = s.post("/v1/settle", k(json!({"estimate": 1, "actual": 3})));
    assert_eq!((r.status, r.json()["remaining"].clone()), (200, json!(1)));
    for (path, body, field) in [
        ("/v1/charge", k(json!({"cost": -1})), "cost"),
        ("/v1/charge", k(json!({"cost": 1.5})), "cost"),
        ("/v1/charge", k(json!({})), "cost"),
        ("/v1/refund", k(json!({"cost": "3"})), "cost"),
        (
            "/v1/settle",
            k(json!({"estimate": 1, "actual": -2})),
            "actual",
        ),
        ("/v1/settle", k(json!({"actual": 2})), "estimate"),
        ("/v1/check", k(json!({"at_most": -3})), "at_most"),
        ("/v1/charge", k(json!({"cost": 1u64 << 53})), "cost"),
    ] {
        let r = s.post(path, body.clone());
        assert_eq!(r.status, 400, "{path} {body}: {r:?}");
        assert!(
            r.body.contains(&format!("`{field}`")),
            "{path} {body}: {r:?}"
        );
    }
    let r = s.post(
        "/v1/charge",
        json!({"policy": "nope", "key": "u", "cost": 1}),
    );
    assert_eq!(
        (r.status, r.error_code()),
        (404, "unknown_policy".to_string())
    );
    let r = s.post(
        "/v1/charge",
        json!({"policy": "reports", "key": "u", "cost": 1}),
    );
    assert_eq!(r.error_code(), "unsupported");
    let metrics = s.call("GET", "/metrics", "", &[]).body;
    for (operation, units) in [("charged", 4 + 2), ("refunded", 4 + 2), ("granted", 2)] {
        let line = format!(
            "tollgate_usage_units_total{{policy=\"books\",operation=\"{operation}\"}} {units}"
        );
        assert!(metrics.contains(&line), "{line} in:\n{metrics}");
    }
}

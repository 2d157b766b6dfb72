//! ERL mode behind Redis Sentinel, configured as ERL is
//! (`REDIS_TYPE=sentinel`, `REDIS_URL=mastername,host:port,…`,
//! `REDIS_AUTH` the master's password): the binary counts on the master
//! the sentinels name, and on its successor after a failover. The
//! topology is the testkit's: a master, a replica and three
//! `redis-sentinel` processes.

mod common;

use std::time::{Duration, Instant};

use common::service::{Service, temp_dir};
use serde_json::Value;
use tollgate_testkit::RedisSentinel;

const CONFIG: &str = "
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: day, requests_per_unit: 1000}
";

const CALL: &str = r#"{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.1"}]}]}"#;

/// One `/json` call: the status line's code and `limitRemaining`.
fn call(svc: &Service) -> (u16, Option<u64>) {
    let raw = svc.request("POST", "/json", CALL);
    let code = raw
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = raw.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let remaining = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["statuses"][0]["limitRemaining"].as_u64());
    (code, remaining)
}

/// The day's counter on `node` (the day may turn during the test: every
/// window's key is summed).
fn counted(node: &tollgate_testkit::RedisServer) -> u64 {
    node.cli(&["KEYS", "rl_edge_remote_address_10.0.0.1_*"])
        .lines()
        .map(|key| node.cli(&["GET", key.trim()]).parse::<u64>().unwrap())
        .sum()
}

#[test]
fn counts_on_the_master_the_sentinels_name_and_follows_a_failover() {
    let topology = RedisSentinel::builder().password("s3cret").start();
    let dir = temp_dir();
    std::fs::write(dir.join("edge.yaml"), CONFIG).unwrap();
    let sentinels: Vec<String> = topology
        .sentinels()
        .iter()
        .map(|s| s.addr().to_string())
        .collect();
    let url = format!("{},{}", topology.master_name(), sentinels.join(","));
    let svc = Service::erl(
        &dir,
        &[
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_TYPE", "sentinel"),
            ("REDIS_URL", &url),
            ("REDIS_AUTH", "s3cret"),
            ("CACHE_KEY_PREFIX", "rl_"),
        ],
    );
    for expected in [999, 998, 997] {
        assert_eq!(call(&svc), (200, Some(expected)));
    }
    let old = topology.master();
    assert_eq!(counted(old), 3, "counted on the master");
    // the replica holds the three hits before it is promoted
    assert_eq!(old.cli(&["WAIT", "1", "5000"]), "1");

    let new = topology.failover();
    assert_ne!(new.port(), old.port());
    // Until the sentinels demote the old master it still takes writes
    // (Sentinel's replication is asynchronous, and a client learns of the
    // new master when it next asks); once demoted, it answers READONLY and
    // the service must find the new one.
    let deadline = Instant::now() + Duration::from_secs(30);
    while old.cli(&["ROLE"]).lines().next() != Some("slave") {
        assert!(Instant::now() < deadline, "the old master was not demoted");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut remaining = loop {
        match call(&svc) {
            (200, Some(r)) => break r,
            other => {
                assert!(Instant::now() < deadline, "still failing: {other:?}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    };
    // what the service answers is what the new master holds
    assert_eq!(counted(new), 1000 - remaining);
    assert!(counted(new) >= 4, "the count went on from the old master's");
    for _ in 0..3 {
        assert_eq!(call(&svc), (200, Some(remaining - 1)));
        remaining -= 1;
    }
    assert_eq!(counted(new), 1000 - remaining);

    // `--redis` with one redis+sentinel:// URL says the same
    let url = topology.url();
    let by_flag = Service::erl_with(&dir, &["--redis", &url], &[("CACHE_KEY_PREFIX", "rl_")]);
    assert_eq!(call(&by_flag), (200, Some(remaining - 1)));
    assert_eq!(counted(new), 1001 - remaining);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_rule_naming_a_tollgate_policy_decides_on_the_same_master() {
    let topology = RedisSentinel::builder().password("s3cret").start();
    let dir = temp_dir();
    std::fs::create_dir_all(dir.join("erl")).unwrap();
    std::fs::write(
        dir.join("erl/edge.yaml"),
        "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {tollgate_policy: per-user}\n",
    )
    .unwrap();
    let toml = dir.join("tollgate.toml");
    std::fs::write(
        &toml,
        "[[policy]]\nname = \"per-user\"\nalgorithm = \"sliding_window\"\nlimit = 2\nwindow = \"1h\"\n",
    )
    .unwrap();
    let sentinels: Vec<String> = topology
        .sentinels()
        .iter()
        .map(|s| s.addr().to_string())
        .collect();
    let url = format!("{},{}", topology.master_name(), sentinels.join(","));
    let (erl, toml) = (
        dir.join("erl").display().to_string(),
        toml.display().to_string(),
    );
    let svc = Service::run(
        &[
            "serve",
            "--envoy-config",
            &erl,
            "--erl-extensions",
            "--config",
            &toml,
            "--listen",
            "127.0.0.1:0",
            "--grpc-listen",
            "127.0.0.1:0",
        ],
        &[
            ("REDIS_TYPE", "sentinel"),
            ("REDIS_URL", &url),
            ("REDIS_AUTH", "s3cret"),
        ],
    );
    let call = r#"{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"ann"}]}]}"#;
    let status = |raw: String| raw.split(' ').nth(1).unwrap_or("").to_string();
    assert_eq!(status(svc.request("POST", "/json", call)), "200");
    assert_eq!(status(svc.request("POST", "/json", call)), "200");
    assert_eq!(status(svc.request("POST", "/json", call)), "429");
    // the policy's own key, on the master the sentinels name (with the
    // master's password from REDIS_AUTH)
    let keys = topology.master().cli(&["KEYS", "*per-user*"]);
    assert_eq!(keys.lines().count(), 1, "{keys}");
    std::fs::remove_dir_all(&dir).unwrap();
}

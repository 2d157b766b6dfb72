//! Two regions through real `tollgate serve` processes (docs/regions.md's
//! setup, end to end): each its own `redis-server`, each reaching the
//! other's Redis through a proxy adding 80 ms each way. What one region
//! admits, the other comes to count against the same limit; the debug
//! endpoint shows every region's component; a partition is reported and
//! heals.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use tollgate_testkit::{RedisServer, TcpProxy};

use common::service::{Service, temp_dir};

fn config(
    dir: &Path,
    region: &str,
    local: &str,
    remote: &str,
    remote_url: &str,
) -> std::path::PathBuf {
    let path = dir.join(format!("{region}.toml"));
    let text = format!(
        r#"
[store]
urls = ["{local}"]
# Generous: a decision past the deadline is the failure policy's, and
# this test counts what Redis decided, on a loaded machine.
deadline = "5s"

[regions]
name = "{region}"
sync_interval = "100ms"
partition_after = "1s"
global = ["api"]

[[regions.remote]]
name = "{remote}"
urls = ["{remote_url}"]

[[policy]]
name = "api"
algorithm = "fixed_window"
limit = 100
window = "1h"
"#
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// The body of a response as JSON, and its status.
fn answer(response: &str) -> (u16, Value) {
    let status = response[9..12].parse().unwrap();
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn check(s: &Service, cost: u64) -> u16 {
    let body = format!(r#"{{"policy":"api","key":"k","cost":{cost}}}"#);
    answer(&s.request("POST", "/v1/check", &body)).0
}

fn view(s: &Service) -> Value {
    let (status, body) = answer(&s.request("GET", "/v1/regions/api/k", ""));
    assert_eq!(status, 200, "{body}");
    body
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn two_serve_processes_share_one_limit() {
    let (eu_redis, us_redis) = (RedisServer::start(), RedisServer::start());
    let (to_us, to_eu) = (
        TcpProxy::start(us_redis.addr()),
        TcpProxy::start(eu_redis.addr()),
    );
    for link in [&to_us, &to_eu] {
        link.delay(Duration::from_millis(80));
    }
    let dir = temp_dir();
    let eu = Service::start(
        &config(&dir, "eu", &eu_redis.url(), "us", &to_us.url()),
        &[],
    );
    let us = Service::start(
        &config(&dir, "us", &us_redis.url(), "eu", &to_eu.url()),
        &[],
    );

    // Each region decides as partitioned from a link that has not carried
    // a round within `partition_after` of its start (connecting over the
    // 160 ms round trip takes several): wait for both.
    for s in [&eu, &us] {
        wait_for("the links to come up", || {
            let links = answer(&s.request("GET", "/v1/regions", "")).1;
            links["partitioned"] == false && links["links"][0]["rounds"].as_u64() > Some(0)
        });
    }
    // A window of an hour: if the test straddles its end, the counts start
    // over, and so does the scenario.
    for attempt in 0.. {
        assert!(attempt < 3, "three windows ended during the test");
        let window = view(&eu)["window_start_ms"].clone();
        assert_eq!(check(&eu, 60), 200);
        wait_for("us to count eu's 60", || {
            let (v, l) = (view(&us), answer(&eu.request("GET", "/v1/regions", "")).1);
            eprintln!("us's view: {v}; eu's links: {l}");
            v["regions"]["eu"] == 60
        });
        assert_eq!(check(&us, 50), 429, "60 + 50 is past the limit");
        assert_eq!(check(&us, 40), 200);
        wait_for("eu to count us's 40", || view(&eu)["regions"]["us"] == 40);
        assert_eq!(check(&eu, 1), 429);
        let (eu_view, us_view) = (view(&eu), view(&us));
        if eu_view["window_start_ms"] != window || us_view["window_start_ms"] != window {
            continue;
        }
        assert_eq!(eu_view["regions"], us_view["regions"]);
        assert_eq!(eu_view["total"], 100);
        break;
    }

    // The round's merge lands before its heartbeat's answer records it.
    wait_for("eu's round to be recorded", || {
        answer(&eu.request("GET", "/v1/regions", "")).1["links"][0]["sent"].as_u64() >= Some(1)
    });
    let (status, links) = answer(&eu.request("GET", "/v1/regions", ""));
    assert_eq!(status, 200);
    assert_eq!(links["region"], "eu");
    assert_eq!(links["global"], serde_json::json!(["api"]));
    assert_eq!(links["links"][0]["region"], "us");
    assert_eq!(links["links"][0]["partitioned"], false);
    assert!(links["links"][0]["sent"].as_u64().unwrap() >= 1);
    let metrics = eu.request("GET", "/metrics", "");
    assert!(
        metrics.contains("tollgate_region_partitioned{region=\"us\"} 0"),
        "{metrics}"
    );

    to_us.cut();
    to_eu.cut();
    wait_for("eu to call it a partition", || {
        answer(&eu.request("GET", "/v1/regions", "")).1["partitioned"] == true
    });
    to_us.pass();
    to_eu.pass();
    wait_for("the partition to heal", || {
        answer(&eu.request("GET", "/v1/regions", "")).1["partitioned"] == false
    });
    let (status, body) = answer(&eu.request("GET", "/v1/regions/nope/k", ""));
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("unknown_policy"))
    );
}

//! Two regions through real `tollgate serve` processes (docs/regions.md's
//! setup, end to end): each its own `redis-server`, each reaching the
//! other's Redis through a proxy adding 80 ms each way. What one region
//! admits, the other comes to count against the same limit; the debug
//! endpoint shows every region's component; a partition is reported and
//! heals.

mod common;

use serde_json::Value;

use common::regions::{Regions, Setup, answer, links, wait_for};
use common::service::{Service, temp_dir};

const POLICIES: &str = r#"
[[policy]]
name = "api"
algorithm = "fixed_window"
limit = 100
window = "1h"
"#;

fn check(s: &Service, cost: u64) -> u16 {
    let body = format!(r#"{{"policy":"api","key":"k","cost":{cost}}}"#);
    answer(&s.request("POST", "/v1/check", &body)).0
}

fn view(s: &Service) -> Value {
    let (status, body) = answer(&s.request("GET", "/v1/regions/api/k", ""));
    assert_eq!(status, 200, "{body}");
    body
}

#[test]
fn two_serve_processes_share_one_limit() {
    let dir = temp_dir();
    let setup = Setup {
        sync: "100ms",
        partition_after: "1s",
        policies: POLICIES,
    };
    let regions = Regions::start(&dir, &["eu", "us"], &setup);
    let [eu, us] = &regions.services[..] else {
        unreachable!("two regions")
    };
    regions.wait_connected();
    // A window of an hour: if the test straddles its end, the counts start
    // over, and so does the scenario.
    for attempt in 0.. {
        assert!(attempt < 3, "three windows ended during the test");
        let window = view(eu)["window_start_ms"].clone();
        assert_eq!(check(eu, 60), 200);
        wait_for("us to count eu's 60", || {
            let (v, l) = (view(us), links(eu));
            eprintln!("us's view: {v}; eu's links: {l}");
            v["regions"]["eu"] == 60
        });
        assert_eq!(check(us, 50), 429, "60 + 50 is past the limit");
        assert_eq!(check(us, 40), 200);
        wait_for("eu to count us's 40", || view(eu)["regions"]["us"] == 40);
        assert_eq!(check(eu, 1), 429);
        let (eu_view, us_view) = (view(eu), view(us));
        if eu_view["window_start_ms"] != window || us_view["window_start_ms"] != window {
            continue;
        }
        assert_eq!(eu_view["regions"], us_view["regions"]);
        assert_eq!(eu_view["total"], 100);
        break;
    }

    // The round's merge lands before its heartbeat's answer records it.
    wait_for("eu's round to be recorded", || {
        links(eu)["links"][0]["sent"].as_u64() >= Some(1)
    });
    let (status, report) = answer(&eu.request("GET", "/v1/regions", ""));
    assert_eq!(status, 200);
    assert_eq!(report["region"], "eu");
    assert_eq!(report["global"], serde_json::json!(["api"]));
    assert_eq!(report["links"][0]["region"], "us");
    assert_eq!(report["links"][0]["partitioned"], false);
    assert!(report["links"][0]["sent"].as_u64().unwrap() >= 1);
    let metrics = eu.request("GET", "/metrics", "");
    assert!(
        metrics.contains("tollgate_region_partitioned{region=\"us\"} 0"),
        "{metrics}"
    );

    regions.links.iter().for_each(|l| l.cut());
    wait_for("eu to call it a partition", || {
        links(eu)["partitioned"] == true
    });
    regions.links.iter().for_each(|l| l.pass());
    wait_for("the partition to heal", || {
        links(eu)["partitioned"] == false
    });
    let (status, body) = answer(&eu.request("GET", "/v1/regions/nope/k", ""));
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("unknown_policy"))
    );
}

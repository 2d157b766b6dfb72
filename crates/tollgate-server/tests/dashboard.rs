//! `deploy/grafana/tollgate.json` cannot drift from the code: every metric
//! name its queries use is exported by a real `tollgate serve` on a Redis
//! that the test starts, after traffic (allowed, denied, shadow denials)
//! and after Redis dies (store errors, the breaker opening).

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use tollgate_testkit::RedisServer;

use common::service::Service;

const CONFIG: &str = r#"
[[policy]]
name = "books"
algorithm = "fixed_window"
limit = 2
window = "1h"

[[policy]]
name = "trial"
algorithm = "fixed_window"
limit = 1
window = "1h"
mode = "shadow"
"#;

/// Every query text of the dashboard: panel targets and template variables.
fn queries(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr" | "definition" | "query", Value::String(s)) => out.push(s.clone()),
                    _ => queries(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| queries(v, out)),
        _ => {}
    }
}

/// The metric names in PromQL text: words starting `tollgate_`.
fn metric_names(query: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = query;
    while let Some(at) = rest.find("tollgate_") {
        let word: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + word.len()..];
        names.push(word);
    }
    names
}

#[test]
fn every_metric_the_dashboard_queries_is_exported() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/grafana/tollgate.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .expect("the dashboard is JSON");
    assert_eq!(dashboard["uid"], "tollgate");
    let mut texts = Vec::new();
    queries(&dashboard["panels"], &mut texts);
    queries(&dashboard["templating"], &mut texts);
    let used: BTreeSet<String> = texts.iter().flat_map(|q| metric_names(q)).collect();
    for wanted in [
        "tollgate_decisions_total",
        "tollgate_store_latency_seconds",
        "tollgate_store_errors_total",
        "tollgate_breaker_state",
        "tollgate_breaker_transitions_total",
        "tollgate_script_loads_total",
        "tollgate_pipelines_total",
    ] {
        assert!(used.contains(wanted), "the dashboard shows {wanted}");
    }

    let dir = common::temp_dir();
    let config = dir.join("tollgate.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let redis = RedisServer::start();
    let service = Service::start(&config, &["--redis", &redis.url()]);
    for _ in 0..4 {
        service.check("books", 0);
        service.check("trial", 0);
    }
    assert!(service.check("books", 0).starts_with("HTTP/1.1 429"));
    // Redis dies: calls fail (store errors) until the breaker opens. Each
    // call on a fresh key, which the deny cache cannot answer.
    redis.kill9();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut key = 1;
    let metrics = loop {
        service.check("books", key);
        key += 1;
        let metrics = service.request("GET", "/metrics", "");
        let opened = metrics.contains("tollgate_breaker_transitions_total{to=\"open\"}");
        if opened || Instant::now() > deadline {
            break metrics;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    let exported: BTreeSet<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("tollgate_"))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let missing: Vec<&String> = used
        .iter()
        .filter(|name| !exported.contains(name.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries {missing:?}, which /metrics does not export; it exports {exported:?}"
    );
    std::fs::remove_dir_all(dir).ok();
}

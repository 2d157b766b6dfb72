//! ERL mode's Prometheus counters at `/metrics`: labelled by domain and
//! the rule's path, and by the request's values (`descriptor`, ERL's stats
//! key) only for the rules whose config asks (`detailed_metric`,
//! `value_to_metric`).

mod common;

use common::service::{Service, temp_dir};

const CONFIG: &str = "
domain: edge
descriptors:
  - key: user
    detailed_metric: true
    rate_limit: {unit: day, requests_per_unit: 2}
  - key: tenant
    value_to_metric: true
    rate_limit: {unit: day, requests_per_unit: 100}
  - key: remote_address
    rate_limit: {unit: day, requests_per_unit: 100}
";

fn call(svc: &Service, key: &str, value: &str) {
    let body = format!(
        r#"{{"domain":"edge","descriptors":[{{"entries":[{{"key":"{key}","value":"{value}"}}]}}]}}"#
    );
    let response = svc.request("POST", "/json", &body);
    assert!(response.contains("\"overallCode\""), "{response}");
}

/// The `/metrics` lines of `name` (no comments).
fn lines(metrics: &str, name: &str) -> Vec<String> {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .map(str::to_string)
        .collect()
}

#[test]
fn request_values_are_labels_only_where_the_config_asks() {
    let dir = temp_dir();
    std::fs::write(dir.join("edge.yaml"), CONFIG).unwrap();
    let svc = Service::erl(&dir, &[]);
    for (key, value) in [
        ("user", "alice"),
        ("user", "alice"),
        ("user", "alice"),
        ("user", "bob"),
        ("tenant", "acme"),
        ("remote_address", "10.0.0.1"),
        ("remote_address", "10.0.0.2"),
    ] {
        call(&svc, key, value);
    }
    let metrics = svc.request("GET", "/metrics", "");
    let mut total = lines(&metrics, "tollgate_erl_total_hits");
    total.sort();
    assert_eq!(
        total,
        [
            r#"tollgate_erl_total_hits{domain="edge",key="edge.remote_address"} 2"#,
            r#"tollgate_erl_total_hits{domain="edge",key="edge.tenant",descriptor="edge.tenant_acme"} 1"#,
            r#"tollgate_erl_total_hits{domain="edge",key="edge.user",descriptor="edge.user_alice"} 3"#,
            r#"tollgate_erl_total_hits{domain="edge",key="edge.user",descriptor="edge.user_bob"} 1"#,
        ],
        "{metrics}"
    );
    assert_eq!(
        lines(&metrics, "tollgate_erl_over_limit"),
        [
            r#"tollgate_erl_over_limit{domain="edge",key="edge.user",descriptor="edge.user_alice"} 1"#
        ],
    );
    assert!(
        !metrics.contains("10.0.0.1"),
        "no request value without the flag: {metrics}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

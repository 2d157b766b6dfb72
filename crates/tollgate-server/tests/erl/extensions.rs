//! The binary in ERL mode with what tollgate adds to ERL turned on: a
//! descriptor moved to a GCRA policy of the TOML config
//! (`--erl-extensions --config`), the IETF headers
//! (`TOLLGATE_ERL_HEADERS=ietf`) and the local over-limit cache
//! (`LOCAL_CACHE_SIZE_IN_BYTES`), on a real Redis, over gRPC and `/json`.

use super::*;

const YAML: &str = "
domain: edge
descriptors:
  - key: user
    rate_limit: {tollgate_policy: smooth}
  - key: path
    rate_limit: {unit: day, requests_per_unit: 2}
";

const TOML: &str = r#"
# A deadline no busy test machine reaches: a call past it would be
# answered by the local fallback's share instead of Redis.
[store]
deadline = "10s"

[[policy]]
name = "smooth"
algorithm = "gcra"
rate = 1
per = "1h"
burst = 3
"#;

fn setup() -> (PathBuf, PathBuf) {
    let dir = temp_dir();
    std::fs::create_dir_all(dir.join("erl")).unwrap();
    std::fs::write(dir.join("erl/edge.yaml"), YAML).unwrap();
    let toml = dir.join("tollgate.toml");
    std::fs::write(&toml, TOML).unwrap();
    (dir, toml)
}

#[tokio::test]
async fn a_descriptor_moved_to_a_gcra_policy_on_redis_end_to_end() {
    let redis = RedisServer::start();
    let (dir, toml) = setup();
    let redis_addr = redis.addr().to_string();
    let toml_arg = toml.display().to_string();
    let svc = start_with(
        &dir.join("erl"),
        &["--erl-extensions", "--config", &toml_arg],
        &[
            ("REDIS_URL", redis_addr.as_str()),
            ("LOCAL_CACHE_SIZE_IN_BYTES", "1048576"),
            ("TOLLGATE_ERL_HEADERS", "ietf"),
        ],
    );
    let mut client = svc.client().await;

    // gRPC: the policy decides, and the answer's fields are its own
    for remaining in [2, 1, 0] {
        let r = ask(&mut client, request("edge", &[("user", "alice")]))
            .await
            .unwrap();
        assert_eq!(r.overall_code, Code::Ok as i32);
        assert_eq!(r.statuses[0].limit_remaining, remaining);
    }
    let r = ask(&mut client, request("edge", &[("user", "alice")]))
        .await
        .unwrap();
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    let headers: Vec<(&str, &str)> = r
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.as_str(), h.value.as_str()))
        .collect();
    assert_eq!(headers[0], ("ratelimit-policy", "\"smooth\";q=3;w=3600"));
    // denied: `t` is GCRA's retry, just under one emission interval
    let t: u64 = headers[1]
        .1
        .strip_prefix("\"smooth\";r=0;t=")
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{headers:?}"));
    assert!((3590..=3600).contains(&t), "{headers:?}");

    // /json: the same, in protojson
    let (status, body) = erl_json(
        &svc,
        json!({"domain": "edge", "descriptors": [{"entries": [{"key": "user", "value": "bob"}]}]}),
    );
    assert_eq!(status, 200);
    assert_eq!(
        body["statuses"][0]["currentLimit"],
        json!({"name": "smooth", "requestsPerUnit": 3, "unit": "HOUR"})
    );
    assert_eq!(body["statuses"][0]["limitRemaining"], 2);
    assert_eq!(
        body["responseHeadersToAdd"][0],
        json!({"key": "ratelimit-policy", "value": "\"smooth\";q=3;w=3600"})
    );

    // on tollgate's keys, not ERL's
    let keys = redis.cli(&["KEYS", "*"]);
    assert_eq!(keys.lines().count(), 2, "{keys}");
    assert!(keys.lines().all(|k| k.contains("{smooth:")), "{keys}");

    // the ERL rule beside it, with the local cache: once over, its
    // counter in Redis stops moving
    for _ in 0..3 {
        erl_json(
            &svc,
            json!({"domain": "edge", "descriptors": [{"entries": [{"key": "path", "value": "/x"}]}]}),
        );
    }
    let key = redis.cli(&["KEYS", "edge_path_/x_*"]);
    let key = key.trim();
    assert_eq!(redis.cli(&["GET", key]), "3");
    for _ in 0..3 {
        let (status, _) = erl_json(
            &svc,
            json!({"domain": "edge", "descriptors": [{"entries": [{"key": "path", "value": "/x"}]}]}),
        );
        assert_eq!(status, 429);
    }
    assert_eq!(
        redis.cli(&["GET", key]),
        "3",
        "answered from the local cache"
    );

    // a reload of the TOML file changes the policy
    std::fs::write(&toml, TOML.replace("burst = 3", "burst = 10")).unwrap();
    svc.wait_for_log("reloaded");
    let r = ask(&mut client, request("edge", &[("user", "carol")]))
        .await
        .unwrap();
    assert_eq!(r.statuses[0].limit_remaining, 9);
    // a TOML file without the policy the ERL file names is refused whole
    std::fs::write(&toml, TOML.replace("smooth", "other")).unwrap();
    svc.wait_for_log("tollgate_policy 'smooth' is no policy of the TOML config");
    let r = ask(&mut client, request("edge", &[("user", "carol")]))
        .await
        .unwrap();
    assert_eq!(r.statuses[0].limit_remaining, 8, "the running config stays");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_extension_key_needs_the_switch_and_a_known_policy() {
    let (dir, toml) = setup();
    let toml_arg = toml.display().to_string();
    let erl = dir.join("erl");
    let run = |args: &[&str]| {
        let out = tollgate(SERVE, &[]).arg(&erl).args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    // without the switch, an unknown key as ERL has it
    let (code, stderr) = run(&[]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("edge.yaml:5: config error, unknown key 'tollgate_policy'"),
        "{stderr}"
    );
    let (code, stderr) = run(&["--erl-extensions"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("--erl-extensions needs --config"),
        "{stderr}"
    );
    // an unknown policy: the file, the line and the rule
    std::fs::write(erl.join("edge.yaml"), YAML.replace("smooth", "nope")).unwrap();
    let (code, stderr) = run(&["--erl-extensions", "--config", &toml_arg]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains(
            "edge.yaml:5: 'edge.user': tollgate_policy 'nope' is no policy of the TOML config"
        ),
        "{stderr}"
    );
    // `tollgate validate`, the switch given by the TOML's [erl] table
    std::fs::write(erl.join("edge.yaml"), YAML).unwrap();
    std::fs::write(&toml, format!("[erl]\nextensions = true\n{TOML}")).unwrap();
    let out = tollgate(&["validate", "--config", &toml_arg, "--envoy-config"], &[])
        .arg(&erl)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // outside ERL mode the switches are refused
    let out = tollgate(
        &["serve", "--config", &toml_arg, "--erl-headers", "ietf"],
        &[],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // and the [erl] table is said to be ignored
    let mut native = tollgate(
        &["serve", "--config", &toml_arg, "--listen", "127.0.0.1:0"],
        &[],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut line = String::new();
    BufReader::new(native.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = native.kill();
    let _ = native.wait();
    assert!(line.contains("[erl] applies in ERL mode only"), "{line}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every decision of a `tollgate_policy` rule is counted once in
/// `tollgate_decisions_total`, with its source (Redis: a rule's
/// descriptors go to the store as one batch), as the service's own API
/// counts them.
#[tokio::test]
async fn a_policy_rules_decisions_are_counted_once() {
    let redis = RedisServer::start();
    let (dir, toml) = setup();
    let redis_addr = redis.addr().to_string();
    let toml_arg = toml.display().to_string();
    let svc = start_with(
        &dir.join("erl"),
        &["--erl-extensions", "--config", &toml_arg],
        &[("REDIS_URL", redis_addr.as_str())],
    );
    let mut client = svc.client().await;
    let (mut ok, mut over) = (0, 0);
    for user in ["ann", "ann", "ann", "ann", "ann", "ben", "ann", "ben"] {
        let r = ask(&mut client, request("edge", &[("user", user)]))
            .await
            .unwrap();
        if r.statuses[0].code == Code::Ok as i32 {
            ok += 1;
        } else {
            over += 1;
        }
    }
    for _ in 0..4 {
        let (status, _) = erl_json(
            &svc,
            json!({"domain": "edge", "descriptors": [{"entries": [{"key": "user", "value": "cat"}]}]}),
        );
        if status == 200 { ok += 1 } else { over += 1 }
    }
    let (status, metrics) = svc.http("GET", "/metrics", "");
    assert_eq!(status, 200);
    let sum = |outcome: &str| -> u64 {
        metrics
            .lines()
            .filter(|l| {
                l.starts_with("tollgate_decisions_total{")
                    && l.contains("policy=\"smooth\"")
                    && l.contains(&format!("outcome=\"{outcome}\""))
            })
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    assert_eq!((sum("allowed"), sum("denied")), (ok, over), "{metrics}");
    assert!(metrics.contains("source=\"store\""), "{metrics}");
    std::fs::remove_dir_all(&dir).unwrap();
}

//! ERL mode run as a team switching from envoyproxy/ratelimit runs it: the
//! binary with an ERL YAML directory and ERL's environment variables,
//! spoken to over gRPC, `/json` and the health endpoints; reloads; a Redis
//! shared with a (simulated) ERL instance.
//!
//! Kept whole on purpose: one concern, ERL mode run end to end with one set of process helpers.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use serde_json::{Value, json};
use tollgate_testkit::RedisServer;

mod common;

use common::envoy::request;
use common::service::{Service, temp_dir};
use common::tls::certificates;

/// What tollgate adds to ERL when asked: `tollgate_policy`, the IETF
/// headers, `LOCAL_CACHE_SIZE_IN_BYTES`.
#[path = "erl/extensions.rs"]
mod extensions;

const CONFIG: &str = "
domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: minute
      requests_per_unit: 3
  - key: path
    value: /api/*
    rate_limit:
      unit: hour
      requests_per_unit: 100
";

/// `tollgate serve` in ERL mode on free loopback ports; the config's path follows.
const SERVE: &[&str] = &[
    "serve",
    "--listen",
    "127.0.0.1:0",
    "--grpc-listen",
    "127.0.0.1:0",
    "--envoy-config",
];

/// The instant (2027-01-15T08:00:00Z, the start of a minute, an hour and
/// no day) every service here decides at: its clock is pinned there
/// (`TOLLGATE_TEST_CLOCK_MS`, for tests only), so that no window turns
/// while a test counts in it, however slow the machine.
const PINNED_S: u64 = 1_800_000_000;

/// The binary with only `env` and the pinned clock in its environment.
fn tollgate(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tollgate"));
    cmd.args(args)
        .env_clear()
        .env("TOLLGATE_TEST_CLOCK_MS", (PINNED_S * 1000).to_string());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// `tollgate serve` in ERL mode on `dir`, with only the variables `env`
/// and the pinned clock.
fn start(dir: &Path, env: &[(&str, &str)]) -> Service {
    start_with(dir, &[], env)
}

/// [`start`] with more flags.
fn start_with(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Service {
    let clock = (PINNED_S * 1000).to_string();
    let mut env = env.to_vec();
    env.push(("TOLLGATE_TEST_CLOCK_MS", &clock));
    Service::erl_with(dir, args, &env)
}

/// `POST /json` (ERL's JSON endpoint): status and body, as JSON when it is.
fn erl_json(svc: &Service, body: Value) -> (u16, Value) {
    let (status, body) = svc.http("POST", "/json", &body.to_string());
    let value = serde_json::from_str(&body).unwrap_or(Value::String(body));
    (status, value)
}

async fn ask(
    client: &mut RateLimitServiceClient<tonic::transport::Channel>,
    r: RateLimitRequest,
) -> Result<RateLimitResponse, tonic::Status> {
    client.should_rate_limit(r).await.map(|r| r.into_inner())
}

#[tokio::test]
async fn grpc_json_and_health_answer_as_erl_does() {
    let dir = temp_dir();
    std::fs::write(dir.join("edge.yaml"), CONFIG).unwrap();
    let svc = start(&dir, &[]);
    let mut client = svc.client().await;

    let r = ask(
        &mut client,
        request("edge", &[("remote_address", "10.0.0.1")]),
    )
    .await
    .unwrap();
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!(r.statuses[0].limit_remaining, 2);
    let (status, body) = erl_json(
        &svc,
        json!({"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address", "value": "10.0.0.1"}]}]}),
    );
    assert_eq!(status, 200);
    assert_eq!(body["overallCode"], "OK");
    assert_eq!(body["statuses"][0]["limitRemaining"], 1);
    assert_eq!(
        body["statuses"][0]["currentLimit"],
        json!({"requestsPerUnit": 3, "unit": "MINUTE"})
    );
    // the whole minute: the clock stands at its start
    assert_eq!(body["statuses"][0]["durationUntilReset"], "60s");
    erl_json(
        &svc,
        json!({"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address", "value": "10.0.0.1"}]}]}),
    );
    let (status, body) = erl_json(
        &svc,
        json!({"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address", "value": "10.0.0.1"}]}]}),
    );
    assert_eq!(
        (status, body["overallCode"].as_str()),
        (429, Some("OVER_LIMIT"))
    );
    assert!(
        body["statuses"][0].get("limitRemaining").is_none(),
        "{body}"
    );
    // unknown domain: OK with no limit
    let (status, body) = erl_json(
        &svc,
        json!({"domain": "other", "descriptors": [{"entries": [{"key": "a"}]}]}),
    );
    assert_eq!(
        (status, body),
        (
            200,
            json!({"overallCode": "OK", "statuses": [{"code": "OK"}]})
        )
    );

    // what ERL fails
    let e = ask(&mut client, request("", &[("a", "b")]))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (tonic::Code::Unknown, "rate limit domain must not be empty")
    );
    assert_eq!(
        svc.http("POST", "/json", r#"{"domain": ""}"#),
        (400, "Bad Request".to_string())
    );
    assert_eq!(
        svc.http("POST", "/json", r#"{"domain": "edge", "nope": 1}"#),
        (400, "Bad Request".to_string())
    );

    assert_eq!(svc.http("GET", "/healthcheck", ""), (200, "OK".to_string()));
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", svc.grpc()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let answer = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "ratelimit".to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        answer.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn reloads_on_change_and_keeps_the_running_config_when_the_new_one_is_bad() {
    let dir = temp_dir();
    std::fs::write(dir.join("edge.yaml"), CONFIG).unwrap();
    let svc = start(&dir, &[]);
    let mut client = svc.client().await;
    let r = ask(&mut client, request("edge", &[("remote_address", "a")]))
        .await
        .unwrap();
    assert_eq!(r.statuses[0].limit_remaining, 2);

    std::fs::write(
        dir.join("edge.yaml"),
        CONFIG.replace("requests_per_unit: 3", "requests_per_unit: 30"),
    )
    .unwrap();
    svc.wait_for_log("reloaded");
    let r = ask(&mut client, request("edge", &[("remote_address", "a")]))
        .await
        .unwrap();
    assert_eq!(r.statuses[0].limit_remaining, 28);

    // a second file with the same domain: refused, the running config stays
    std::fs::create_dir_all(dir.join("more")).unwrap();
    std::fs::write(dir.join("more/copy.yml"), CONFIG).unwrap();
    svc.wait_for_log("reload refused");
    assert!(
        svc.log()
            .contains("copy.yml: duplicate domain 'edge' in config file")
    );
    let r = ask(&mut client, request("edge", &[("remote_address", "a")]))
        .await
        .unwrap();
    assert_eq!(r.statuses[0].limit_remaining, 27);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Reloads that would harm the running service are refused, logged at
/// WARN, and the running config stays: every file deleted, and a "billion
/// laughs" dropped over the watched config (it used to take the process's
/// memory and kill it).
#[tokio::test]
async fn a_reload_that_drops_every_limit_or_explodes_is_refused() {
    let dir = temp_dir();
    std::fs::write(dir.join("edge.yaml"), CONFIG).unwrap();
    let svc = start(&dir, &[]);
    let mut client = svc.client().await;
    let remaining = async |client: &mut RateLimitServiceClient<tonic::transport::Channel>| {
        ask(client, request("edge", &[("remote_address", "a")]))
            .await
            .unwrap()
            .statuses[0]
            .limit_remaining
    };
    assert_eq!(remaining(&mut client).await, 2);

    let mut laughs = String::from("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for (prev, name) in "abcdefgh".chars().zip("bcdefghi".chars()) {
        let refs = vec![format!("*{prev}"); 9].join(", ");
        laughs.push_str(&format!("{name}: &{name} [{refs}]\n"));
    }
    std::fs::write(dir.join("edge.yaml"), &laughs).unwrap();
    svc.wait_for_log("aliases repeat more than 100000 nodes");
    assert_eq!(remaining(&mut client).await, 1, "the running config stays");

    std::fs::remove_file(dir.join("edge.yaml")).unwrap();
    svc.wait_for_log("no domain is defined where 1 are in force");
    let log = svc.log();
    let line = log
        .lines()
        .find(|l| l.contains("no domain is defined"))
        .unwrap();
    assert!(line.contains("WARN"), "{line}");
    assert_eq!(remaining(&mut client).await, 0, "the running config stays");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bad_config_or_environment_refuses_to_start() {
    let dir = temp_dir();
    std::fs::write(
        dir.join("bad.yaml"),
        "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n",
    )
    .unwrap();
    let out = tollgate(SERVE, &[]).arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.yaml:4: invalid rate limit unit 'fortnight' (in 'edge.k')"),
        "{stderr}"
    );

    std::fs::write(dir.join("bad.yaml"), CONFIG).unwrap();
    let out = tollgate(
        SERVE,
        &[("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true")],
    )
    .arg(&dir)
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn validate_checks_erl_configs() {
    let dir = temp_dir();
    std::fs::write(dir.join("edge.yaml"), CONFIG).unwrap();
    let out = tollgate(&["validate", "--envoy-config"], &[])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("ERL config, 1 domains, 2 rules, valid"));
    std::fs::write(
        dir.join("b.yml"),
        "domain: b\ndescriptors:\n  - key: k\n    ratelimit: {}\n",
    )
    .unwrap();
    let out = tollgate(&["validate", "--envoy-config"], &[])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("b.yml:4: config error, unknown key 'ratelimit'"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn erl_environment_points_it_at_the_redis_erl_uses() {
    let redis = RedisServer::start();
    let dir = temp_dir();
    std::fs::create_dir_all(dir.join("ratelimit/config")).unwrap();
    std::fs::write(dir.join("ratelimit/config/edge.yaml"), CONFIG).unwrap();
    let root = dir.display().to_string();
    let redis_addr = redis.addr().to_string();
    let env = [
        ("REDIS_URL", redis_addr.as_str()),
        ("REDIS_SOCKET_TYPE", "tcp"),
        ("CACHE_KEY_PREFIX", "rl_"),
        ("RUNTIME_ROOT", root.as_str()),
        ("RUNTIME_SUBDIRECTORY", "ratelimit"),
        ("RUNTIME_IGNOREDOTFILES", "true"),
    ];
    let mut child = tollgate(
        &[
            "serve",
            "--erl",
            "--listen",
            "127.0.0.1:0",
            "--grpc-listen",
            "127.0.0.1:0",
        ],
        &env,
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut lines = vec![String::new(), String::new(), String::new()];
    for line in &mut lines {
        out.read_line(line).unwrap();
    }
    let grpc = lines[1].trim().rsplit(' ').next().unwrap().to_string();
    assert!(lines[2].starts_with("store: redis"), "{lines:?}");
    let mut client = RateLimitServiceClient::connect(format!("http://{grpc}"))
        .await
        .unwrap();
    let r = ask(
        &mut client,
        request("edge", &[("remote_address", "10.1.1.1")]),
    )
    .await
    .unwrap();
    let keys = redis.cli(&["KEYS", "rl_edge_remote_address_10.1.1.1_*"]);
    assert_eq!(keys.lines().count(), 1, "{keys}");
    let key = keys.trim();
    // the window's start: the minute of the pinned clock
    let start: u64 = key.rsplit('_').next().unwrap().parse().unwrap();
    assert_eq!(start, PINNED_S);
    assert_eq!(redis.cli(&["GET", key]), "1");
    assert_eq!(r.statuses[0].limit_remaining, 2);
    // an ERL instance adds its hits on the same key
    redis.cli(&["INCRBY", key, "2"]);
    let r = ask(
        &mut client,
        request("edge", &[("remote_address", "10.1.1.1")]),
    )
    .await
    .unwrap();
    // the same key (the minute never turns on the pinned clock), now over
    assert_eq!(redis.cli(&["GET", key]), "4");
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    let _ = child.kill();
    let _ = child.wait();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn grpc_over_mutual_tls_refuses_a_client_without_a_certificate() {
    use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
    let dir = temp_dir();
    std::fs::write(dir.join("edge.yaml"), CONFIG).unwrap();
    let certs = temp_dir();
    let (ca, client_cert, client_key) = certificates(&certs);
    let path = |name: &str| certs.join(name).display().to_string();
    let (cert, key, client_ca) = (path("server.pem"), path("server.key"), path("ca.pem"));
    let svc = start(
        &dir,
        &[
            ("GRPC_SERVER_USE_TLS", "true"),
            ("GRPC_SERVER_TLS_CERT", &cert),
            ("GRPC_SERVER_TLS_KEY", &key),
            ("GRPC_CLIENT_TLS_CACERT", &client_ca),
        ],
    );
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&ca))
        .domain_name("localhost");
    let url = format!("https://{}", svc.grpc());

    let with_cert = tls
        .clone()
        .identity(Identity::from_pem(&client_cert, &client_key));
    let channel = Channel::from_shared(url.clone())
        .unwrap()
        .tls_config(with_cert)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = RateLimitServiceClient::new(channel);
    let r = ask(
        &mut client,
        request("edge", &[("remote_address", "10.9.9.9")]),
    )
    .await
    .unwrap();
    assert_eq!(r.statuses[0].limit_remaining, 2);

    let without = async {
        let channel = Channel::from_shared(url.clone())
            .unwrap()
            .tls_config(tls.clone())
            .unwrap()
            .connect()
            .await?;
        let mut client = RateLimitServiceClient::new(channel);
        client
            .should_rate_limit(request("edge", &[("remote_address", "10.9.9.9")]))
            .await
            .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?;
        Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    };
    assert!(
        without.await.is_err(),
        "a client without a certificate was served"
    );
    // plaintext is refused too
    let plain = RateLimitServiceClient::connect(format!("http://{}", svc.grpc())).await;
    if let Ok(mut plain) = plain {
        assert!(
            ask(&mut plain, request("edge", &[("a", "b")]))
                .await
                .is_err()
        );
    }
    // the refused client consumed nothing
    let r = ask(
        &mut client,
        request("edge", &[("remote_address", "10.9.9.9")]),
    )
    .await
    .unwrap();
    assert_eq!(r.statuses[0].limit_remaining, 1);

    // TLS asked for without its files: refused at start
    let out = tollgate(SERVE, &[("GRPC_SERVER_USE_TLS", "true")])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY")
    );
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&certs).unwrap();
}

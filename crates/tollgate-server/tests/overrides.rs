//! Overrides through `tollgate serve`, as users run it: two instances on
//! one real `redis-server` share them (a change made on one applies on the
//! other, an expiry ends it on both, a restarted instance loads them),
//! the count carries over, every bad input is a named 4xx, and no
//! decision asks Redis about overrides (`INFO commandstats`).

mod common;

use std::time::{Duration, Instant};

use common::service::{Service, temp_dir};
use serde_json::Value;
use tollgate_testkit::RedisServer;

const CONFIG: &str = "[store]\ndeadline = \"10s\"\n\n[[policy]]\nname = \"api\"\nalgorithm = \"fixed_window\"\nlimit = 3\nwindow = \"1h\"\n\n[[policy]]\nname = \"bucket\"\nalgorithm = \"token_bucket\"\nrate = 1\nper = \"1h\"\nburst = 5\n";

fn start(redis: &RedisServer) -> Service {
    let dir = temp_dir();
    let config = dir.join("tollgate.toml");
    std::fs::write(&config, CONFIG).unwrap();
    Service::start(&config, &["--redis", &redis.url()])
}

/// The status line and the JSON body of a response.
fn parse(response: &str) -> (u16, Value) {
    let status = response[9..12].parse().unwrap();
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn check(s: &Service, policy: &str, key: &str) -> (u16, Value) {
    parse(&s.request(
        "POST",
        "/v1/check",
        &format!("{{\"policy\":\"{policy}\",\"key\":\"{key}\"}}"),
    ))
}

/// Polls `f` until it holds, for at most 30 s (the design is within 1 s;
/// a loaded machine gets slack, never a flaky failure).
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn commandstat(redis: &RedisServer, command: &str) -> u64 {
    let client = redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut conn)
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

#[test]
fn two_instances_share_overrides_through_redis() {
    let redis = RedisServer::start();
    let (a, b) = (start(&redis), start(&redis));
    // The count carries over: 3 of 3 taken, then raised to 10 on `a`.
    for _ in 0..3 {
        assert_eq!(check(&b, "api", "acme").0, 200);
    }
    assert_eq!(check(&b, "api", "acme").0, 429);
    let (status, body) = parse(&a.request("PUT", "/v1/overrides/api/acme", "{\"limit\": 10}"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["parameters"]["limit"], 10);
    assert_eq!(body["selector"], "acme");
    eventually("b applies a's override", || {
        check(&b, "api", "acme").1["override"] == "acme"
    });
    let response = b.request("POST", "/v1/check", "{\"policy\":\"api\",\"key\":\"acme\"}");
    let (status, body) = parse(&response);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["limit"], 10);
    assert!(
        response.contains("q=10;"),
        "RateLimit-Policy shows the override: {response}"
    );
    // 3 + the polls' checks + this one, of 10: never a fresh 10.
    assert!(body["remaining"].as_u64().unwrap() < 7, "{body}");
    // A prefix block with a ttl: applies on both, then ends on both.
    let (status, body) = parse(&a.request(
        "PUT",
        "/v1/overrides/api/bot%2A",
        "{\"action\": \"block\", \"ttl\": \"2s\"}",
    ));
    assert_eq!(
        (status, &body["action"]),
        (200, &Value::from("block")),
        "{body}"
    );
    eventually("the block applies on b", || {
        let (s, body) = check(&b, "api", "bot-1");
        s == 429 && body["override"] == "bot*"
    });
    eventually("the block ends on a and b", || {
        check(&a, "api", "bot-2").0 == 200 && check(&b, "api", "bot-3").0 == 200
    });
    // Read back and listed; a restarted instance loads what is stored.
    let (status, body) = parse(&b.request("GET", "/v1/overrides/api/acme", ""));
    assert_eq!(
        (status, &body["parameters"]["limit"]),
        (200, &Value::from(10))
    );
    let (_, list) = parse(&b.request("GET", "/v1/overrides/api", ""));
    assert_eq!(list["overrides"].as_array().unwrap().len(), 1, "{list}");
    drop(a);
    let c = start(&redis);
    eventually("a restarted instance loads the overrides", || {
        check(&c, "api", "acme").1["override"] == "acme"
    });
    // No Redis call per decision to learn overrides: 300 decisions under
    // an override take far fewer polls (one GET per policy per 250 ms).
    let (gets, hgetalls) = (commandstat(&redis, "get"), commandstat(&redis, "hgetall"));
    for _ in 0..300 {
        check(&c, "api", "acme");
    }
    let polls = commandstat(&redis, "get") - gets;
    assert!(polls < 150, "{polls} GETs for 300 decisions");
    // A reload is one HGETALL per changed policy (the restarted instance
    // may still be loading its second policy, an ended override's removal
    // may land): a few, never one per decision.
    let reloads = commandstat(&redis, "hgetall") - hgetalls;
    assert!(reloads <= 4, "{reloads} HGETALLs for 300 decisions");
    // Removed on one, gone on the other; then 404.
    let (status, _) = parse(&c.request("DELETE", "/v1/overrides/api/acme", ""));
    assert_eq!(status, 200);
    eventually("the removal reaches b", || {
        check(&b, "api", "acme").1.get("override").is_none()
    });
    assert_eq!(
        parse(&b.request("GET", "/v1/overrides/api/acme", "")).0,
        404
    );
    assert_eq!(
        parse(&b.request("DELETE", "/v1/overrides/api/acme", "")).0,
        404
    );
}

#[test]
fn precedence_allow_and_bad_input_in_memory() {
    let dir = temp_dir();
    let config = dir.join("tollgate.toml");
    std::fs::write(&config, CONFIG.split_once("\n\n").unwrap().1).unwrap();
    let s = Service::start(&config, &[]);
    let put = |path: &str, body: &str| parse(&s.request("PUT", path, body));
    assert_eq!(put("/v1/overrides/api/t%2A", "{\"limit\": 5}").0, 200);
    assert_eq!(put("/v1/overrides/api/trial_%2A", "{\"limit\": 6}").0, 200);
    assert_eq!(put("/v1/overrides/api/trial_1", "{\"limit\": 7}").0, 200);
    assert_eq!(
        put("/v1/overrides/api/health", "{\"action\": \"allow\"}").0,
        200
    );
    let limit = |key: &str| {
        let (_, body) = check(&s, "api", key);
        (
            body["limit"].as_u64().unwrap(),
            body["override"].as_str().map(str::to_string),
        )
    };
    assert_eq!(limit("trial_1"), (7, Some("trial_1".into())));
    assert_eq!(limit("trial_2"), (6, Some("trial_*".into())));
    assert_eq!(limit("tx"), (5, Some("t*".into())));
    assert_eq!(limit("other"), (3, None));
    for _ in 0..10 {
        assert_eq!(
            check(&s, "api", "health").0,
            200,
            "allowed, consuming nothing"
        );
    }
    // Every bad input is a 4xx naming what is wrong; nothing is applied.
    for (path, body, status, needle) in [
        (
            "/v1/overrides/nope/k",
            "{\"limit\": 5}",
            404,
            "unknown_policy",
        ),
        ("/v1/overrides/api/k", "{\"rate\": 5}", 400, "`rate`"),
        ("/v1/overrides/api/k", "{\"limit\": 0}", 400, "`limit`"),
        ("/v1/overrides/api/k", "{\"limit\": -4}", 400, "`limit`"),
        (
            "/v1/overrides/api/k",
            "{\"limit\": 4503599627370497}",
            400,
            "`limit`",
        ),
        (
            "/v1/overrides/api/a%2Ab",
            "{\"limit\": 5}",
            400,
            "`selector`",
        ),
        ("/v1/overrides/api/%2A", "{\"limit\": 5}", 400, "`selector`"),
        (
            "/v1/overrides/api/k",
            "{\"limit\": 5, \"ttl\": \"soon\"}",
            400,
            "`ttl`",
        ),
        (
            "/v1/overrides/api/k",
            "{\"limit\": 5, \"colour\": 1}",
            400,
            "`colour`",
        ),
        (
            "/v1/overrides/api/k",
            "{\"action\": \"maybe\"}",
            400,
            "`action`",
        ),
        ("/v1/overrides/api/k", "{\"tier\": \"gold\"}", 400, "`tier`"),
        ("/v1/overrides/api/k", "{}", 400, "override needs"),
    ] {
        let response = s.request("PUT", path, body);
        let (got, _) = parse(&response);
        assert_eq!(got, status, "{path} {body}: {response}");
        assert!(response.contains(needle), "{path} {body}: {response}");
    }
    let too_long = format!("/v1/overrides/api/{}", "k".repeat(1025));
    assert_eq!(put(&too_long, "{\"limit\": 5}").0, 400);
    assert_eq!(parse(&s.request("GET", "/v1/overrides/api/k", "")).0, 404);
    let (_, list) = parse(&s.request("GET", "/v1/overrides/api", ""));
    assert_eq!(list["overrides"].as_array().unwrap().len(), 4, "{list}");
    // A request naming a tier the policy lacks is a 400 naming `tier`.
    let response = s.request(
        "POST",
        "/v1/check",
        "{\"policy\":\"api\",\"key\":\"k\",\"tier\":\"pro\"}",
    );
    assert!(
        response.starts_with("HTTP/1.1 400") && response.contains("has no tier"),
        "{response}"
    );
}

/// `--token` guards decisions, `TOLLGATE_ADMIN_TOKEN` the routes that
/// change limits or state (reading overrides included); the decision token
/// there is a 403 `forbidden`, and neither token is ever answered back.
#[test]
fn the_admin_token_guards_overrides_and_keys() {
    let config = temp_dir().join("tollgate.toml");
    std::fs::write(&config, CONFIG.split_once("\n\n").unwrap().1).unwrap();
    let s = Service::start_env(
        &config,
        &["--token", "d3cision"],
        &[("TOLLGATE_ADMIN_TOKEN", "adm1n")],
    );
    let with = |method: &str, path: &str, body: &str, token: &str| {
        let header = if token.is_empty() {
            String::new()
        } else {
            format!("Authorization: Bearer {token}\r\n")
        };
        let response = s.request_with(method, path, body, &header);
        assert!(
            !response.contains("d3cision") && !response.contains("adm1n"),
            "a token answered back: {response}"
        );
        parse(&response)
    };
    let code = |(status, body): (u16, Value)| (status, body["error"]["code"].clone());
    let check = "{\"policy\":\"api\",\"key\":\"k\"}";
    for (method, path, body) in [
        ("PUT", "/v1/overrides/api/k", "{\"limit\": 9}"),
        ("GET", "/v1/overrides/api/k", ""),
        ("GET", "/v1/overrides/api", ""),
        ("DELETE", "/v1/overrides/api/k", ""),
        ("DELETE", "/v1/keys/api/k", ""),
    ] {
        let what = format!("{method} {path}");
        assert_eq!(
            code(with(method, path, body, "d3cision")),
            (403, "forbidden".into()),
            "{what}"
        );
        assert_eq!(
            code(with(method, path, body, "")),
            (401, "unauthorized".into()),
            "{what}"
        );
        assert_eq!(
            code(with(method, path, body, "wrong")),
            (401, "unauthorized".into()),
            "{what}"
        );
    }
    // Nothing was applied by the refused requests.
    assert_eq!(with("POST", "/v1/check", check, "d3cision").1["limit"], 3);
    let (status, body) = with("PUT", "/v1/overrides/api/k", "{\"limit\": 9}", "adm1n");
    assert_eq!(status, 200, "{body}");
    assert_eq!(with("GET", "/v1/overrides/api/k", "", "adm1n").0, 200);
    // Decisions: the decision token or the admin one, nothing else.
    assert_eq!(with("POST", "/v1/check", check, "d3cision").1["limit"], 9);
    assert_eq!(with("POST", "/v1/check", check, "adm1n").0, 200);
    assert_eq!(code(with("POST", "/v1/check", check, "")).0, 401);
    let (status, metrics) = {
        let response = s.request_with("GET", "/metrics", "", "Authorization: Bearer d3cision\r\n");
        (response[9..12].parse::<u16>().unwrap(), response)
    };
    assert_eq!(status, 200);
    assert!(!metrics.contains("d3cision") && !metrics.contains("adm1n"));
    assert_eq!(with("DELETE", "/v1/keys/api/k", "", "adm1n").0, 200);
    assert_eq!(with("DELETE", "/v1/overrides/api/k", "", "adm1n").0, 200);
}

/// `[[override]]` tables and `[policy.tiers.*]` in the config file: the
/// file's overrides apply from the start, one set at runtime wins on the
/// same selector, a reload replaces the file's; a request's tier picks
/// the tier's parameters, an unknown one is a 400 naming `tier`.
#[test]
fn config_overrides_and_tiers_apply_and_reload() {
    let file = |limit: u64| {
        format!(
            "[[policy]]\nname = \"api\"\nalgorithm = \"fixed_window\"\nlimit = 3\nwindow = \"1h\"\n\n[policy.tiers.pro]\nlimit = 50\n\n[[override]]\npolicy = \"api\"\nkey = \"acme\"\nlimit = {limit}\n\n[[override]]\npolicy = \"api\"\nkey = \"paid_*\"\ntier = \"pro\"\n"
        )
    };
    let dir = temp_dir();
    let config = dir.join("tollgate.toml");
    std::fs::write(&config, file(7)).unwrap();
    let s = Service::start(&config, &[]);
    let limit = |key: &str, tier: Option<&str>| {
        let tier = tier.map_or(String::new(), |t| format!(",\"tier\":\"{t}\""));
        let body = format!("{{\"policy\":\"api\",\"key\":\"{key}\",\"cost\":0{tier}}}");
        let (status, body) = parse(&s.request("POST", "/v1/check", &body));
        assert_eq!(status, 200, "{body}");
        (body["limit"].as_u64().unwrap(), body["override"].clone())
    };
    assert_eq!(limit("acme", None), (7, "acme".into()));
    assert_eq!(limit("paid_1", None), (50, "paid_*".into()));
    assert_eq!(limit("other", Some("pro")), (50, Value::Null));
    assert_eq!(limit("other", None), (3, Value::Null));
    let (status, body) = parse(&s.request(
        "POST",
        "/v1/check",
        "{\"policy\":\"api\",\"key\":\"k\",\"tier\":\"gold\"}",
    ));
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`tier`"),
        "{body}"
    );
    // Listed with their source; a runtime one wins on the same selector.
    let (_, listed) = parse(&s.request("GET", "/v1/overrides/api", ""));
    assert_eq!(listed["overrides"][0]["source"], "config", "{listed}");
    let (status, _) = parse(&s.request("PUT", "/v1/overrides/api/acme", "{\"limit\": 9}"));
    assert_eq!(status, 200);
    assert_eq!(limit("acme", None), (9, "acme".into()));
    let (_, got) = parse(&s.request("GET", "/v1/overrides/api/acme", ""));
    assert_eq!(got["source"], "api", "{got}");
    // Removing the runtime one uncovers the file's; the file's own cannot
    // be removed through the API.
    assert_eq!(
        parse(&s.request("DELETE", "/v1/overrides/api/acme", "")).0,
        200
    );
    assert_eq!(limit("acme", None), (7, "acme".into()));
    let (status, body) = parse(&s.request("DELETE", "/v1/overrides/api/acme", ""));
    assert_eq!(status, 404);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("config file"),
        "{body}"
    );
    // A reload replaces the file's overrides.
    std::fs::write(&config, file(11)).unwrap();
    eventually("the reload applies the file's new override", || {
        limit("acme", None) == (11, "acme".into())
    });
}

/// A batch's checks and Envoy's descriptors are decided under their keys'
/// overrides, as a single check is: raised limits, blocked and allowed
/// keys, and an atomic batch with a blocked key consumes nothing.
#[tokio::test]
async fn batches_and_grpc_descriptors_honour_overrides() {
    use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
    use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;

    let dir = temp_dir();
    let config = dir.join("tollgate.toml");
    std::fs::write(&config, include_str!("common/grpc.toml")).unwrap();
    let s = Service::start(&config, &["--grpc-listen", "127.0.0.1:0"]);
    let put = |selector: &str, body: &str| {
        let (status, body) =
            parse(&s.request("PUT", &format!("/v1/overrides/per-ip/{selector}"), body));
        assert_eq!(status, 200, "{body}");
    };
    // Descriptor keys are the domain and entries, each after its length.
    put("4:edge14:remote_address8:10.0.0.9", "{\"limit\": 10}");
    put(
        "4:edge14:remote_address8:10.6.6.6",
        "{\"action\": \"block\"}",
    );
    put("vip", "{\"action\": \"allow\"}");
    put("big", "{\"limit\": 8}");

    // Batches over HTTP.
    let batch = |checks: &str, atomic: bool| {
        parse(&s.request(
            "POST",
            "/v1/check",
            &format!("{{\"checks\": [{checks}], \"atomic\": {atomic}}}"),
        ))
    };
    let one = |key: &str| format!("{{\"policy\": \"per-ip\", \"key\": \"{key}\"}}");
    let (status, body) = batch(&[one("big"), one("vip"), one("plain")].join(","), false);
    assert_eq!(status, 200, "{body}");
    let d = &body["decisions"];
    assert_eq!(
        (d[0]["limit"].as_u64(), d[0]["override"].as_str()),
        (Some(8), Some("big"))
    );
    assert_eq!(
        (d[1]["override"].as_str(), d[1]["allowed"].as_bool()),
        (Some("vip"), Some(true))
    );
    assert_eq!(
        (d[2]["limit"].as_u64(), d[2].get("override")),
        (Some(3), None)
    );
    // An atomic batch with a blocked key: denied whole, nothing consumed.
    let blocked = "4:edge14:remote_address8:10.6.6.6";
    let (status, body) = batch(&[one("big"), one(blocked)].join(","), true);
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["decisions"][0]["allowed"], false, "{body}");
    assert_eq!(body["decisions"][1]["override"], blocked, "{body}");
    let peek = parse(&s.request(
        "POST",
        "/v1/check",
        "{\"policy\":\"per-ip\",\"key\":\"big\",\"cost\":0}",
    ));
    assert_eq!(
        peek.1["remaining"], 7,
        "only the first batch consumed: {}",
        peek.1
    );

    // Envoy's descriptors over gRPC.
    let mut client = s.client().await;
    let mut ask = async |addr: &str| {
        let request = RateLimitRequest {
            hits_addend: 1,
            ..common::envoy::request("edge", &[("remote_address", addr)])
        };
        client
            .should_rate_limit(request)
            .await
            .unwrap()
            .into_inner()
    };
    let r = ask("10.0.0.9").await;
    let status = &r.statuses[0];
    assert_eq!(status.code, Code::Ok as i32);
    assert_eq!(status.current_limit.as_ref().unwrap().requests_per_unit, 10);
    assert_eq!(status.limit_remaining, 9);
    let r = ask("10.6.6.6").await;
    assert_eq!(r.overall_code, Code::OverLimit as i32, "blocked");
    for _ in 0..3 {
        assert_eq!(ask("10.0.0.1").await.overall_code, Code::Ok as i32);
    }
    assert_eq!(
        ask("10.0.0.1").await.overall_code,
        Code::OverLimit as i32,
        "no override: 3"
    );
}

/// Reservations, `at_most` and usage records run under the key's
/// override too: its parameters, and a blocked or allowed key records
/// nothing.
#[test]
fn reserve_usage_and_at_most_honour_overrides() {
    let dir = temp_dir();
    let config = dir.join("tollgate.toml");
    std::fs::write(&config, CONFIG.split_once("\n\n").unwrap().1).unwrap();
    let s = Service::start(&config, &[]);
    let put = |selector: &str, body: &str| {
        let (status, body) =
            parse(&s.request("PUT", &format!("/v1/overrides/bucket/{selector}"), body));
        assert_eq!(status, 200, "{body}");
    };
    put("acme", "{\"burst\": 50}");
    put("bad", "{\"action\": \"block\"}");
    put("vip", "{\"action\": \"allow\"}");
    let post = |path: &str, body: String| parse(&s.request("POST", path, &body));
    let (status, body) = post(
        "/v1/reserve",
        "{\"policy\":\"bucket\",\"key\":\"acme\",\"cost\":20,\"max_wait_ms\":0}".into(),
    );
    assert_eq!((status, body["limit"].as_u64()), (200, Some(50)), "{body}");
    let remaining = |key: &str| {
        post(
            "/v1/check",
            format!("{{\"policy\":\"bucket\",\"key\":\"{key}\",\"cost\":0}}"),
        )
        .1["remaining"]
            .clone()
    };
    assert_eq!(remaining("acme"), 30);
    let (status, body) = post(
        "/v1/charge",
        "{\"policy\":\"bucket\",\"key\":\"bad\",\"cost\":3}".into(),
    );
    assert_eq!(
        (status, body["allowed"].as_bool()),
        (200, Some(false)),
        "{body}"
    );
    let (status, body) = post(
        "/v1/check",
        "{\"policy\":\"bucket\",\"key\":\"vip\",\"at_most\":40}".into(),
    );
    assert_eq!(
        (status, body["granted"].as_u64()),
        (200, Some(40)),
        "{body}"
    );
    let (status, body) = post(
        "/v1/check",
        "{\"policy\":\"bucket\",\"key\":\"acme\",\"at_most\":40}".into(),
    );
    assert_eq!(
        (status, body["granted"].as_u64()),
        (200, Some(30)),
        "{body}"
    );
    let (status, body) = post(
        "/v1/settle",
        "{\"policy\":\"bucket\",\"key\":\"bad\",\"estimate\":1,\"actual\":4}".into(),
    );
    assert_eq!(
        (status, body["allowed"].as_bool()),
        (200, Some(false)),
        "{body}"
    );
}

/// `tollgate_overrides` counts each policy's overrides by kind, decisions
/// under one carry `override="yes"` (never the key or the selector), and
/// `/v1/stats` gives the counts per policy.
#[test]
fn metrics_and_stats_count_overrides() {
    let dir = temp_dir();
    let config = dir.join("tollgate.toml");
    std::fs::write(&config, CONFIG.split_once("\n\n").unwrap().1).unwrap();
    let s = Service::start(&config, &[]);
    for (selector, body) in [
        ("secret-acme", "{\"limit\": 9}"),
        ("secret-trial_%2A", "{\"limit\": 4}"),
        ("secret-bot", "{\"action\": \"block\"}"),
    ] {
        let path = format!("/v1/overrides/api/{selector}");
        assert_eq!(parse(&s.request("PUT", &path, body)).0, 200);
    }
    assert_eq!(check(&s, "api", "secret-acme").0, 200);
    assert_eq!(check(&s, "api", "secret-bot").0, 429);
    assert_eq!(check(&s, "api", "plain").0, 200);
    let metrics = s.request("GET", "/metrics", "");
    let line = |needles: &[&str]| {
        metrics
            .lines()
            .find(|l| needles.iter().all(|n| l.contains(n)))
            .unwrap_or_else(|| panic!("no line with {needles:?} in {metrics}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        line(&["tollgate_overrides{", "policy=\"api\"", "kind=\"limits\""]),
        "2"
    );
    assert_eq!(
        line(&["tollgate_overrides{", "policy=\"api\"", "kind=\"block\""]),
        "1"
    );
    assert_eq!(
        line(&[
            "tollgate_overrides{",
            "policy=\"bucket\"",
            "kind=\"limits\""
        ]),
        "0"
    );
    let under = [
        "tollgate_decisions_total{",
        "override=\"yes\"",
        "policy=\"api\"",
    ];
    assert_eq!(line(&[&under[..], &["outcome=\"allowed\""]].concat()), "1");
    assert_eq!(line(&[&under[..], &["outcome=\"denied\""]].concat()), "1");
    assert!(
        !metrics.contains("secret-"),
        "a key or selector in the metrics"
    );
    let (_, stats) = parse(&s.request("GET", "/v1/stats", ""));
    let api = stats["policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "api")
        .unwrap();
    assert_eq!(api["overrides"]["limits"], 2, "{api}");
    assert_eq!(api["overrides"]["block"], 1, "{api}");
}

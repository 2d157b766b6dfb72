//! `tollgate override set|get|list|rm` against a running `tollgate serve`
//! with an admin token: each subcommand's effect seen through the HTTP
//! API, its exit codes (0 done, 1 no such override, 2 an error), and the
//! service's errors, naming the field, passed on.

mod common;

use std::process::Output;

use common::service::{Service, temp_dir};
use common::tollgate;
use serde_json::Value;

const CONFIG: &str = "[[policy]]\nname = \"api\"\nalgorithm = \"fixed_window\"\nlimit = 3\nwindow = \"1h\"\n\n[policy.tiers.pro]\nlimit = 40\n";

/// Runs `tollgate override ARGS` against `s` with `token`.
fn cli(s: &Service, token: &str, args: &[&str]) -> Output {
    tollgate()
        .arg("override")
        .args(args)
        .args(["--url", &format!("http://{}", s.addr), "--token", token])
        .output()
        .expect("run tollgate override")
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A check of `key` (the decision token): its limit and override.
fn limit(s: &Service, key: &str) -> (u64, Option<String>) {
    let response = s.request_with(
        "POST",
        "/v1/check",
        &format!("{{\"policy\":\"api\",\"key\":\"{key}\",\"cost\":0}}"),
        "Authorization: Bearer d3cision\r\n",
    );
    let body: Value = serde_json::from_str(response.split_once("\r\n\r\n").unwrap().1).unwrap();
    (
        body["limit"].as_u64().unwrap(),
        body["override"].as_str().map(str::to_string),
    )
}

#[test]
fn set_get_list_and_rm_against_a_running_service() {
    let config = temp_dir().join("tollgate.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let s = Service::start_env(
        &config,
        &["--token", "d3cision"],
        &[("TOLLGATE_ADMIN_TOKEN", "adm1n")],
    );

    // set: the policy's own parameter names, a ttl; a prefix; an action; a tier.
    let out = cli(
        &s,
        "adm1n",
        &["set", "api", "acme", "--limit", "500", "--ttl", "24h"],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stored = json(&out);
    assert_eq!(stored["parameters"]["limit"], 500, "{stored}");
    assert!(
        stored["ttl_ms"].as_u64().unwrap() > 23 * 3_600_000,
        "{stored}"
    );
    assert_eq!(
        cli(&s, "adm1n", &["set", "api", "trial_*", "--limit", "10"])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        cli(
            &s,
            "adm1n",
            &["set", "api", "bad bot/1", "--action", "block"]
        )
        .status
        .code(),
        Some(0)
    );
    assert_eq!(
        cli(&s, "adm1n", &["set", "api", "paid", "--tier", "pro"])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(limit(&s, "acme"), (500, Some("acme".into())));
    assert_eq!(limit(&s, "trial_42"), (10, Some("trial_*".into())));
    assert_eq!(limit(&s, "paid"), (40, Some("paid".into())));
    assert_eq!(limit(&s, "other"), (3, None));

    // get and list.
    let got = json(&cli(&s, "adm1n", &["get", "api", "bad bot/1"]));
    assert_eq!(
        (got["selector"].as_str(), got["action"].as_str()),
        (Some("bad bot/1"), Some("block"))
    );
    let listed = json(&cli(&s, "adm1n", &["list", "api"]));
    let selectors: Vec<&str> = listed["overrides"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["selector"].as_str().unwrap())
        .collect();
    assert_eq!(selectors, ["acme", "bad bot/1", "paid", "trial_*"]);

    // rm, then get and rm find nothing: exit 1.
    assert_eq!(
        cli(&s, "adm1n", &["rm", "api", "acme"]).status.code(),
        Some(0)
    );
    assert_eq!(limit(&s, "acme"), (3, None));
    assert_eq!(
        cli(&s, "adm1n", &["get", "api", "acme"]).status.code(),
        Some(1)
    );
    assert_eq!(
        cli(&s, "adm1n", &["rm", "api", "acme"]).status.code(),
        Some(1)
    );

    // The service's errors, exit 2: a parameter the algorithm does not
    // take, an unknown tier, a bad ttl, an unknown policy, the decision
    // token on an admin route. Nothing was applied.
    for (token, args, wanted) in [
        ("adm1n", &["set", "api", "x", "--rate", "5"][..], "`rate`"),
        ("adm1n", &["set", "api", "x", "--tier", "gold"], "`tier`"),
        (
            "adm1n",
            &["set", "api", "x", "--limit", "5", "--ttl", "soon"],
            "`ttl`",
        ),
        ("adm1n", &["set", "api", "x*y", "--limit", "5"], "selector"),
        ("adm1n", &["list", "nope"], "unknown_policy"),
        (
            "d3cision",
            &["set", "api", "x", "--limit", "5"],
            "forbidden",
        ),
    ] {
        let out = cli(&s, token, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(wanted), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("adm1n") && !stderr.contains("d3cision"),
            "{stderr}"
        );
    }
    assert_eq!(limit(&s, "x"), (3, None));

    // A bad value the command line itself refuses.
    let out = cli(&s, "adm1n", &["set", "api", "x", "--action", "maybe"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[test]
fn an_unreachable_service_is_an_error() {
    let out = tollgate()
        .args(["override", "list", "api", "--url", "http://127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot connect"));
}

//! The status page in a real browser: `tollgate serve` on a Redis the test
//! starts, some allowed and denied traffic, then Debian's headless
//! Chromium renders `GET /` and the test reads the DOM after the page's
//! script has polled `/v1/stats`: a row per policy, the counts, the
//! breaker; in multi-region mode, this region and each remote one. It
//! also takes a screenshot. `/v1/stats` itself is checked for the token
//! and for never naming a limited key.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tollgate_testkit::RedisServer;

use common::regions::{Regions, Setup, links, wait_for};
use common::service::{Service, temp_dir};

const CONFIG: &str = r#"
[[policy]]
name = "login"
algorithm = "fixed_window"
limit = 3
window = "1h"

[[policy]]
name = "api"
algorithm = "token_bucket"
rate = 5
per = "1h"
burst = 5
"#;

/// Runs headless Chromium on `url` with `args` and a fresh profile; killed
/// if it has not finished within two minutes.
fn chromium(dir: &Path, url: &str, args: &[&str]) -> Output {
    let profile = dir.join(format!("profile-{}", fastrand::u32(..)));
    let mut child = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium is installed (scripts/test installs it)");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish within 2 minutes");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "chromium exited {:?}", out.status);
    out
}

/// The text of the first `<tag … class="CLASS">` cell in `row`.
fn cell<'a>(row: &'a str, class: &str) -> &'a str {
    let start = row
        .find(&format!("class=\"{class}\">"))
        .unwrap_or_else(|| panic!("no {class} cell in {row}"));
    let text = &row[start + class.len() + 9..];
    &text[..text.find('<').unwrap()]
}

/// The `<tr>` of `policy` in the rendered DOM.
fn row<'a>(dom: &'a str, policy: &str) -> &'a str {
    let start = dom
        .find(&format!("<tr data-policy=\"{policy}\">"))
        .unwrap_or_else(|| panic!("no row for {policy} in {dom}"));
    let row = &dom[start..];
    &row[..row.find("</tr>").unwrap()]
}

#[test]
fn the_page_shows_policies_counts_and_the_breaker_in_chromium() {
    let redis = RedisServer::start();
    let dir = temp_dir();
    let config = dir.join("tollgate.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let service = Service::start(&config, &["--redis", &redis.url()]);
    // login: 3 allowed then 7 denied; api: 5 allowed then 3 denied.
    for _ in 0..10 {
        service.check("login", 42);
    }
    for _ in 0..8 {
        service.check("api", 42);
    }
    let url = format!("http://{}/", service.addr);

    let out = chromium(&dir, &url, &["--dump-dom"]);
    let dom = String::from_utf8(out.stdout).unwrap();
    assert!(dom.contains("Updated "), "the page never polled: {dom}");
    let login = row(&dom, "login");
    assert_eq!(cell(login, "n allowed"), "3", "{login}");
    assert_eq!(cell(login, "n denied"), "7", "{login}");
    assert!(login.contains("fixed_window"), "{login}");
    let api = row(&dom, "api");
    assert_eq!(cell(api, "n allowed"), "5", "{api}");
    assert_eq!(cell(api, "n denied"), "3", "{api}");
    // The charts were drawn: both series have bars.
    assert!(login.contains("<path class=\"a\" d=\"M"), "{login}");
    assert!(login.contains("<path class=\"d\" d=\"M"), "{login}");
    assert!(
        dom.contains("<dd id=\"breaker\" class=\"\">closed</dd>"),
        "{dom}"
    );
    assert!(dom.contains("none since start"), "{dom}");
    // No [regions]: no regions section.
    assert!(
        dom.contains("<section id=\"regions\" hidden=\"\">"),
        "{dom}"
    );
    assert!(
        dom.contains("<dd id=\"fallback-time\">0 (on the store)</dd>"),
        "{dom}"
    );
    // Both keys' denials were long (a window away): the deny cache holds them.
    assert!(dom.contains("<dd id=\"deny-cache\">2</dd>"), "{dom}");
    assert!(!dom.contains("user-42"), "a limited key on the page: {dom}");

    let png = dir.join("page.png");
    chromium(
        &dir,
        &url,
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1200,900",
        ],
    );
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(
        bytes.len() > 10_000,
        "an empty screenshot: {} bytes",
        bytes.len()
    );
}

/// The `<tr>` of remote region `region` in the rendered DOM.
fn link_row<'a>(dom: &'a str, region: &str) -> &'a str {
    let start = dom
        .find(&format!("<tr data-region=\"{region}\">"))
        .unwrap_or_else(|| panic!("no row for region {region} in {dom}"));
    let row = &dom[start..];
    &row[..row.find("</tr>").unwrap()]
}

/// `links`' count `field` of its first (only) link.
fn count(links: &Value, field: &str) -> u64 {
    links["links"][0][field].as_u64().unwrap()
}

#[test]
fn the_page_shows_this_region_and_its_links_in_chromium() {
    let dir = temp_dir();
    let setup = Setup {
        sync: "100ms",
        partition_after: "1s",
        policies: "[[policy]]\nname = \"api\"\nalgorithm = \"fixed_window\"\nlimit = 100\nwindow = \"1h\"\n",
    };
    let regions = Regions::start(&dir, &["eu", "us"], &setup);
    regions.wait_connected();
    let [eu, us] = &regions.services[..] else {
        unreachable!("two regions")
    };
    // Traffic in both regions, so that eu both sends and receives.
    for s in [eu, us] {
        let response = s.check("api", 1);
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    }
    wait_for("eu to send and receive", || {
        let l = links(eu);
        count(&l, "sent") >= 1 && count(&l, "received") >= 1
    });
    let url = format!("http://{}/", eu.addr);
    let before = links(eu);
    let dom = String::from_utf8(chromium(&dir, &url, &["--dump-dom"]).stdout).unwrap();
    let after = links(eu);
    for shown in [
        "Updated ",
        "<section id=\"regions\">",
        "<strong id=\"region-name\">eu</strong>",
        "<span id=\"region-state\" class=\"\">connected</span>",
        "<span id=\"region-global\">api</span>",
    ] {
        assert!(dom.contains(shown), "no {shown} in {dom}");
    }
    let us_row = link_row(&dom, "us");
    assert_eq!(cell(us_row, "link"), "up", "{us_row}");
    // The page shows what /v1/regions answered while it polled.
    for field in ["sent", "received"] {
        let shown: u64 = cell(us_row, &format!("n {field}")).parse().unwrap();
        assert!(
            count(&before, field) <= shown && shown <= count(&after, field),
            "{field}: {shown} shown, {before} before, {after} after"
        );
    }
    let lag = cell(us_row, "n lag");
    assert!(lag.ends_with(" ms") || lag.ends_with(" s"), "{us_row}");

    regions.links.iter().for_each(|l| l.cut());
    wait_for("eu to call it a partition", || {
        links(eu)["partitioned"] == true
    });
    let dom = String::from_utf8(chromium(&dir, &url, &["--dump-dom"]).stdout).unwrap();
    assert!(
        dom.contains(
            "<span id=\"region-state\" class=\"bad\">partitioned: deciding within its share</span>"
        ),
        "{dom}"
    );
    let us_row = link_row(&dom, "us");
    assert_eq!(cell(us_row, "bad link"), "partitioned", "{us_row}");
    assert!(!dom.contains("user-1"), "a limited key on the page: {dom}");
}

#[test]
fn with_a_token_stats_want_it_and_the_page_asks_for_it() {
    let dir = temp_dir();
    let config = dir.join("tollgate.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let service = Service::start(&config, &["--token", "s3cret"]);
    service.check("login", 7);
    let page = service.request("GET", "/", "");
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("text/html; charset=utf-8"), "{page}");
    // The palette is put into the stylesheet: admitted blue, denied vermillion.
    assert!(
        page.contains("--admitted: #0072b2; --denied: #d55e00;"),
        "{page}"
    );
    let refused = service.request("GET", "/v1/stats", "");
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    let stats = service.request_with("GET", "/v1/stats", "", "Authorization: Bearer s3cret\r\n");
    assert!(stats.starts_with("HTTP/1.1 200"), "{stats}");
    assert!(
        !stats.contains("user-7"),
        "a limited key in the stats: {stats}"
    );
    let body: Value = serde_json::from_str(stats.split_once("\r\n\r\n").unwrap().1).unwrap();
    let policies = body["policies"].as_array().unwrap();
    assert_eq!(policies.len(), 2);
    // The check was refused (no token), so nothing was counted.
    assert_eq!(policies[0]["allowed"].as_array().unwrap().len(), 180);
    assert_eq!(body["store"]["breaker"], Value::Null);

    // The browser without a token: the page asks for it.
    let out = chromium(&dir, &format!("http://{}/", service.addr), &["--dump-dom"]);
    let dom = String::from_utf8(out.stdout).unwrap();
    assert!(dom.contains("A token is required."), "{dom}");
    assert!(
        dom.contains("<form id=\"login\">"),
        "the form stays hidden: {dom}"
    );
}

//! Regions of `tollgate serve` on loopback (docs/regions.md's setup): each
//! its own `redis-server` and service, each service reaching every other
//! region's Redis through a `TcpProxy` of its own that adds 80 ms each way
//! (and can cut the link).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use tollgate_testkit::{RedisServer, TcpProxy};

use super::service::Service;

/// What the regions share: how often they sync, when a silent link counts
/// as a partition, and the policies (TOML), of which `api` is global.
pub(crate) struct Setup<'a> {
    pub(crate) sync: &'a str,
    pub(crate) partition_after: &'a str,
    pub(crate) policies: &'a str,
}

/// Running regions; every server and proxy stops when dropped.
pub(crate) struct Regions {
    /// In the order of the names given.
    pub(crate) services: Vec<Service>,
    /// Every proxy between two regions.
    pub(crate) links: Vec<TcpProxy>,
    _redis: Vec<RedisServer>,
}

impl Regions {
    /// One region per name, configs written under `dir`.
    pub(crate) fn start(dir: &Path, names: &[&str], setup: &Setup<'_>) -> Regions {
        let redis: Vec<RedisServer> = names.iter().map(|_| RedisServer::start()).collect();
        let mut links = Vec::new();
        let mut services = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let mut remotes = String::new();
            for (j, remote) in names.iter().enumerate().filter(|&(j, _)| j != i) {
                let link = TcpProxy::start(redis[j].addr());
                link.delay(Duration::from_millis(80));
                remotes += &format!(
                    "\n[[regions.remote]]\nname = \"{remote}\"\nurls = [\"{}\"]\n",
                    link.url()
                );
                links.push(link);
            }
            let path = dir.join(format!("{name}.toml"));
            let text = format!(
                r#"
[store]
urls = ["{local}"]
# Generous: a decision past the deadline is the failure policy's, and
# these tests count what Redis decided, on a loaded machine.
deadline = "5s"

[regions]
name = "{name}"
sync_interval = "{sync}"
partition_after = "{partition_after}"
global = ["api"]
{remotes}
{policies}"#,
                local = redis[i].url(),
                sync = setup.sync,
                partition_after = setup.partition_after,
                policies = setup.policies,
            );
            std::fs::write(&path, text).unwrap();
            services.push(Service::start(&path, &[]));
        }
        Regions {
            services,
            links,
            _redis: redis,
        }
    }

    /// Waits until every region's links have carried a round and none
    /// decides as partitioned (connecting over the 160 ms round trip takes
    /// several).
    pub(crate) fn wait_connected(&self) {
        for s in &self.services {
            wait_for("the links to come up", || {
                let links = links(s);
                links["partitioned"] == false
                    && links["links"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .all(|l| l["rounds"].as_u64() > Some(0))
            });
        }
    }
}

/// The status and JSON body of a response.
pub(crate) fn answer(response: &str) -> (u16, Value) {
    let status = response[9..12].parse().unwrap();
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// `GET /v1/regions`.
pub(crate) fn links(s: &Service) -> Value {
    let (status, body) = answer(&s.request("GET", "/v1/regions", ""));
    assert_eq!(status, 200, "{body}");
    body
}

/// Polls `done` every 50 ms, for a minute at most.
pub(crate) fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

//! Regions on loopback: each a `redis-server` (or a 3-primary Redis
//! Cluster) with its own regional store and replicator; each replicator
//! reaches every other region's standalone Redis through a `TcpProxy` of
//! its own (latency, partitions), and a cluster region's nodes directly
//! (a cluster's redirects name its nodes' own ports, which a single proxy
//! cannot stand for).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tollgate::store::redis::RedisStore;
use tollgate::store::redis::regions::{RegionView, RegionalStore, Regions, Replicator};
use tollgate::{Clock, ManualClock, Policy, Store};
use tollgate_testkit::{RedisCluster, RedisServer, TcpProxy};

pub(crate) enum Redis {
    Single(RedisServer),
    Cluster(RedisCluster),
}

impl Redis {
    pub(crate) fn urls(&self) -> Vec<String> {
        match self {
            Redis::Single(s) => vec![s.url()],
            Redis::Cluster(c) => c.seed_urls(),
        }
    }

    /// Every command the server (every node) ran but `INFO`, `CLUSTER` and
    /// `PING` (which the test and the cluster client's housekeeping send).
    pub(crate) fn commands(&self) -> u64 {
        let count = |s: &RedisServer| s.command_calls_except(&["info", "cluster*", "ping"]);
        match self {
            Redis::Single(s) => count(s),
            Redis::Cluster(c) => c.nodes().iter().map(count).sum(),
        }
    }
}

impl Redis {
    /// `EVALSHA` calls the server (every node) ran.
    pub(crate) fn evalsha(&self) -> u64 {
        match self {
            Redis::Single(s) => s.command_calls("evalsha"),
            Redis::Cluster(c) => c.nodes().iter().map(|s| s.command_calls("evalsha")).sum(),
        }
    }
}

pub(crate) struct Mesh {
    pub(crate) redis: Vec<Redis>,
    /// `links[i][j]`: the proxy region i's replicator reaches region j
    /// through (`None` for i == j and for a cluster region).
    pub(crate) links: Vec<Vec<Option<TcpProxy>>>,
    pub(crate) stores: Vec<RegionalStore>,
    pub(crate) replicators: Vec<Arc<Replicator>>,
    pub(crate) clock: Arc<ManualClock>,
}

pub(crate) struct MeshSpec<'a> {
    pub(crate) names: &'a [&'a str],
    /// The region (index) that runs a Redis Cluster.
    pub(crate) cluster: Option<usize>,
    pub(crate) delay: Duration,
    pub(crate) sync: Duration,
    pub(crate) partition_after: Duration,
    pub(crate) global: &'a [&'a str],
    /// Where the windows' clock starts (a window boundary).
    pub(crate) start: u64,
}

impl Mesh {
    pub(crate) async fn start(spec: MeshSpec<'_>) -> Mesh {
        let n = spec.names.len();
        let redis: Vec<Redis> = (0..n)
            .map(|i| match spec.cluster {
                Some(c) if c == i => Redis::Cluster(RedisCluster::start(3, 0)),
                _ => Redis::Single(RedisServer::start()),
            })
            .collect();
        let links: Vec<Vec<Option<TcpProxy>>> = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| match &redis[j] {
                        Redis::Single(s) if i != j => {
                            let proxy = TcpProxy::start(s.addr());
                            proxy.delay(spec.delay);
                            Some(proxy)
                        }
                        _ => None,
                    })
                    .collect()
            })
            .collect();
        let clock = Arc::new(ManualClock::new(spec.start));
        let mut stores = Vec::new();
        let mut replicators = Vec::new();
        for i in 0..n {
            let remotes: Vec<usize> = (0..n).filter(|&j| j != i).collect();
            let regions = Regions::new(spec.names[i], remotes.iter().map(|&j| spec.names[j]))
                .unwrap()
                .sync_interval(spec.sync)
                .unwrap()
                .partition_after(spec.partition_after)
                .unwrap();
            let local = RedisStore::builder(redis[i].urls())
                .connect()
                .await
                .unwrap();
            let store = RegionalStore::with_clock(
                local,
                regions,
                spec.global.iter().copied(),
                clock.clone(),
            );
            let builders = remotes
                .iter()
                .map(|&j| match &links[i][j] {
                    Some(proxy) => RedisStore::builder([proxy.url()]),
                    None => RedisStore::builder(redis[j].urls()),
                })
                .collect();
            replicators.push(Arc::new(Replicator::new(store.clone(), builders).unwrap()));
            stores.push(store);
        }
        Mesh {
            redis,
            links,
            stores,
            replicators,
            clock,
        }
    }

    /// Runs every replicator in the background until the handles drop.
    pub(crate) fn run(&self) -> Vec<tokio::task::JoinHandle<()>> {
        self.replicators
            .iter()
            .map(|r| {
                let r = r.clone();
                tokio::spawn(async move { r.run().await })
            })
            .collect()
    }

    /// One round of every replicator, each failing link named.
    pub(crate) async fn round(&self) -> Vec<(String, String)> {
        let mut failed = Vec::new();
        for r in &self.replicators {
            failed.extend(r.round().await.failed);
        }
        failed
    }

    /// Cuts (or heals) every link between regions.
    pub(crate) fn partition(&self, cut: bool) {
        for proxy in self.links.iter().flatten().flatten() {
            if cut { proxy.cut() } else { proxy.pass() }
        }
    }

    pub(crate) async fn view(&self, region: usize, policy: &Policy, key: &[u8]) -> RegionView {
        self.stores[region].view(policy, key).await.unwrap()
    }

    /// Each region's view of `key`'s components, as (region, count)
    /// sorted by region.
    pub(crate) async fn components(
        &self,
        region: usize,
        policy: &Policy,
        key: &[u8],
    ) -> Vec<(String, u64)> {
        let mut c = self.view(region, policy, key).await.components;
        c.sort();
        c
    }

    /// Checks cost 1 on `key` in `region` until the first denial: how
    /// many were admitted.
    pub(crate) async fn fill(&self, region: usize, policy: &Policy, key: &[u8]) -> u64 {
        let mut admitted = 0;
        while self.stores[region]
            .check(policy, key, 1)
            .await
            .unwrap()
            .allowed
        {
            admitted += 1;
            assert!(
                admitted <= policy.limit(),
                "a region admitted past the limit alone"
            );
        }
        admitted
    }
}

/// Polls `done` every 20 ms until it holds, for at most `within`.
pub(crate) async fn wait_for<F, Fut>(what: &str, within: Duration, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !done().await {
        assert!(
            start.elapsed() < within,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A window boundary near now, µs since the epoch, for `window`.
pub(crate) fn aligned_now(window: Duration) -> u64 {
    let now = tollgate::SystemClock.now_micros();
    let w = window.as_micros() as u64;
    now / w * w
}

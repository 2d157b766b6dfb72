//! One limit across regions, on real servers on loopback (see
//! docs/regions.md): each region a `redis-server` (one a 3-primary Redis
//! Cluster) with its regional store and replicator, linked through
//! `TcpProxy`s that add latency and can partition. The windows are named
//! by a clock the test moves; replication runs on real time.
//!
//! Each load test prints one row (run with `--nocapture`, rows start with
//! `|`): regions | window | admitted per region | total | bound | Δ
//! measured.
#![cfg(feature = "redis")]

mod bound;
mod partition;
mod support;

use std::time::Duration;

use tollgate::{Policy, Store};

use self::support::{Mesh, MeshSpec, aligned_now};

const MINUTE: Duration = Duration::from_secs(60);

fn spec<'a>(names: &'a [&'a str], global: &'a [&'a str]) -> MeshSpec<'a> {
    MeshSpec {
        names,
        cluster: None,
        delay: Duration::ZERO,
        sync: Duration::from_millis(50),
        partition_after: Duration::from_secs(30),
        global,
        start: aligned_now(MINUTE),
    }
}

/// Without a round, each region sees only itself: together they admit
/// the limit once per region. After a round, each sees the other's
/// component and the sum holds; in the next window, what one region
/// admitted and replicated is exactly what the other can no longer admit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_makes_each_region_count_the_others() {
    let mesh = Mesh::start(spec(&["eu", "us"], &["api"])).await;
    let api = Policy::fixed_window("api", 100, MINUTE).unwrap();
    assert_eq!(mesh.fill(0, &api, b"k").await, 100);
    assert_eq!(
        mesh.fill(1, &api, b"k").await,
        100,
        "us has not heard from eu"
    );
    assert!(mesh.round().await.is_empty());
    for region in 0..2 {
        let view = mesh.view(region, &api, b"k").await;
        assert_eq!(view.total, 200, "both components everywhere");
        assert_eq!(mesh.fill(region, &api, b"k").await, 0);
    }
    mesh.clock.advance(MINUTE);
    for _ in 0..60 {
        assert!(mesh.stores[0].check(&api, b"k", 1).await.unwrap().allowed);
    }
    assert!(mesh.round().await.is_empty());
    assert_eq!(mesh.fill(1, &api, b"k").await, 40, "exactly what eu left");
    assert!(mesh.round().await.is_empty());
    let want = vec![("eu".to_string(), 60), ("us".to_string(), 40)];
    assert_eq!(mesh.components(0, &api, b"k").await, want);
    assert_eq!(mesh.components(1, &api, b"k").await, want);
    // A policy that is not global is each region's own.
    let local = Policy::fixed_window("local", 5, MINUTE).unwrap();
    assert_eq!(mesh.fill(0, &local, b"k").await, 5);
    assert_eq!(mesh.fill(1, &local, b"k").await, 5);
}

/// A decision is one script on the local Redis: with replication not
/// running, a thousand decisions in one region send not one command to
/// the other's Redis (counted by the server), and they go on answering
/// while the link is cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_never_call_a_remote_region() {
    let mesh = Mesh::start(spec(&["eu", "us"], &["api"])).await;
    let api = Policy::fixed_window("api", 600, MINUTE).unwrap();
    // The script's first call loads it (NOSCRIPT, then SCRIPT LOAD).
    mesh.stores[0].check(&api, b"warm", 1).await.unwrap();
    let local_before = mesh.redis[0].commands();
    let scripts_before = mesh.redis[0].evalsha();
    let remote_before = mesh.redis[1].commands();
    for i in 0..1000u32 {
        let key = format!("k{}", i % 7);
        mesh.stores[0].check(&api, key.as_bytes(), 1).await.unwrap();
    }
    assert_eq!(mesh.redis[1].commands(), remote_before, "no remote command");
    assert!(
        mesh.redis[0].commands() >= local_before + 1000,
        "every decision ran on the local Redis"
    );
    assert_eq!(
        mesh.redis[0].evalsha(),
        scripts_before + 1000,
        "one script call per decision"
    );
    mesh.partition(true);
    for _ in 0..100 {
        mesh.stores[0].check(&api, b"k0", 1).await.unwrap();
    }
    // Only eu's replicator: us's would read its own Redis.
    assert!(
        !mesh.replicators[0].round().await.failed.is_empty(),
        "the cut link fails its round"
    );
    assert_eq!(mesh.redis[1].commands(), remote_before);
    mesh.partition(false);
    support::wait_for(
        "the healed link's round",
        Duration::from_secs(20),
        || async { mesh.round().await.is_empty() },
    )
    .await;
    assert_eq!(
        mesh.view(1, &api, b"k0").await.components[0],
        ("us".to_string(), 0)
    );
    assert_eq!(
        mesh.components(1, &api, b"k0").await,
        mesh.components(0, &api, b"k0").await,
        "the round held back by the cut arrives"
    );
}

/// Components are maxima: replaying an old merge, the same merge again,
/// or an old heartbeat changes nothing, and a round with nothing new
/// merges nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_of_old_components_changes_nothing() {
    let mesh = Mesh::start(spec(&["eu", "us"], &["api"])).await;
    let api = Policy::fixed_window("api", 100, MINUTE).unwrap();
    for _ in 0..30 {
        mesh.stores[0].check(&api, b"k", 1).await.unwrap();
    }
    mesh.round().await;
    for _ in 0..20 {
        mesh.stores[0].check(&api, b"k", 1).await.unwrap();
    }
    mesh.round().await;
    let before = mesh.components(1, &api, b"k").await;
    assert_eq!(before[0], ("eu".to_string(), 50));
    let key = String::from_utf8(mesh.stores[1].window_key_of(&api, b"k")).unwrap();
    let merge = include_str!("../../src/store/redis/regions/lua/region_merge.lua");
    let support::Redis::Single(us) = &mesh.redis[1] else {
        unreachable!()
    };
    for old in ["30", "50"] {
        let reply = us.cli(&["EVAL", merge, "1", &key, "eu", old, "60000"]);
        assert_eq!(reply, "0", "replaying eu = {old} grew nothing");
    }
    assert_eq!(mesh.round().await, vec![]);
    assert_eq!(mesh.replicators[0].round().await.merged, 0);
    assert_eq!(mesh.components(1, &api, b"k").await, before);
    let heartbeat = include_str!("../../src/store/redis/regions/lua/region_heartbeat.lua");
    let reply = us.cli(&[
        "EVAL",
        heartbeat,
        "1",
        "tollgate:{regions}:seen",
        "eu",
        "1",
        "0",
        "60000",
    ]);
    assert_eq!(reply, "0", "an old heartbeat does not move time back");
    mesh.replicators[1].watch().await;
    let link = &mesh.stores[1].links()[0];
    assert!(!link.partitioned && link.lag.unwrap() < Duration::from_secs(30));
    // A late merge for an old window lands in that window's own key.
    mesh.clock.advance(MINUTE);
    assert_eq!(mesh.view(1, &api, b"k").await.total, 0);
}

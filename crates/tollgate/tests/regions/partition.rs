//! A partition: each region keeps deciding alone, its own component capped
//! at its share `floor(limit / R)` (past it only by what it had counted
//! when the partition began); after healing every region's Redis holds
//! the same components again.

use std::sync::Arc;
use std::time::Duration;

use tollgate::{Policy, Store};

use super::support::{Mesh, MeshSpec, aligned_now, wait_for};

const WINDOW: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_caps_each_region_at_its_share_and_heals() {
    let mesh = Arc::new(
        Mesh::start(MeshSpec {
            names: &["eu", "us"],
            cluster: None,
            delay: Duration::from_millis(80),
            sync: Duration::from_millis(50),
            partition_after: Duration::from_millis(600),
            global: &["api"],
            start: aligned_now(WINDOW),
        })
        .await,
    );
    let api = Policy::fixed_window("api", 100, WINDOW).unwrap();
    assert!(mesh.round().await.is_empty());
    let replicators = mesh.run();
    for _ in 0..30 {
        assert!(mesh.stores[0].check(&api, b"k", 1).await.unwrap().allowed);
    }
    let (m, a) = (&mesh, &api);
    wait_for(
        "us to hear eu's 30",
        Duration::from_secs(30),
        || async move { m.view(1, a, b"k").await.total == 30 },
    )
    .await;
    assert!(!mesh.stores[0].is_partitioned() && !mesh.stores[1].is_partitioned());

    mesh.partition(true);
    wait_for(
        "both regions to call it a partition",
        Duration::from_secs(30),
        || async move { m.stores.iter().all(|s| s.is_partitioned()) },
    )
    .await;
    // eu had 30, its share is 50: 20 more. us sees eu's 30 and caps at 50.
    assert_eq!(mesh.fill(0, &api, b"k").await, 20);
    assert_eq!(mesh.fill(1, &api, b"k").await, 50);
    let links = mesh.stores[1].links();
    assert!(links[0].partitioned && links[0].last_error.is_some());

    // A window lived wholly in the partition admits at most the limit.
    mesh.clock.advance(WINDOW);
    assert_eq!(mesh.fill(0, &api, b"k").await, 50);
    assert_eq!(mesh.fill(1, &api, b"k").await, 50);

    mesh.partition(false);
    wait_for(
        "the partition to heal",
        Duration::from_secs(30),
        || async move { m.stores.iter().all(|s| !s.is_partitioned()) },
    )
    .await;
    let want = vec![("eu".to_string(), 50), ("us".to_string(), 50)];
    for region in 0..2 {
        let want = &want;
        wait_for(
            "the totals to converge",
            Duration::from_secs(30),
            || async move { m.components(region, a, b"k").await == *want },
        )
        .await;
        assert_eq!(mesh.fill(region, &api, b"k").await, 0);
    }
    for r in replicators {
        r.abort();
    }
}

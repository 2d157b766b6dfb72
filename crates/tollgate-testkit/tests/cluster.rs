//! A real 3-primary / 1-replica Redis Cluster: creation, topology, failover.

use std::time::Instant;

use tollgate_testkit::{FailoverMode, RedisCluster, SLOT_COUNT, ServerState, key_slot};

#[test]
fn cluster_with_replicas_and_failover() {
    let t = Instant::now();
    let cluster = RedisCluster::start(3, 1);
    eprintln!("cluster ready after {:?}", t.elapsed());
    assert_eq!(cluster.nodes().len(), 6);
    assert_eq!(cluster.seed_urls().len(), 6);
    for out in cluster.cli_all(&["CLUSTER", "INFO"]) {
        assert!(out.contains("cluster_state:ok"), "{out}");
        assert!(out.contains("cluster_known_nodes:6"), "{out}");
    }

    // Three primaries with one replica each, covering every slot.
    let primaries = cluster.primaries();
    assert_eq!(primaries.len(), 3);
    for p in &primaries {
        let replicas = cluster.replicas_of(p);
        assert_eq!(replicas.len(), 1, "replicas of {}", p.port());
        assert!(p.cli(&["ROLE"]).starts_with("master"));
        assert!(replicas[0].cli(&["ROLE"]).starts_with("slave"));
    }
    let mut owners = std::collections::BTreeSet::new();
    for slot in [0, 1, 5000, 5461, 10922, 10923, SLOT_COUNT - 1] {
        owners.insert(cluster.primary_for_slot(slot).port());
    }
    assert_eq!(owners.len(), 3);

    // Our key_slot agrees with the server, and keys live where we say.
    let node = &cluster.nodes()[0];
    for i in 0..50 {
        let key = format!("tollgate:{{tenant-{i}}}:bucket:{}", i * 7919);
        let server_slot = node.cli(&["CLUSTER", "KEYSLOT", &key]);
        assert_eq!(server_slot, key_slot(key.as_bytes()).to_string(), "{key}");
        let owner = cluster.primary_for_key(key.as_bytes());
        assert_eq!(owner.cli(&["SET", &key, "1", "EX", "60"]), "OK");
    }
    let key = "no-ttl-key";
    let owner = cluster.primary_for_key(key.as_bytes());
    assert_eq!(owner.cli(&["SET", key, "1"]), "OK");
    let other = primaries.iter().find(|p| p.port() != owner.port()).unwrap();
    assert!(other.cli(&["GET", key]).starts_with("MOVED"));
    assert_eq!(cluster.scan_keys_without_ttl(), vec![key.to_owned()]);

    // Coordinated failover swaps roles.
    let slot = key_slot(key.as_bytes());
    let old_primary = cluster.primary_for_slot(slot);
    let replica = cluster.replicas_of(old_primary)[0];
    let t = Instant::now();
    cluster.failover(replica);
    eprintln!("failover done after {:?}", t.elapsed());
    assert_eq!(cluster.primary_for_slot(slot).port(), replica.port());
    assert!(replica.cli(&["ROLE"]).starts_with("master"));
    assert!(old_primary.cli(&["ROLE"]).starts_with("slave"));
    let new_replicas = cluster.replicas_of(replica);
    assert_eq!(new_replicas.len(), 1);
    assert_eq!(new_replicas[0].port(), old_primary.port());
    // The data followed (it was replicated before the coordinated failover).
    assert_eq!(replica.cli(&["GET", key]), "1");
    assert_eq!(cluster.scan_keys_without_ttl(), vec![key.to_owned()]);

    // Killing a primary: its replica is promoted automatically; after a
    // restart the old node rejoins (same nodes.conf) as a replica.
    let victim = cluster.primary_for_slot(0);
    let heir = cluster.replicas_of(victim)[0];
    let t = Instant::now();
    victim.kill9();
    cluster.wait_until_stable();
    eprintln!("automatic failover after kill -9 took {:?}", t.elapsed());
    assert_eq!(victim.state(), ServerState::Killed);
    assert_eq!(cluster.primary_for_slot(0).port(), heir.port());
    let t = Instant::now();
    victim.restart();
    cluster.wait_until_stable();
    eprintln!("rejoin after restart took {:?}", t.elapsed());
    assert!(victim.cli(&["ROLE"]).starts_with("slave"));
    assert_eq!(cluster.replicas_of(heir)[0].port(), victim.port());

    // Forced failover back while the heir is frozen.
    heir.stop();
    cluster.failover_with(victim, FailoverMode::Takeover);
    heir.cont();
    cluster.wait_until_stable();
    assert_eq!(cluster.primary_for_slot(0).port(), victim.port());
}

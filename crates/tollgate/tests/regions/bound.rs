//! The bound under load: one hot key split across regions, links 80 ms
//! each way, replication every 100 ms. In every window the global total is
//! at most `limit + Σ_{j ≠ i*} a_j(Δ)` (docs/regions.md): `i*` the region
//! whose admission came last, `a_j(Δ)` what region `j` admitted in the
//! last `Δ` before it (counted from the admissions' own timestamps), `Δ`
//! the staleness of `i*`'s view of `j` as `j`'s replicator measured it.
//! The count is conservative: an admission counts as unseen if its call
//! returned after `i*`'s last call was sent, less `Δ` (the bound holds
//! for any choice of `i*`; the region with the latest admission makes it
//! tightest).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tollgate::{Policy, Store};

use super::support::{Mesh, MeshSpec, aligned_now, wait_for};

const WINDOW: Duration = Duration::from_secs(60);
/// Real time each window is loaded for, before the clock moves to the
/// next: long enough for the regions to exhaust the limit together.
const LOADED: Duration = Duration::from_millis(2500);
/// Each worker's pause between its calls: at most 200 calls a second.
const PACE: Duration = Duration::from_millis(5);
const LIMIT: u64 = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_regions_stay_within_the_bound() {
    within_the_bound(&["eu", "us"], None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_regions_one_a_cluster_stay_within_the_bound() {
    within_the_bound(&["eu", "us", "ap"], Some(0)).await;
}

async fn within_the_bound(names: &[&str], cluster: Option<usize>) {
    let mesh = Mesh::start(MeshSpec {
        names,
        cluster,
        delay: Duration::from_millis(80),
        sync: Duration::from_millis(100),
        partition_after: Duration::from_secs(30),
        global: &["hot"],
        start: aligned_now(WINDOW),
    })
    .await;
    let mesh = Arc::new(mesh);
    let policy = Policy::fixed_window("hot", LIMIT, WINDOW).unwrap();
    // Connected before the load: a link's first round (connect, load the
    // scripts, several round trips over 160 ms) is not what is measured.
    assert!(mesh.round().await.is_empty());
    let replicators = mesh.run();
    let n = names.len();
    for window in 0..2 {
        // Δ is measured per window: the gaps before it (connecting, the
        // wait for convergence) bear on no admission in it.
        mesh.stores.iter().for_each(|s| s.reset_max_staleness());
        let stop = Arc::new(AtomicBool::new(false));
        let workers: Vec<_> = (0..n)
            .map(|region| {
                let (mesh, policy, stop) = (mesh.clone(), policy.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut admitted = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let sent = Instant::now();
                        let d = mesh.stores[region].check(&policy, b"hot", 1).await.unwrap();
                        if d.allowed {
                            admitted.push((sent, Instant::now()));
                        }
                        tokio::time::sleep(PACE).await;
                    }
                    admitted
                })
            })
            .collect();
        tokio::time::sleep(LOADED).await;
        stop.store(true, Ordering::Relaxed);
        let mut admitted = Vec::new();
        for w in workers {
            admitted.push(w.await.unwrap());
        }
        // Δ into each region: the staleness its view of the others had,
        // as the others' replicators measured it.
        let delta_into = |i: usize| {
            (0..n)
                .filter(|&j| j != i)
                .map(|j| {
                    let links = mesh.stores[j].links();
                    let link = links.iter().find(|l| l.region == names[i]).unwrap();
                    link.max_staleness
                })
                .max()
                .unwrap()
        };
        let last = |i: usize| admitted[i].last().map(|&(sent, _)| sent);
        let i_star = (0..n)
            .filter(|&i| last(i).is_some())
            .max_by_key(|&i| last(i))
            .unwrap();
        let t = last(i_star).unwrap();
        let delta = delta_into(i_star);
        let unseen: u64 = (0..n)
            .filter(|&j| j != i_star)
            .map(|j| {
                admitted[j]
                    .iter()
                    .filter(|&&(_, at)| at + delta > t)
                    .count() as u64
            })
            .sum();
        let counts: Vec<u64> = admitted.iter().map(|a| a.len() as u64).collect();
        let total: u64 = counts.iter().sum();
        let bound = LIMIT + unseen;
        println!(
            "| {n} regions{} | window {window} | {counts:?} | {total} | {bound} | {delta:?} |",
            if cluster.is_some() {
                " (one a cluster)"
            } else {
                ""
            }
        );
        assert!(total >= LIMIT, "the load exhausts the limit: {total}");
        assert!(
            total <= bound,
            "window {window}: {total} admitted, bound {bound} (Δ {delta:?})"
        );
        // Every region's Redis comes to hold the same components.
        let mut want = Vec::new();
        for (region, count) in names.iter().zip(&counts) {
            want.push((region.to_string(), *count));
        }
        want.sort();
        for region in 0..n {
            let (mesh, policy, want) = (&mesh, &policy, &want);
            wait_for(
                "the regions to converge",
                Duration::from_secs(30),
                || async move { mesh.components(region, policy, b"hot").await == *want },
            )
            .await;
        }
        mesh.clock.advance(WINDOW);
    }
    for r in replicators {
        r.abort();
    }
}

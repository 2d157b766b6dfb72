//! The regions' model: when components land, that a late landing for a
//! past window changes nothing, and the docs' bound over random traces.

use std::collections::HashMap;
use std::time::Duration;

use tollgate::Policy;

use super::{Layout, Mesh};
use crate::simulate::trace::Request;

fn layout(regions: usize, sync_ms: u64, latency_ms: u64) -> Layout {
    Layout {
        regions,
        sync: Duration::from_millis(sync_ms),
        latency: Duration::from_millis(latency_ms),
    }
}

fn request(t_ms: u64, key: &str, cost: u64) -> Request {
    Request {
        t_us: t_ms * 1000,
        policy: 0,
        key: key.into(),
        cost,
    }
}

/// Whether each of `requests` (time, cost) was admitted, dealt
/// round-robin.
fn replay(layout: Layout, policy: &Policy, requests: &[(u64, u64)]) -> Vec<bool> {
    let policies = [policy.clone()];
    let mut mesh = Mesh::new(layout, &policies);
    requests
        .iter()
        .map(|&(t, cost)| mesh.decide(&request(t, "k", cost)).unwrap().allowed)
        .collect()
}

#[test]
fn components_land_a_sync_interval_and_a_latency_later() {
    let policy = Policy::fixed_window("api", 10, Duration::from_secs(1)).unwrap();
    // Region 0 takes the whole limit at 10 ms; the round at 100 ms lands
    // in the other region at 150 ms, both ways. Requests alternate
    // between the regions (a cost of 0 peeks).
    let trace = [(10, 10), (20, 1), (30, 0), (149, 1), (150, 0), (151, 1)];
    assert_eq!(
        replay(layout(2, 100, 50), &policy, &trace),
        [true, true, true, true, false, false]
    );
}

#[test]
fn a_late_landing_for_a_past_window_changes_nothing() {
    let policy = Policy::fixed_window("api", 2, Duration::from_secs(1)).unwrap();
    // Region 0's 2 at 950 ms (window 0) land at 1200 ms, in window 1:
    // at 1300 ms region 1 still holds nothing of region 0 there (it would
    // deny, 1 + 2 + 1 > 2, if the landing counted).
    let trace = [(950, 2), (1100, 1), (1250, 1), (1300, 1)];
    assert_eq!(
        replay(layout(2, 100, 200), &policy, &trace),
        [true, true, true, true]
    );
}

#[test]
fn every_window_stays_within_the_bound_and_a_denial_means_the_limit_was_reached() {
    let limit = 40;
    let policy = Policy::fixed_window("api", limit, Duration::from_secs(1)).unwrap();
    let policies = [policy];
    for seed in 0..200 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let layout = layout(rng.usize(2..=4), rng.u64(1..=500), rng.u64(0..=200));
        let mut times: Vec<u64> = (0..rng.usize(50..400)).map(|_| rng.u64(0..4000)).collect();
        times.sort_unstable();
        let mut mesh = Mesh::new(layout, &policies);
        // (key, window) -> (admitted, the largest cost denied)
        let mut windows: HashMap<(&str, u64), (u64, u64)> = HashMap::new();
        for t in times {
            let key = if rng.bool() { "a" } else { "b" };
            let cost = rng.u64(1..=3);
            let d = mesh.decide(&request(t, key, cost)).unwrap();
            let w = windows.entry((key, t / 1000)).or_default();
            if d.allowed {
                w.0 += cost;
            } else {
                w.1 = w.1.max(cost);
            }
        }
        for (&(key, index), &(admitted, denied)) in &windows {
            // A denial is a region seeing more than `limit - cost`, and
            // what it sees is a part of the total.
            if denied > 0 {
                assert!(
                    admitted + denied > limit,
                    "seed {seed}: {key} window {index}: {admitted} admitted with a denial"
                );
            }
        }
        let found = {
            let windows = std::mem::take(&mut mesh.windows);
            for (policy, window) in &windows {
                mesh.record(*policy, window, limit);
            }
            mesh.found[0].clone()
        };
        assert!(
            found.worst_excess <= found.bound_excess,
            "seed {seed}: {layout:?}: {found:?}"
        );
        let most = windows.values().map(|w| w.0).max().unwrap_or(0);
        assert_eq!(
            found.worst_excess,
            most.saturating_sub(limit),
            "seed {seed}"
        );
    }
}

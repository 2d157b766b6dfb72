//! What a replay reports: every decision as CSV, or counts gathered while it
//! runs (per policy, per time bin, per key) for `--summary`, `--top` and
//! `--plot`.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use std::sync::Arc;
use std::time::Duration;

use tollgate::{Decision, Policy};

use super::trace::Request;

/// The answer to one request: a decision or an error.
pub(crate) type Outcome = Result<Decision, tollgate::Error>;

/// The CSV of every decision.
pub(crate) const CSV_HEADER: &str =
    "t_ms,policy,key,cost,allowed,remaining,retry_after_ms,reset_after_ms,delay_ms,error";

fn ms_up(d: Duration) -> u128 {
    d.as_micros().div_ceil(1_000)
}

/// Writes one decision as a CSV line.
pub(crate) fn write_csv_line(
    out: &mut impl Write,
    policies: &[Policy],
    request: &Request,
    outcome: &Outcome,
) -> io::Result<()> {
    let t_ms = request.t_us / 1_000;
    let policy = policies[request.policy].name();
    let (key, cost) = (&request.key, request.cost);
    match outcome {
        Ok(d) => writeln!(
            out,
            "{t_ms},{policy},{key},{cost},{},{},{},{},{},",
            d.allowed,
            d.remaining,
            ms_up(d.retry_after),
            ms_up(d.reset_after),
            ms_up(d.delay)
        ),
        Err(e) => writeln!(out, "{t_ms},{policy},{key},{cost},false,,,,,{}", e.code()),
    }
}

/// Time cut into equal bins for the plots: `count` bins of `width` µs from
/// `origin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bins {
    pub(crate) origin: u64,
    pub(crate) width: u64,
    pub(crate) count: usize,
}

/// Durations a reader counts in, µs: 1-2-5 steps up to 10 s, then round
/// clock steps (bin widths, and the plots' tick steps).
pub(super) const ROUND_US: [u64; 27] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    15_000_000,
    30_000_000,
    60_000_000,
    120_000_000,
    300_000_000,
    600_000_000,
    900_000_000,
    1_800_000_000,
    3_600_000_000,
    7_200_000_000,
    10_800_000_000,
    21_600_000_000,
    43_200_000_000,
    86_400_000_000,
];

/// At most this many bins: bars stay a few pixels wide in a panel.
const MAX_BINS: u64 = 80;

impl Bins {
    /// The narrowest width from [`ROUND_US`] that covers `first..=last`
    /// (µs) in at most [`MAX_BINS`] bins, aligned to a multiple of itself.
    pub(crate) fn for_span(first: u64, last: u64) -> Bins {
        let width = ROUND_US
            .iter()
            .copied()
            .find(|w| last / w - first / w < MAX_BINS)
            .unwrap_or_else(|| (last - first).div_ceil(MAX_BINS).max(1));
        let origin = first / width * width;
        Bins {
            origin,
            width,
            count: ((last - origin) / width + 1) as usize,
        }
    }

    fn index(&self, t: u64) -> usize {
        (((t - self.origin) / self.width) as usize).min(self.count - 1)
    }
}

/// One policy's counts.
#[derive(Debug, Clone, Default)]
pub(crate) struct PolicyTally {
    pub(crate) requests: u64,
    pub(crate) admitted: u64,
    /// Cost admitted and denied in each bin.
    pub(crate) bins: Vec<[u64; 2]>,
    /// Every request's cost was 1.
    pub(crate) unit_cost: bool,
    /// The largest cost admitted in any interval of one window, and where
    /// that interval starts.
    pub(crate) busiest: u64,
    pub(crate) busiest_at: u64,
    /// The admissions of the last window (time, cost) and their sum.
    recent: VecDeque<(u64, u64)>,
    recent_sum: u64,
}

/// Requests and denials of one key under one policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct KeyCount {
    pub(crate) requests: u64,
    pub(crate) denied: u64,
}

/// Counts gathered decision by decision.
#[derive(Debug)]
pub(crate) struct Tally {
    pub(crate) bins: Bins,
    pub(crate) policies: Vec<PolicyTally>,
    windows: Vec<u64>,
    /// Per (policy, key), when `--top` asks.
    keys: Option<HashMap<(usize, Arc<str>), KeyCount>>,
}

impl Tally {
    pub(crate) fn new(policies: &[Policy], bins: Bins, per_key: bool) -> Tally {
        Tally {
            bins,
            policies: vec![
                PolicyTally {
                    bins: vec![[0; 2]; bins.count],
                    unit_cost: true,
                    ..PolicyTally::default()
                };
                policies.len()
            ],
            windows: policies
                .iter()
                .map(|p| p.time_span().as_micros() as u64)
                .collect(),
            keys: per_key.then(HashMap::new),
        }
    }

    pub(crate) fn add(&mut self, request: &Request, outcome: &Outcome) {
        let admitted = matches!(outcome, Ok(d) if d.allowed);
        let p = &mut self.policies[request.policy];
        p.requests += 1;
        p.unit_cost &= request.cost == 1;
        p.bins[self.bins.index(request.t_us)][usize::from(!admitted)] += request.cost;
        if admitted {
            p.admitted += 1;
            // Admissions in the last window: every interval of one window
            // that starts at an admission is counted in full when its last
            // admission arrives.
            let (t, window) = (request.t_us, self.windows[request.policy]);
            p.recent.push_back((t, request.cost));
            p.recent_sum += request.cost;
            while let Some(&(front, cost)) = p.recent.front() {
                if front + window > t {
                    break;
                }
                p.recent.pop_front();
                p.recent_sum -= cost;
            }
            if p.recent_sum > p.busiest {
                p.busiest = p.recent_sum;
                p.busiest_at = p.recent.front().map_or(t, |&(front, _)| front);
            }
        }
        if let Some(keys) = &mut self.keys {
            let count = keys
                .entry((request.policy, request.key.clone()))
                .or_default();
            count.requests += 1;
            count.denied += u64::from(!admitted);
        }
    }

    /// Per policy the trace used: requests, admitted, denied, and the
    /// largest cost admitted in any half-open interval of one window (or
    /// one `per`).
    pub(crate) fn write_summary(
        &self,
        out: &mut impl Write,
        policies: &[Policy],
    ) -> io::Result<()> {
        writeln!(
            out,
            "policy,algorithm,requests,admitted,denied,max_admitted_in_window,window"
        )?;
        for (policy, t) in policies.iter().zip(&self.policies) {
            if t.requests == 0 {
                continue;
            }
            writeln!(
                out,
                "{},{},{},{},{},{},{}",
                policy.name(),
                policy.algorithm().name(),
                t.requests,
                t.admitted,
                t.requests - t.admitted,
                t.busiest,
                tollgate::format_duration(policy.time_span()),
            )?;
        }
        Ok(())
    }

    /// The `n` keys denied most (ties by name), with their counts.
    pub(crate) fn write_top(
        &self,
        out: &mut impl Write,
        policies: &[Policy],
        n: usize,
    ) -> io::Result<()> {
        writeln!(out, "policy,key,requests,denied")?;
        let Some(keys) = &self.keys else {
            return Ok(());
        };
        let mut denied: Vec<_> = keys.iter().filter(|(_, c)| c.denied > 0).collect();
        denied.sort_unstable_by(|((pa, ka), a), ((pb, kb), b)| {
            b.denied.cmp(&a.denied).then(ka.cmp(kb)).then(pa.cmp(pb))
        });
        for ((policy, key), count) in denied.into_iter().take(n) {
            writeln!(
                out,
                "{},{key},{},{}",
                policies[*policy].name(),
                count.requests,
                count.denied
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest sum of costs in any interval `[t, t + window)`, by brute
    /// force.
    fn busiest_by_brute_force(admitted: &[(u64, u64)], window: u64) -> u64 {
        admitted
            .iter()
            .map(|&(start, _)| {
                admitted
                    .iter()
                    .filter(|&&(t, _)| t >= start && t < start + window)
                    .map(|&(_, c)| c)
                    .sum()
            })
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn the_busiest_window_matches_brute_force() {
        let policy = Policy::fixed_window("p", 1_000, Duration::from_millis(10)).unwrap();
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..200 {
            let mut t = 0;
            let events: Vec<(u64, u64)> = (0..rng.usize(0..40))
                .map(|_| {
                    t += rng.u64(0..6_000);
                    (t, rng.u64(0..4))
                })
                .collect();
            let mut tally = Tally::new(
                std::slice::from_ref(&policy),
                Bins::for_span(0, t.max(1)),
                false,
            );
            for &(t_us, cost) in &events {
                let request = Request {
                    t_us,
                    policy: 0,
                    key: "k".into(),
                    cost,
                };
                let decision = tollgate::MemoryStore::new()
                    .check_sync(&policy, b"k", 0)
                    .unwrap();
                tally.add(&request, &Ok(decision));
            }
            let p = &tally.policies[0];
            assert_eq!(
                p.busiest,
                busiest_by_brute_force(&events, 10_000),
                "{events:?}"
            );
            if p.busiest > 0 {
                let start = p.busiest_at;
                let sum: u64 = events
                    .iter()
                    .filter(|&&(t, _)| t >= start && t < start + 10_000)
                    .map(|&(_, c)| c)
                    .sum();
                assert_eq!(sum, p.busiest, "the interval marked holds the count");
            }
        }
    }

    #[test]
    fn bins_cover_the_span_in_round_widths() {
        let b = Bins::for_span(0, 119_700_000);
        assert_eq!((b.origin, b.width, b.count), (0, 2_000_000, 60));
        let b = Bins::for_span(1_714_564_800_250_000, 1_714_564_800_250_000);
        assert_eq!((b.width, b.count), (1_000, 1));
        let day = 86_400_000_000;
        let b = Bins::for_span(5 * day + 7, 6 * day);
        assert_eq!(b.width, 1_800_000_000);
        assert!(b.count <= 80 && b.origin + b.count as u64 * b.width > 6 * day);
        let b = Bins::for_span(0, 400 * day);
        assert!(b.count <= 81, "{b:?}");
    }
}

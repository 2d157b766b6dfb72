//! `tollgate simulate --regions N`: the trace replayed as N regions would
//! decide it (docs/regions.md), so that a user sees the bound on their own
//! traffic before deploying.
//!
//! The trace's requests are dealt to the regions round-robin, in time
//! order (request i to region i mod N): one hot key's traffic spread
//! evenly, the case the bound is about. Each region decides as
//! `region_window.lua` does: it adds the cost to its own component of the
//! key's window if the sum of every component it holds, plus the cost, is
//! within the limit. Every `sync_interval` (rounds at its multiples, the
//! same instant for every region) each region reads its components
//! changed since the last round, and they land in every other region a
//! link latency later, merged as maxima. Links never fail here: a
//! partition's share is not modelled.
//!
//! Per global window it then measures the excess over the limit and the
//! docs' bound for that window, `Σ_{j ≠ i*} a_j(Δ)`: what every region but
//! the one that admitted last (`i*`) admitted in the last `Δ` before that
//! admission, with `Δ = sync_interval + 2 × link latency`, the staleness
//! the docs allow one region's view of another while links are up.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use std::sync::Arc;
use std::time::Duration;

use tollgate::algorithm::Algorithm;
use tollgate::store::redis::regions::Regions;
use tollgate::{Decision, Policy};

use super::report::Outcome;
use super::trace::Request;

/// How the regions of a simulation are laid out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    pub(crate) regions: usize,
    pub(crate) sync: Duration,
    /// One way, between any two regions.
    pub(crate) latency: Duration,
}

impl Layout {
    /// The layout `--regions N`, `--sync-interval` and `--link-latency`
    /// give (none without `--regions`), or why they do not go together.
    pub(crate) fn of(
        regions: Option<u16>,
        sync: Option<Duration>,
        latency: Option<Duration>,
        on_redis: bool,
    ) -> Result<Option<Layout>, String> {
        let Some(n) = regions else {
            for (given, option) in [
                (sync.is_some(), "--sync-interval"),
                (latency.is_some(), "--link-latency"),
            ] {
                if given {
                    return Err(format!("{option} is for --regions N"));
                }
            }
            return Ok(None);
        };
        if on_redis {
            return Err(
                "--regions replays in memory and --redis (or TOLLGATE_REDIS) on one Redis: give one"
                    .into(),
            );
        }
        Ok(Some(Layout {
            regions: usize::from(n),
            sync: sync.unwrap_or(Duration::from_millis(100)),
            latency: latency.unwrap_or(Duration::ZERO),
        }))
    }

    /// Checks the layout as `[regions]` would (region count, sync
    /// interval) and that every policy `requests` use can be global.
    pub(crate) fn check(&self, policies: &[Policy], requests: &[Request]) -> Result<(), String> {
        let mut used = vec![false; policies.len()];
        requests.iter().for_each(|r| used[r.policy] = true);
        let remotes: Vec<String> = (1..self.regions).map(|i| format!("r{i}")).collect();
        Regions::new("r0", remotes)
            .and_then(|r| r.sync_interval(self.sync))
            .map_err(|e| e.to_string())?;
        for (policy, _) in policies.iter().zip(&used).filter(|(_, used)| **used) {
            if let Some(why) = Regions::unsupported_reason(policy) {
                return Err(format!(
                    "--regions: policy `{}` cannot be global: {why}",
                    policy.name()
                ));
            }
        }
        Ok(())
    }

    /// The staleness the bound allows, µs.
    fn delta_us(&self) -> u64 {
        (self.sync + 2 * self.latency).as_micros() as u64
    }
}

/// One key's current window under one policy.
#[derive(Debug)]
struct Window {
    index: u64,
    /// `own[r]`: what region r admitted, as it knows it.
    own: Vec<u64>,
    /// `held[r][j]`: region j's component as region r holds it.
    held: Vec<Vec<u64>>,
    /// `admitted[r]`: region r's admissions (µs, cost), in time order.
    admitted: Vec<Vec<(u64, u64)>>,
    /// `dirty[r]`: changed in region r since its last round.
    dirty: Vec<bool>,
}

impl Window {
    fn new(index: u64, regions: usize) -> Window {
        Window {
            index,
            own: vec![0; regions],
            held: vec![vec![0; regions]; regions],
            admitted: vec![Vec::new(); regions],
            dirty: vec![false; regions],
        }
    }

    /// The excess over `limit` and the bound's excess, with staleness
    /// `delta` µs.
    fn measure(&self, limit: u64, delta: u64) -> (u64, u64) {
        let total: u64 = self.own.iter().sum();
        let last = |r: usize| self.admitted[r].last().map(|&(t, _)| t);
        let Some(i_star) = (0..self.own.len())
            .filter(|&r| last(r).is_some())
            .max_by_key(|&r| last(r))
        else {
            return (0, 0);
        };
        let t = last(i_star).unwrap_or(0);
        let unseen: u64 = (0..self.own.len())
            .filter(|&j| j != i_star)
            .flat_map(|j| &self.admitted[j])
            .filter(|&&(at, _)| at + delta > t)
            .map(|&(_, cost)| cost)
            .sum();
        (total.saturating_sub(limit), unseen)
    }
}

/// Components read by one round, landing in every other region.
#[derive(Debug)]
struct Delivery {
    at: u64,
    slot: usize,
    index: u64,
    from: usize,
    value: u64,
}

/// What the simulation found for one policy.
#[derive(Debug, Clone, Default)]
struct Found {
    requests: u64,
    admitted: Vec<u64>,
    windows_over: u64,
    worst_excess: u64,
    bound_excess: u64,
}

/// The regions replaying a trace.
#[derive(Debug)]
pub(crate) struct Mesh<'a> {
    layout: Layout,
    policies: &'a [Policy],
    slots: HashMap<(usize, Arc<str>), usize>,
    windows: Vec<(usize, Window)>,
    /// Slots changed since the last round, in any region.
    changed: Vec<usize>,
    next_round: Option<u64>,
    in_flight: VecDeque<Delivery>,
    found: Vec<Found>,
    next_region: usize,
}

impl<'a> Mesh<'a> {
    pub(crate) fn new(layout: Layout, policies: &'a [Policy]) -> Mesh<'a> {
        let found = Found {
            admitted: vec![0; layout.regions],
            ..Found::default()
        };
        Mesh {
            layout,
            policies,
            slots: HashMap::new(),
            windows: Vec::new(),
            changed: Vec::new(),
            next_round: None,
            in_flight: VecDeque::new(),
            found: vec![found; policies.len()],
            next_region: 0,
        }
    }

    /// Decides `request`, the next in time order, in the next region.
    pub(crate) fn decide(&mut self, request: &Request) -> Outcome {
        let region = self.next_region;
        self.next_region = (region + 1) % self.layout.regions;
        let policies = self.policies;
        let policy = &policies[request.policy];
        tollgate::validate_key(request.key.as_bytes())?;
        policy.validate_cost(request.cost)?;
        let (window, limit) = match policy.algorithm() {
            Algorithm::FixedWindow(w) => (w.window_micros(), w.limit()),
            _ => {
                return Err(tollgate::Error::Unsupported {
                    operation: "global (multi-region) limit",
                    algorithm: policy.algorithm().name(),
                });
            }
        };
        let now = request.t_us;
        self.found[request.policy].requests += 1;
        self.replicate_until(now);
        let slot = self.slot(request, now / window, limit);
        let regions = self.layout.regions;
        let w = &mut self.windows[slot].1;
        let total: u64 = (0..regions)
            .map(|j| {
                if j == region {
                    w.own[j]
                } else {
                    w.held[region][j]
                }
            })
            .sum();
        let cost = request.cost;
        let allowed = if cost == 0 {
            total <= limit
        } else {
            total + cost <= limit
        };
        let after = if allowed && cost > 0 {
            w.own[region] += cost;
            w.admitted[region].push((now, cost));
            if !w.dirty[region] {
                w.dirty[region] = true;
                self.changed.push(slot);
            }
            let sync = self.layout.sync.as_micros().max(1) as u64;
            self.next_round.get_or_insert((now / sync + 1) * sync);
            self.found[request.policy].admitted[region] += cost;
            total + cost
        } else {
            total
        };
        let until_end = (now / window + 1) * window - now;
        Ok(Decision::from_micros(
            allowed,
            limit,
            limit.saturating_sub(after),
            if after == 0 { 0 } else { until_end },
            if allowed { 0 } else { until_end },
            0,
        )
        .shadowed(policy))
    }

    /// The slot of `request`'s key in window `index`: a window past is
    /// measured and started over.
    fn slot(&mut self, request: &Request, index: u64, limit: u64) -> usize {
        let regions = self.layout.regions;
        let next = self.windows.len();
        let slot = *self
            .slots
            .entry((request.policy, request.key.clone()))
            .or_insert(next);
        if slot == next {
            self.windows
                .push((request.policy, Window::new(index, regions)));
        } else if self.windows[slot].1.index != index {
            let old = std::mem::replace(&mut self.windows[slot].1, Window::new(index, regions));
            self.record(request.policy, &old, limit);
        }
        slot
    }

    fn record(&mut self, policy: usize, window: &Window, limit: u64) {
        let (excess, bound) = window.measure(limit, self.layout.delta_us());
        let found = &mut self.found[policy];
        found.windows_over += u64::from(excess > 0);
        found.worst_excess = found.worst_excess.max(excess);
        found.bound_excess = found.bound_excess.max(bound);
    }

    /// Runs the rounds due by `now` and lands what has arrived by then.
    fn replicate_until(&mut self, now: u64) {
        if let Some(at) = self.next_round.filter(|&at| at <= now) {
            let land = at + self.layout.latency.as_micros() as u64;
            for slot in self.changed.drain(..) {
                let w = &mut self.windows[slot].1;
                for from in 0..self.layout.regions {
                    if std::mem::take(&mut w.dirty[from]) {
                        self.in_flight.push_back(Delivery {
                            at: land,
                            slot,
                            index: w.index,
                            from,
                            value: w.own[from],
                        });
                    }
                }
            }
            self.next_round = None;
        }
        while let Some(d) = self.in_flight.front().filter(|d| d.at <= now) {
            let w = &mut self.windows[d.slot].1;
            // A late landing for a window past changes nothing (its key
            // names its window).
            if w.index == d.index {
                for held in &mut w.held {
                    held[d.from] = held[d.from].max(d.value);
                }
            }
            self.in_flight.pop_front();
        }
    }

    /// Measures the windows still open and writes, per policy the trace
    /// used, the regions' admissions, the worst excess over the limit of
    /// any window and the bound's excess (the largest of any window).
    pub(crate) fn write_report(mut self, out: &mut impl Write) -> io::Result<()> {
        let windows = std::mem::take(&mut self.windows);
        for (policy, window) in &windows {
            if let Algorithm::FixedWindow(w) = self.policies[*policy].algorithm() {
                self.record(*policy, window, w.limit());
            }
        }
        writeln!(
            out,
            "policy,limit,window,regions,sync_interval,link_latency,delta,admitted_by_region,windows_over_limit,worst_excess,bound_excess"
        )?;
        let ms = |d: Duration| tollgate::format_duration(d);
        for (policy, found) in self.policies.iter().zip(&self.found) {
            if found.requests == 0 {
                continue;
            }
            let admitted: Vec<String> = found.admitted.iter().map(u64::to_string).collect();
            writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{}",
                policy.name(),
                policy.limit(),
                ms(policy.time_span()),
                self.layout.regions,
                ms(self.layout.sync),
                ms(self.layout.latency),
                ms(Duration::from_micros(self.layout.delta_us())),
                admitted.join("/"),
                found.windows_over,
                found.worst_excess,
                found.bound_excess,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "regions_tests.rs"]
mod tests;

//! What this region knows of one remote region: our rounds into it, its
//! heartbeats here, and so whether we are partitioned from it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// One remote region's link, as its stats show it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinkStats {
    /// The remote region's name.
    pub region: String,
    /// Whether this region decides as partitioned from it (capped at its
    /// share).
    pub partitioned: bool,
    /// How old the newest of its components here is (now minus the time
    /// its replicator read them, by the two regions' wall clocks): the
    /// staleness of our view of it; `None` before it was heard from.
    pub lag: Option<Duration>,
    /// Components our rounds merged into it that grew there.
    pub sent: u64,
    /// Components its rounds merged here that grew here, as its
    /// heartbeats count them.
    pub received: u64,
    /// The longest its view of us has been stale since our first round
    /// reached it: the most time between the read of one of our delivered
    /// rounds and the delivery of the next (or now); the `Δ` of the bound,
    /// as measured. (Before the first round, its view of us is as old as
    /// this link: what it holds from earlier runs.)
    pub max_staleness: Duration,
    /// Our rounds into it that completed, and that failed.
    pub rounds: u64,
    /// See [`rounds`](Self::rounds).
    pub failed_rounds: u64,
    /// Why the last round into it failed, while it keeps failing.
    pub last_error: Option<String>,
}

#[derive(Debug)]
struct State {
    sent: u64,
    received: u64,
    /// Its latest heartbeat here (ms since the epoch, its clock).
    heard_ms: Option<u64>,
    /// When our last round into it was delivered, and when that round
    /// read our components.
    delivered: Option<(Instant, Instant)>,
    max_staleness: Duration,
    rounds: u64,
    failed_rounds: u64,
    last_error: Option<String>,
}

/// One remote region: stats and the partition flag.
#[derive(Debug)]
pub(super) struct Link {
    pub(super) region: String,
    /// When this link started: the grace before the first news counts.
    started: Instant,
    started_ms: u64,
    partitioned: AtomicBool,
    state: Mutex<State>,
}

impl Link {
    pub(super) fn new(region: String) -> Link {
        Link {
            region,
            started: Instant::now(),
            started_ms: wall_ms(),
            partitioned: AtomicBool::new(false),
            state: Mutex::new(State {
                sent: 0,
                received: 0,
                heard_ms: None,
                delivered: None,
                max_staleness: Duration::ZERO,
                rounds: 0,
                failed_rounds: 0,
                last_error: None,
            }),
        }
    }

    pub(super) fn is_partitioned(&self) -> bool {
        self.partitioned.load(Ordering::Relaxed)
    }

    /// A round that read our components at `read` was delivered now,
    /// merging `merged` that grew.
    pub(super) fn delivered(&self, read: Instant, merged: u64) {
        let now = Instant::now();
        let mut s = self.state.lock();
        if let Some((_, since)) = s.delivered {
            s.max_staleness = s.max_staleness.max(now.saturating_duration_since(since));
        }
        s.delivered = Some((now, read));
        s.sent += merged;
        s.rounds += 1;
        s.last_error = None;
        metrics::counter!(crate::metrics::REGION_SENT, "region" => self.region.clone())
            .increment(merged);
    }

    pub(super) fn failed(&self, why: String) {
        let mut s = self.state.lock();
        if s.last_error.is_none() {
            tracing::warn!(region = %self.region, error = %why, "replication round failed");
        }
        s.failed_rounds += 1;
        s.last_error = Some(why);
    }

    /// Its heartbeat as read here: the time and its running count.
    pub(super) fn heard(&self, at_ms: u64, received: u64) {
        let mut s = self.state.lock();
        s.heard_ms = Some(s.heard_ms.map_or(at_ms, |h| h.max(at_ms)));
        s.received = received;
        metrics::counter!(crate::metrics::REGION_RECEIVED, "region" => self.region.clone())
            .absolute(received);
    }

    /// Decides whether we are partitioned from it: its news here or our
    /// last delivery there older than `after`. Answers the flag.
    pub(super) fn judge(&self, after: Duration) -> bool {
        let s = self.state.lock();
        let now_ms = wall_ms();
        let heard = s.heard_ms.unwrap_or(0).max(self.started_ms);
        let lag = Duration::from_millis(now_ms.saturating_sub(heard));
        let pushed = s.delivered.map_or(self.started, |(at, _)| at).elapsed();
        let partitioned = lag > after || pushed > after;
        if let Some(heard_ms) = s.heard_ms {
            metrics::gauge!(crate::metrics::REGION_LAG, "region" => self.region.clone())
                .set(Duration::from_millis(now_ms.saturating_sub(heard_ms)).as_secs_f64());
        }
        drop(s);
        let was = self.partitioned.swap(partitioned, Ordering::Relaxed);
        if was != partitioned {
            if partitioned {
                tracing::warn!(region = %self.region, ?lag, since_delivery = ?pushed, "partitioned: deciding alone, capped at this region's share");
            } else {
                tracing::info!(region = %self.region, "partition healed");
            }
        }
        metrics::gauge!(crate::metrics::REGION_PARTITIONED, "region" => self.region.clone())
            .set(if partitioned { 1.0 } else { 0.0 });
        partitioned
    }

    /// Forgets the staleness measured so far (gaps that ended before now).
    pub(super) fn reset_staleness(&self) {
        self.state.lock().max_staleness = Duration::ZERO;
    }

    pub(super) fn stats(&self) -> LinkStats {
        let s = self.state.lock();
        let open = s
            .delivered
            .map_or(Duration::ZERO, |(_, read)| read.elapsed());
        LinkStats {
            region: self.region.clone(),
            partitioned: self.is_partitioned(),
            lag: s
                .heard_ms
                .map(|h| Duration::from_millis(wall_ms().saturating_sub(h))),
            sent: s.sent,
            received: s.received,
            max_staleness: s.max_staleness.max(open),
            rounds: s.rounds,
            failed_rounds: s.failed_rounds,
            last_error: s.last_error.clone(),
        }
    }
}

/// The wall clock in ms since the epoch: heartbeats cross processes.
pub(super) fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

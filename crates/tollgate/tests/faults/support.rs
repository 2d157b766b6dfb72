//! What every fault test shares: the stores, a load of concurrent callers,
//! the admission bound checked over every interval, and one row of
//! figures per scenario (the metrics recorder is the testkit's).
//!
//! Kept whole on purpose: the shared support of one suite; its parts (load, bound, figures) are used together.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tollgate::store::redis::RedisStore;
use tollgate::store::resilient::{BreakerState, OnFailure, ResilientStore};
use tollgate::{Clock, Decision, MonotonicClock, Policy, Source, Store};
use tollgate_testkit::{PATIENCE, RedisServer, record_metrics};

pub(crate) const DEADLINE: Duration = Duration::from_millis(50);
/// The testkit's one slack on latency bounds (1 s, for a loaded 2-core
/// machine). A call that waited for the fault instead of its deadline
/// would take the fault's whole length (1.5 s or more, and a scenario
/// holds its fault until the breaker has opened), above `DEADLINE +
/// SLACK`; the measured figures are printed, and are usually the deadline
/// and a few ms.
pub(crate) use tollgate_testkit::SLACK;

/// The total of a counter over the label sets that contain `label`.
pub(crate) use tollgate_testkit::counter_total as counter;

/// A runtime for one test; the metrics recorder is installed first, so
/// that every test's metrics are seen.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    record_metrics();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

pub(crate) async fn redis(server: &RedisServer) -> Arc<RedisStore> {
    redis_at(&server.url()).await
}

pub(crate) async fn redis_at(url: &str) -> Arc<RedisStore> {
    redis_within(url, DEADLINE).await
}

/// With `deadline`: `PATIENCE` for a test about something else than
/// deadlines, whose calls a loaded machine must not make late.
pub(crate) async fn redis_within(url: &str, deadline: Duration) -> Arc<RedisStore> {
    let store = RedisStore::builder([url])
        .deadline(deadline)
        .connect()
        .await
        .expect("connect");
    Arc::new(store)
}

pub(crate) fn resilient(primary: Arc<RedisStore>, instances: u32) -> ResilientStore {
    resilient_after(primary, instances, 3)
}

pub(crate) fn resilient_after(
    primary: Arc<RedisStore>,
    instances: u32,
    failures: u32,
) -> ResilientStore {
    resilient_within(primary, instances, failures, DEADLINE)
}

pub(crate) fn resilient_within(
    primary: Arc<RedisStore>,
    instances: u32,
    failures: u32,
    deadline: Duration,
) -> ResilientStore {
    ResilientStore::builder(primary)
        .deadline(deadline)
        .on_failure(OnFailure::Local)
        .expected_instances(instances)
        .failure_threshold(failures)
        .probe_interval(Duration::from_millis(100), Duration::from_millis(400))
        .build()
        .unwrap()
}

/// One call: when it started (since the load's start), how long it took,
/// and its answer.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    pub(crate) at: Duration,
    pub(crate) took: Duration,
    pub(crate) result: Result<Decision, String>,
}

impl Sample {
    pub(crate) fn source(&self) -> Option<Source> {
        self.result.as_ref().ok().map(|d| d.source)
    }

    pub(crate) fn admitted_by(&self, source: Source) -> bool {
        matches!(&self.result, Ok(d) if d.allowed && d.source == source)
    }
}

/// `tasks` callers checking `policy` on `key` (cost 1, a pause of `pause`
/// between calls) until finished.
///
/// Times are read on a `MonotonicClock`, the fallback's clock: intervals
/// measured here are the fallback's own, not another clock's (whose rate
/// may differ by a fraction of a per mille on a loaded machine, enough to
/// make a tight bound miss by one admission).
pub(crate) struct Load {
    samples: Arc<Mutex<Vec<Sample>>>,
    stop: Arc<AtomicBool>,
    handles: Vec<tokio::task::JoinHandle<()>>,
    clock: MonotonicClock,
    start: u64,
}

/// The time since `start` (µs) on `clock`.
fn since(clock: &MonotonicClock, start: u64) -> Duration {
    Duration::from_micros(clock.now_micros().saturating_sub(start))
}

impl Load {
    pub(crate) fn start(
        store: ResilientStore,
        policy: Policy,
        key: &'static [u8],
        tasks: usize,
        pause: Duration,
    ) -> Load {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let clock = MonotonicClock::new();
        let start = clock.now_micros();
        let policy = Arc::new(policy);
        let handles = (0..tasks)
            .map(|_| {
                let (store, policy, samples, stop) =
                    (store.clone(), policy.clone(), samples.clone(), stop.clone());
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let at = since(&clock, start);
                        let result = store
                            .check(&policy, key, 1)
                            .await
                            .map_err(|e| e.to_string());
                        let sample = Sample {
                            at,
                            took: since(&clock, start).saturating_sub(at),
                            result,
                        };
                        samples.lock().unwrap().push(sample);
                        tokio::time::sleep(pause).await;
                    }
                })
            })
            .collect();
        Load {
            samples,
            stop,
            handles,
            clock,
            start,
        }
    }

    pub(crate) fn now(&self) -> Duration {
        since(&self.clock, self.start)
    }

    pub(crate) async fn finish(self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles {
            h.await.unwrap();
        }
        let mut samples = self.samples.lock().unwrap().clone();
        samples.sort_by_key(|s| s.at);
        samples
    }
}

pub(crate) fn percentile(samples: &[&Sample], p: f64) -> Duration {
    let mut took: Vec<Duration> = samples.iter().map(|s| s.took).collect();
    took.sort();
    took.get(((took.len().max(1) - 1) as f64 * p) as usize)
        .copied()
        .unwrap_or_default()
}

/// Waits (polling) until the breaker is in `state`; how long it took.
/// Fails after `PATIENCE`: how soon it happens is a figure, not a verdict.
pub(crate) async fn wait_for(store: &ResilientStore, state: BreakerState) -> Duration {
    let t = Instant::now();
    while store.breaker_state() != state {
        assert!(
            t.elapsed() < PATIENCE,
            "breaker not {} after {PATIENCE:?}",
            state.as_str()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    t.elapsed()
}

/// One limiter's shape: at most `burst + rate·T` over any interval `T`
/// (a token bucket or GCRA of that burst and rate a second).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Share {
    pub(crate) burst: f64,
    pub(crate) rate: f64,
}

impl Share {
    /// One instance's share of `burst` and `rate` a second among
    /// `instances`, as the fallback derives it.
    pub(crate) fn of(burst: u64, rate: u64, instances: u64) -> Share {
        Share {
            burst: (burst / instances).max(1) as f64,
            rate: rate as f64 / instances as f64,
        }
    }
}

/// What one instance admitted for one key, against the bound of the
/// resilient store's docs: the store's admissions, plus the fallback's,
/// which must fit one local share over every interval.
#[derive(Debug)]
pub(crate) struct Admissions {
    pub(crate) store: u64,
    pub(crate) fallback: u64,
    /// The span from the first fallback admission to the last.
    pub(crate) span: Duration,
    /// `store + burst + rate·span`.
    pub(crate) bound: u64,
}

/// Counts the admissions in `samples` and asserts that the fallback's fit
/// `share` over every interval: for the admissions `i..=j` (by start), of
/// which the first started at `s_i` and the last ended by `e_j`, at most
/// `burst + rate·(e_j - s_i)`. Every decision was made between its call's
/// start and end, so that interval contains the true one.
pub(crate) fn assert_bounded(scenario: &str, samples: &[Sample], share: Share) -> Admissions {
    let store = samples
        .iter()
        .filter(|s| s.admitted_by(Source::Store))
        .count() as u64;
    let fallback: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.admitted_by(Source::Fallback))
        .collect();
    let mut ends_by = Duration::ZERO;
    let ends: Vec<Duration> = fallback
        .iter()
        .map(|s| {
            ends_by = ends_by.max(s.at + s.took);
            ends_by
        })
        .collect();
    for (j, end) in ends.iter().enumerate() {
        for (i, first) in fallback[..=j].iter().enumerate() {
            let count = (j - i + 1) as f64;
            let interval = end.saturating_sub(first.at).as_secs_f64();
            let bound = share.burst + share.rate * interval;
            assert!(
                count <= bound + 1e-9,
                "{scenario}: the fallback admitted {count} in {interval:.3} s \
                 (from {:?}), above one local share {bound:.1}",
                first.at
            );
        }
    }
    let span = match (fallback.first(), ends.last()) {
        (Some(first), Some(last)) => last.saturating_sub(first.at),
        _ => Duration::ZERO,
    };
    Admissions {
        store,
        fallback: fallback.len() as u64,
        span,
        bound: store + (share.burst + share.rate * span.as_secs_f64()) as u64,
    }
}

/// The figures of one scenario, printed as a row of the closing table.
#[derive(Debug)]
pub(crate) struct Figures {
    pub(crate) scenario: &'static str,
    pub(crate) admissions: Admissions,
    pub(crate) slowest: Duration,
    /// From the fault to the breaker opening (`None`: it never opened).
    pub(crate) to_fallback: Option<Duration>,
    /// From the fault's end to the breaker closing.
    pub(crate) back: Option<Duration>,
    /// Times the breaker was seen to open during the fault (polled every
    /// 2 ms, so a shorter flip may be missed).
    pub(crate) opened: u32,
    pub(crate) errors: usize,
    pub(crate) calls: usize,
}

impl Figures {
    pub(crate) fn print(&self) {
        let ms = |d: Option<Duration>| {
            d.map_or_else(
                || "-".to_owned(),
                |d| format!("{:.0} ms", d.as_secs_f64() * 1e3),
            )
        };
        let a = &self.admissions;
        eprintln!(
            "| {} | {} ({} store + {} fallback over {:.2} s) | {} | {:.1} ms | {} | {} | {} | {} of {} |",
            self.scenario,
            a.store + a.fallback,
            a.store,
            a.fallback,
            a.span.as_secs_f64(),
            a.bound,
            self.slowest.as_secs_f64() * 1e3,
            ms(self.to_fallback),
            ms(self.back),
            self.opened,
            self.errors,
            self.calls,
        );
    }
}

/// A fault under load, start to end: callers on a hot key, the fault
/// injected after a warm-up, held, healed, and the breaker waited for.
pub(crate) struct Scenario {
    pub(crate) name: &'static str,
    pub(crate) policy: Policy,
    pub(crate) share: Share,
    pub(crate) callers: usize,
    /// How long the fault lasts at least.
    pub(crate) hold: Duration,
    /// The fault is held past `hold` until the breaker has been seen
    /// opening this many times (or `PATIENCE` has passed), so that a slow
    /// machine still shows what the scenario is about.
    pub(crate) opened_at_least: u32,
}

impl Scenario {
    /// 8 callers on a hot key of a token bucket of `burst` at `rate` a
    /// second, one instance, the fault held `hold`.
    pub(crate) fn bucket(
        name: &'static str,
        policy: &str,
        (rate, burst): (u64, u64),
        hold: Duration,
    ) -> Scenario {
        Scenario {
            name,
            policy: Policy::token_bucket(policy, rate, Duration::from_secs(1), burst).unwrap(),
            share: Share::of(burst, rate, 1),
            callers: 8,
            hold,
            opened_at_least: 1,
        }
    }

    /// Runs it on `store`; `inject` and `heal` run on a blocking thread.
    /// Asserts the bound, no caller-visible error, every call within the
    /// deadline (with slack), and the breaker closed again; returns the
    /// figures, printed.
    pub(crate) async fn run(
        &self,
        store: &ResilientStore,
        inject: impl FnOnce(),
        heal: impl FnOnce(),
    ) -> (Figures, Vec<Sample>) {
        let load = Load::start(
            store.clone(),
            self.policy.clone(),
            b"hot",
            self.callers,
            Duration::from_millis(2),
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        let fault_at = Instant::now();
        tokio::task::block_in_place(inject);
        let (mut to_fallback, mut opened, mut was_open) = (None, 0, false);
        while fault_at.elapsed() < self.hold
            || (opened < self.opened_at_least && fault_at.elapsed() < PATIENCE)
        {
            let open = store.breaker_state() == BreakerState::Open;
            if open && !was_open {
                to_fallback.get_or_insert(fault_at.elapsed());
                opened += 1;
            }
            was_open = open;
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        tokio::task::block_in_place(heal);
        let back = wait_for(store, BreakerState::Closed).await;
        let back = to_fallback.map(|_| back);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let samples = load.finish().await;
        let figures = Figures {
            scenario: self.name,
            admissions: assert_bounded(self.name, &samples, self.share),
            slowest: samples.iter().map(|s| s.took).max().unwrap_or_default(),
            to_fallback,
            back,
            opened,
            errors: samples.iter().filter(|s| s.result.is_err()).count(),
            calls: samples.len(),
        };
        figures.print();
        let errors: Vec<&Sample> = samples.iter().filter(|s| s.result.is_err()).collect();
        assert!(
            errors.is_empty(),
            "{}: errors reached callers: {:?}",
            self.name,
            &errors[..errors.len().min(3)]
        );
        assert!(
            figures.slowest <= DEADLINE + SLACK,
            "{}: a call took {:?}",
            self.name,
            figures.slowest
        );
        (figures, samples)
    }
}

//! The parameters an override (or a tier) replaces, by the names a policy
//! file gives them; the others stay the policy's own.

use std::time::Duration;

use crate::algorithm::{
    Algorithm, Concurrency, FixedWindow, Gcra, LeakyBucket, SlidingLog, SlidingWindow, TokenBucket,
};
use crate::{Error, Result};

/// Replacement parameters: each field set replaces the policy's own of
/// that name, each left `None` keeps it. [`Limits::apply`] builds the
/// result as a policy's constructor would, so it is validated the same
/// way, and refuses a field the algorithm does not take (`rate` on a
/// fixed window), naming it.
///
/// ```
/// use std::time::Duration;
/// use tollgate::Policy;
/// use tollgate::overrides::Limits;
///
/// let api = Policy::fixed_window("api", 100, Duration::from_secs(60))?;
/// let raised = Limits { limit: Some(5_000), ..Limits::default() }.apply(api.algorithm())?;
/// assert_eq!(raised.limit().0, 5_000);
///
/// let err = Limits { rate: Some(10), ..Limits::default() }.apply(api.algorithm()).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "invalid policy: `rate` does not apply to fixed_window (it takes limit, window)"
/// );
/// # Ok::<(), tollgate::Error>(())
/// ```
// Not `#[non_exhaustive]`: callers build it with `..Limits::default()`,
// and a parameter a new algorithm needs is a new optional field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Limits {
    /// A window's or a concurrency policy's `limit`.
    pub limit: Option<u64>,
    /// A window's length (not of a calendar window).
    pub window: Option<Duration>,
    /// A bucket's `rate` (tokens per `per`).
    pub rate: Option<u64>,
    /// A bucket's `per`.
    pub per: Option<Duration>,
    /// A token bucket's or GCRA's `burst`.
    pub burst: Option<u64>,
    /// A leaky bucket's `capacity`.
    pub capacity: Option<u64>,
    /// A concurrency policy's `lease`.
    pub lease: Option<Duration>,
}

impl Limits {
    /// The fields that are set, by name.
    pub fn fields(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        for (name, set) in [
            ("limit", self.limit.is_some()),
            ("window", self.window.is_some()),
            ("rate", self.rate.is_some()),
            ("per", self.per.is_some()),
            ("burst", self.burst.is_some()),
            ("capacity", self.capacity.is_some()),
            ("lease", self.lease.is_some()),
        ] {
            if set {
                out.push(name);
            }
        }
        out
    }

    /// `base` with these parameters in place of its own, validated as a
    /// policy's constructor validates (the algorithm stays the same).
    pub fn apply(&self, base: &Algorithm) -> Result<Algorithm> {
        let takes = takes(base);
        if let Some(field) = self.fields().into_iter().find(|f| !takes.contains(f)) {
            return Err(Error::policy(
                field,
                format!(
                    "does not apply to {} (it takes {})",
                    base.name(),
                    takes.join(", ")
                ),
            ));
        }
        if self.fields().is_empty() {
            return Err(Error::policy(
                takes[0],
                format!(
                    "no parameter given: an override of a {} policy sets at least one of {}",
                    base.name(),
                    takes.join(", ")
                ),
            ));
        }
        Ok(match base {
            Algorithm::FixedWindow(a) => Algorithm::FixedWindow(match a.calendar() {
                Some(c) => {
                    FixedWindow::in_calendar(self.limit.unwrap_or(a.limit()), c.period(), c.zone())?
                }
                None => FixedWindow::new(
                    self.limit.unwrap_or(a.limit()),
                    self.window.unwrap_or(micros(a.window_micros())),
                )?,
            }),
            Algorithm::SlidingWindow(a) => Algorithm::SlidingWindow(SlidingWindow::new(
                self.limit.unwrap_or(a.limit()),
                self.window.unwrap_or(micros(a.window_micros())),
            )?),
            Algorithm::SlidingLog(a) => Algorithm::SlidingLog(SlidingLog::new(
                self.limit.unwrap_or(a.limit()),
                self.window.unwrap_or(micros(a.window_micros())),
            )?),
            Algorithm::TokenBucket(a) => Algorithm::TokenBucket(TokenBucket::new(
                self.rate.unwrap_or(a.rate().rate),
                self.per.unwrap_or(micros(a.rate().per)),
                self.burst.unwrap_or(a.burst()),
            )?),
            Algorithm::Gcra(a) => Algorithm::Gcra(Gcra::new(
                self.rate.unwrap_or(a.rate().rate),
                self.per.unwrap_or(micros(a.rate().per)),
                self.burst.unwrap_or(a.burst()),
            )?),
            Algorithm::LeakyBucket(a) => Algorithm::LeakyBucket(LeakyBucket::new(
                self.rate.unwrap_or(a.rate().rate),
                self.per.unwrap_or(micros(a.rate().per)),
                self.capacity.unwrap_or(a.capacity()),
            )?),
            Algorithm::Concurrency(a) => Algorithm::Concurrency(Concurrency::new(
                self.limit.unwrap_or(a.limit()),
                self.lease.unwrap_or(micros(a.lease_micros())),
            )?),
        })
    }
}

/// The parameters `algorithm` takes, by name (a calendar window's length
/// is its period, which an override does not change).
pub fn takes(algorithm: &Algorithm) -> &'static [&'static str] {
    match algorithm {
        Algorithm::FixedWindow(a) if a.calendar().is_some() => &["limit"],
        Algorithm::FixedWindow(_) | Algorithm::SlidingWindow(_) | Algorithm::SlidingLog(_) => {
            &["limit", "window"]
        }
        Algorithm::TokenBucket(_) | Algorithm::Gcra(_) => &["rate", "per", "burst"],
        Algorithm::LeakyBucket(_) => &["rate", "per", "capacity"],
        Algorithm::Concurrency(_) => &["limit", "lease"],
    }
}

fn micros(us: u64) -> Duration {
    Duration::from_micros(us)
}

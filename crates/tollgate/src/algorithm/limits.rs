//! The parameters an override (or a tier) replaces, by the names a policy
//! file gives them: the struct every algorithm's
//! [`Rule::with_limits`](super::rule::Rule::with_limits) reads. Its checks
//! and `apply` are the overrides' (`overrides/limits.rs`), which re-export
//! it as `tollgate::overrides::Limits`.

use std::time::Duration;

use super::params::Rate;

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

    /// A window's limit and length: these limits' where set, else
    /// `limit` and `window` (µs).
    pub(crate) fn limit_window(&self, limit: u64, window: u64) -> (u64, Duration) {
        (
            self.limit.unwrap_or(limit),
            self.window.unwrap_or(Duration::from_micros(window)),
        )
    }

    /// A bucket's rate and period: these limits' where set, else `rate`'s.
    pub(crate) fn rate_per(&self, rate: Rate) -> (u64, Duration) {
        (
            self.rate.unwrap_or(rate.rate),
            self.per.unwrap_or(Duration::from_micros(rate.per)),
        )
    }
}

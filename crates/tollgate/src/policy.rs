//! Policies: a name and an algorithm with validated parameters.
//!
//! Over 400 lines on purpose: one constructor per algorithm, each with its
//! doctest, the crate's public face read side by side.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::algorithm::{
    Algorithm, Concurrency, FixedWindow, Gcra, LeakyBucket, Lease, MAX_SCALED, MAX_USAGE_COST,
    Period, SlidingLog, SlidingWindow, TokenBucket, Usage,
};
use crate::store::key::InlineName;
use crate::{Error, Result};

/// A policy's tiers: each name with its parameters.
type Tiers = Arc<Vec<(Arc<str>, Algorithm)>>;

/// The longest policy name, in bytes.
pub const MAX_POLICY_NAME_LEN: usize = 64;

/// A named limit: which algorithm, with which parameters.
///
/// Constructors validate, so a `Policy` that exists is usable: every
/// parameter is in range and every intermediate value of its arithmetic is
/// exact, in Rust and in the Redis scripts.
///
/// ```
/// use std::time::Duration;
/// use tollgate::Policy;
///
/// let books = Policy::fixed_window("books", 120, Duration::from_secs(60))?;
/// assert_eq!(books.name(), "books");
///
/// let err = Policy::token_bucket("api", 0, Duration::from_secs(1), 20).unwrap_err();
/// assert_eq!(err.to_string(), "invalid policy: `rate` must be at least 1, got 0");
/// # Ok::<(), tollgate::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Policy {
    name: Arc<str>,
    algorithm: Algorithm,
    /// The name's part of the memory store's short keys, made once here
    /// rather than on every check.
    inline_name: InlineName,
    /// The group whose policies keep a subject's state in one Redis
    /// Cluster slot (see [`Policy::with_group`]).
    group: Option<Arc<str>>,
    /// Shadow mode: decided and counted as usual, never denied.
    shadow: bool,
    /// Whether a [`LeasingStore`](crate::store::leasing::LeasingStore)
    /// answers this policy from leases (see [`Policy::with_lease`]).
    lease: bool,
    /// The policy's tiers: a name and its parameters (see
    /// [`Policy::with_tier`]).
    tiers: Option<Tiers>,
    /// For a policy derived from a fixed window (a tier's, an override's),
    /// that window's limit and length in µs: what names its state where a
    /// store's key shows parameters (the Redis server-clock window's).
    /// (`[0, 0]` for none: a window's length is never 0; two words, not
    /// an `Option` of them, to keep a `Policy` small.)
    base_window: [u64; 2],
    /// Which build of a policy this is: the same for its clones, new on
    /// every constructor and `with_*` (0 for a derived one), so that an
    /// override's policy, made once from it, is known to still fit it
    /// without comparing them (see [`Policy::build`]).
    build: Build,
}

/// A policy's build: ignored by `==` and `Hash` (two policies built
/// alike are equal whichever build they are).
#[derive(Clone, Copy)]
struct Build(u64);

impl Build {
    /// A build no other policy has.
    fn new() -> Build {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Build(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl PartialEq for Build {
    fn eq(&self, _: &Build) -> bool {
        true
    }
}

impl Eq for Build {}

impl std::hash::Hash for Build {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

impl Policy {
    /// A policy named `name` (1 to 64 characters of `A-Z a-z 0-9 _ - .`).
    pub fn new(name: &str, algorithm: Algorithm) -> Result<Policy> {
        validate_name(name)?;
        Ok(Policy {
            name: name.into(),
            algorithm,
            inline_name: InlineName::new(name.as_bytes()),
            group: None,
            shadow: false,
            lease: false,
            tiers: None,
            base_window: [0, 0],
            build: Build::new(),
        })
    }

    /// Adds the tier `name` (the same rules as a policy's name): the
    /// policy's parameters with `limits` in place of some, validated as
    /// the policy's own. A request names its tier (see
    /// [`Overrides::resolve`](crate::overrides::Overrides::resolve)); a key's
    /// state is the same in every tier, so a key moved to another tier
    /// keeps its count.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::Policy;
    /// use tollgate::overrides::Limits;
    ///
    /// let api = Policy::token_bucket("api", 10, Duration::from_secs(1), 20)?
    ///     .with_tier("pro", &Limits { rate: Some(100), burst: Some(200), ..Limits::default() })?;
    /// let pro = api.tier("pro").unwrap();
    /// assert_eq!((pro.name(), pro.limit()), ("api", 200));
    /// assert!(api.tier("gold").is_none());
    /// # Ok::<(), tollgate::Error>(())
    /// ```
    pub fn with_tier(mut self, name: &str, limits: &crate::overrides::Limits) -> Result<Policy> {
        validate_name_of("tier", name)?;
        let algorithm = limits.apply(&self.algorithm)?;
        let mut tiers: Vec<_> = self.tiers.as_deref().cloned().unwrap_or_default();
        if tiers.iter().any(|(n, _)| &**n == name) {
            return Err(Error::policy(
                "tier",
                format!("tier {name:?} is defined twice"),
            ));
        }
        tiers.push((name.into(), algorithm));
        self.tiers = Some(Arc::new(tiers));
        self.build = Build::new();
        Ok(self)
    }

    /// The policy as its tier `name` decides, if it has that tier: the
    /// same name (and so the same state), the tier's parameters.
    pub fn tier(&self, name: &str) -> Option<Policy> {
        let (_, algorithm) = self.tiers.as_deref()?.iter().find(|(n, _)| &**n == name)?;
        Some(self.derive(*algorithm))
    }

    /// The names of the policy's tiers, in the order they were added.
    pub fn tier_names(&self) -> Vec<&str> {
        self.tiers
            .iter()
            .flat_map(|t| t.iter())
            .map(|(n, _)| &**n)
            .collect()
    }

    /// This policy deciding with `algorithm` (of the same kind, already
    /// validated): an override's or a tier's. Its state is this policy's.
    #[inline]
    pub(crate) fn derive(&self, algorithm: Algorithm) -> Policy {
        let base_window = match self.algorithm.fixed_window() {
            _ if self.base_window[1] != 0 => self.base_window,
            Some((limit, window)) => [limit, window],
            None => [0, 0],
        };
        Policy {
            algorithm,
            base_window,
            build: Build(0),
            ..self.clone()
        }
    }

    /// Which build of a policy this is (see the field): 0 for a derived
    /// policy, else one no policy built otherwise has.
    #[inline]
    pub(crate) fn build(&self) -> u64 {
        self.build.0
    }

    /// For a policy derived from a fixed window (a tier's, an override's),
    /// that window's limit and length in µs.
    #[inline]
    #[cfg_attr(not(feature = "redis"), allow(dead_code))] // read by the Redis store's forms
    pub(crate) fn base_window(&self) -> Option<(u64, u64)> {
        let [limit, window] = self.base_window;
        (window != 0).then_some((limit, window))
    }

    /// Puts the policy in `group` (the same rules as a name): on Redis,
    /// the state of every policy of one group for one user key shares a
    /// hash tag made of the group and the key alone, so on Redis Cluster
    /// it lives in one slot and an atomic batch over one key and several
    /// policies of the group is one script. The price: a hot key's
    /// policies all load the one node that holds its slot, where without
    /// a group each policy's state of the key may sit on another node.
    /// The memory store ignores groups. Changing a policy's group moves
    /// its Redis state to a new key, so its limits start over.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::Policy;
    ///
    /// let per_second = Policy::token_bucket("user-1s", 10, Duration::from_secs(1), 10)?
    ///     .with_group("user")?;
    /// let per_day = Policy::fixed_window("user-1d", 10_000, Duration::from_secs(86_400))?
    ///     .with_group("user")?;
    /// assert_eq!(per_second.group(), per_day.group());
    /// # Ok::<(), tollgate::Error>(())
    /// ```
    pub fn with_group(mut self, group: &str) -> Result<Policy> {
        validate_name_of("group", group)?;
        self.group = Some(group.into());
        self.build = Build::new();
        Ok(self)
    }

    /// Opts the policy in to leases (or out, with `false`): a
    /// [`LeasingStore`](crate::store::leasing::LeasingStore) then takes its
    /// capacity from the store in batches and answers from them locally
    /// (`source: lease`), for a fixed or sliding window (a batch is spent
    /// only within the window it was taken in, so a window never admits more
    /// than its limit) or a token bucket or GCRA (a batch is spent within its
    /// hold, one lease interval at most, and the store records it as taken
    /// at the hold's end, so any span `T` admits at most `burst + rate·T`,
    /// the bucket's own bound; see the module). Other algorithms answer
    /// `unsupported`, naming `lease`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::Policy;
    ///
    /// let partner = Policy::fixed_window("partner", 10_000, Duration::from_secs(1))?.with_lease(true)?;
    /// assert!(partner.leased());
    /// let api = Policy::gcra("api", 10_000, Duration::from_secs(1), 1_000)?.with_lease(true)?;
    /// assert!(api.leased());
    /// assert!(Policy::sliding_log("log", 10, Duration::from_secs(1))?.with_lease(true).is_err());
    /// # Ok::<(), tollgate::Error>(())
    /// ```
    pub fn with_lease(mut self, lease: bool) -> Result<Policy> {
        if lease && self.algorithm.lease() == Lease::Refused {
            return Err(Error::policy(
                "lease",
                format!(
                    "leases are for fixed_window, sliding_window, token_bucket and gcra policies, not {}",
                    self.algorithm.name()
                ),
            ));
        }
        self.lease = lease;
        self.build = Build::new();
        Ok(self)
    }

    /// Whether the policy is answered from leases (see
    /// [`Policy::with_lease`]).
    pub fn leased(&self) -> bool {
        self.lease
    }

    /// The policy's group, if it has one (see [`Policy::with_group`]).
    pub fn group(&self) -> Option<&str> {
        self.group.as_deref()
    }

    /// At most `limit` per epoch-aligned `window`.
    pub fn fixed_window(name: &str, limit: u64, window: Duration) -> Result<Policy> {
        Policy::new(
            name,
            Algorithm::FixedWindow(FixedWindow::new(limit, window)?),
        )
    }

    /// A fixed window per calendar period (`1d`, `1w`, `1mo`, `1y`) in a
    /// time zone; see [`FixedWindow::in_calendar`].
    pub fn fixed_window_calendar(
        name: &str,
        limit: u64,
        period: Period,
        zone: &str,
    ) -> Result<Policy> {
        Policy::new(
            name,
            Algorithm::FixedWindow(FixedWindow::in_calendar(limit, period, zone)?),
        )
    }

    /// At most `limit` per weighted sliding `window`.
    pub fn sliding_window(name: &str, limit: u64, window: Duration) -> Result<Policy> {
        Policy::new(
            name,
            Algorithm::SlidingWindow(SlidingWindow::new(limit, window)?),
        )
    }

    /// At most `limit` in every interval of one `window`, exactly.
    pub fn sliding_log(name: &str, limit: u64, window: Duration) -> Result<Policy> {
        Policy::new(name, Algorithm::SlidingLog(SlidingLog::new(limit, window)?))
    }

    /// A bucket of `burst` tokens refilled at `rate` per `per`.
    pub fn token_bucket(name: &str, rate: u64, per: Duration, burst: u64) -> Result<Policy> {
        Policy::new(
            name,
            Algorithm::TokenBucket(TokenBucket::new(rate, per, burst)?),
        )
    }

    /// GCRA at `rate` per `per` with a tolerance of `burst`.
    pub fn gcra(name: &str, rate: u64, per: Duration, burst: u64) -> Result<Policy> {
        Policy::new(name, Algorithm::Gcra(Gcra::new(rate, per, burst)?))
    }

    /// A shaper draining `rate` per `per` with a queue of `capacity`.
    pub fn leaky_bucket(name: &str, rate: u64, per: Duration, capacity: u64) -> Result<Policy> {
        Policy::new(
            name,
            Algorithm::LeakyBucket(LeakyBucket::new(rate, per, capacity)?),
        )
    }

    /// At most `limit` leases held at once, each expiring after `lease`.
    pub fn concurrency(name: &str, limit: u64, lease: Duration) -> Result<Policy> {
        Policy::new(
            name,
            Algorithm::Concurrency(Concurrency::new(limit, lease)?),
        )
    }

    /// The same policy in shadow mode, to roll a new limit out safely:
    /// every check is decided and counted as usual, but a denial is
    /// answered as an admission with [`Decision::shadow`] set and the
    /// denial's fields (so you can see what the limit would do, and the
    /// metric `tollgate_shadow_denials_total` counts it). Reservations and
    /// leases are not shadowed; in an atomic batch a shadow policy's
    /// denial still stops the batch.
    ///
    /// [`Decision::shadow`]: crate::Decision::shadow
    #[must_use]
    pub fn shadow(mut self) -> Policy {
        self.shadow = true;
        self.build = Build::new();
        self
    }

    /// Whether the policy is in shadow mode.
    #[inline]
    pub fn is_shadow(&self) -> bool {
        self.shadow
    }

    /// The policy's name.
    #[inline]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name as shared by the policy's clones (what lets an override
    /// table be found by a pointer's comparison).
    #[inline]
    pub(crate) fn shared_name(&self) -> &Arc<str> {
        &self.name
    }

    /// The name's part of an inline memory store key.
    #[inline]
    pub(crate) fn inline_name(&self) -> &InlineName {
        &self.inline_name
    }

    /// The algorithm and its parameters.
    pub fn algorithm(&self) -> &Algorithm {
        &self.algorithm
    }

    /// The policy's `limit`, `burst` or `capacity`.
    pub fn limit(&self) -> u64 {
        self.algorithm.limit().0
    }

    /// The time span the quota is counted over: a window's length, a
    /// bucket's `per`, or a concurrency policy's lease (what the `w` of a
    /// `RateLimit-Policy` header shows).
    pub fn time_span(&self) -> Duration {
        Duration::from_micros(self.algorithm.time_span_micros())
    }

    /// Checks a request's cost: more than the policy can ever admit is
    /// [`Error::CostExceedsLimit`]. Concurrency policies only take leases.
    #[inline]
    pub fn validate_cost(&self, cost: u64) -> Result<()> {
        let (limit, what) = self.algorithm.limit();
        if cost > limit {
            return Err(Error::CostExceedsLimit { cost, limit, what });
        }
        Ok(())
    }

    /// Checks a usage operation: concurrency policies have no usage to
    /// charge, and a cost above [`MAX_USAGE_COST`] (2^52) is refused,
    /// naming the field (`max_cost` for [`Usage::AtMost`], else `cost`).
    #[inline]
    pub fn validate_usage(&self, op: Usage, cost: u64) -> Result<()> {
        self.require_rate(op.as_str())?;
        if let Usage::AtMostHeld(hold) = op {
            self.validate_hold(hold)?;
        }
        if cost > MAX_USAGE_COST {
            let field = if op.is_at_most() { "max_cost" } else { "cost" };
            return Err(Error::argument(
                field,
                format!("must be at most 2^52 ({MAX_USAGE_COST}), got {cost}"),
            ));
        }
        Ok(())
    }

    /// A held `check_at_most`'s hold: a token bucket's or GCRA's (a
    /// window's lease is already exact, spent within its window), at most
    /// the time the bucket takes to refill from empty (`burst · per /
    /// rate`), past which nothing could ever be granted.
    fn validate_hold(&self, hold: Duration) -> Result<()> {
        let Lease::Held { rate, burst } = self.algorithm.lease() else {
            return Err(Error::argument(
                "hold",
                format!(
                    "a held check_at_most is for token_bucket and gcra policies, not {}",
                    self.algorithm.name()
                ),
            ));
        };
        // In scaled units: the burst is below 2^50 of them, a µs drips
        // `units_per_micro`.
        let full = burst * rate.units_per_token / rate.units_per_micro;
        if hold.as_micros() > u128::from(full) {
            return Err(Error::argument(
                "hold",
                format!(
                    "must be at most {full} µs (the time policy `{}` takes to refill from empty), got {} µs",
                    self.name(),
                    hold.as_micros()
                ),
            ));
        }
        Ok(())
    }

    /// Refuses `operation` (a check or a reservation) on a concurrency
    /// policy, which only takes leases.
    #[inline]
    pub(crate) fn require_rate(&self, operation: &'static str) -> Result<()> {
        if matches!(self.algorithm, Algorithm::Concurrency(_)) {
            return Err(Error::Unsupported {
                operation,
                algorithm: "concurrency",
            });
        }
        Ok(())
    }

    /// The concurrency parameters, or `operation` (a lease's) refused on
    /// any other policy.
    pub(crate) fn require_concurrency(&self, operation: &'static str) -> Result<&Concurrency> {
        // A question only concurrency answers yes to: a lease's.
        match &self.algorithm {
            Algorithm::Concurrency(c) => Ok(c),
            other => Err(Error::Unsupported {
                operation,
                algorithm: other.name(),
            }),
        }
    }

    /// Checks a reservation: only token buckets and GCRA reserve, and
    /// `max_wait` must keep the borrowed tokens exact. Returns `max_wait` in
    /// microseconds.
    pub fn validate_reservation(&self, cost: u64, max_wait: Duration) -> Result<u64> {
        let Some(rate) = self.algorithm.reservation_rate() else {
            return Err(Error::Unsupported {
                operation: "reserve",
                algorithm: self.algorithm.name(),
            });
        };
        self.validate_cost(cost)?;
        let micros = wait_micros(max_wait);
        if micros as u128 * rate.units_per_micro as u128 > MAX_SCALED as u128 {
            return Err(Error::argument(
                "max_wait",
                format!(
                    "{max_wait:?} at this policy's rate borrows more than can be kept exactly; the longest is {:?}",
                    Duration::from_micros(MAX_SCALED / rate.units_per_micro)
                ),
            ));
        }
        Ok(micros)
    }
}

/// A reservation's `max_wait` in µs (exact once validated: see
/// [`Policy::validate_reservation`]).
#[inline]
pub(crate) fn wait_micros(max_wait: Duration) -> u64 {
    u64::try_from(max_wait.as_micros()).unwrap_or(u64::MAX)
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("name", &self.name)
            .field("algorithm", &self.algorithm)
            .field("group", &self.group)
            .field("shadow", &self.shadow)
            .finish()
    }
}

fn validate_name(name: &str) -> Result<()> {
    validate_name_of("name", name)
}

/// A name or a group: 1 to 64 characters of `A-Z a-z 0-9 _ - .`.
fn validate_name_of(field: &'static str, name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_POLICY_NAME_LEN {
        return Err(Error::policy(
            field,
            format!("must be 1 to {MAX_POLICY_NAME_LEN} characters long, got {name:?}"),
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        return Err(Error::policy(
            field,
            format!("may only contain A-Z, a-z, 0-9, `_`, `-` and `.`; {name:?} contains {c:?}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;

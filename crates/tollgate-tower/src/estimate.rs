//! What a request is expected to cost before it runs: a layer's estimate
//! for its usage limits.

use std::fmt;

use http::request::Parts;

/// A request's estimated cost: one number for every request, or a closure
/// over the request's head.
pub(crate) enum Estimate {
    Fixed(u64),
    PerRequest(Box<dyn Fn(&Parts) -> u64 + Send + Sync>),
}

impl Estimate {
    pub(crate) fn of(&self, request: &Parts) -> u64 {
        match self {
            Estimate::Fixed(units) => *units,
            Estimate::PerRequest(f) => f(request),
        }
    }
}

impl Default for Estimate {
    /// One unit a request, as a check without an estimate costs.
    fn default() -> Estimate {
        Estimate::Fixed(1)
    }
}

impl fmt::Debug for Estimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Estimate::Fixed(units) => f.debug_tuple("Fixed").field(units).finish(),
            Estimate::PerRequest(_) => f.write_str("PerRequest"),
        }
    }
}

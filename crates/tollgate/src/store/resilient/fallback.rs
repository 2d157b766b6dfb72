//! The local limiter used while the primary store is unavailable.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;

use crate::algorithm::Algorithm;
use crate::{MemoryStore, Policy};

/// A memory store whose policies are the callers' policies shared among
/// `instances` instances, so that together they stay near the global limit.
#[derive(Debug)]
pub(crate) struct Fallback {
    pub(crate) store: MemoryStore,
    instances: u64,
    /// Derived policies by name, with the algorithm they were derived from
    /// (a reloaded policy of the same name is derived again).
    shares: Mutex<HashMap<String, (Algorithm, Policy)>>,
}

impl Fallback {
    pub(crate) fn new(max_keys: usize, instances: u32) -> Fallback {
        Fallback {
            store: MemoryStore::builder().max_keys(max_keys).build(),
            instances: u64::from(instances),
            shares: Mutex::new(HashMap::new()),
        }
    }

    /// This instance's share of `policy`.
    pub(crate) fn share(&self, policy: &Policy) -> Policy {
        if self.instances == 1 {
            return policy.clone();
        }
        let mut shares = self.shares.lock();
        if let Some((algorithm, share)) = shares.get(policy.name())
            && algorithm == policy.algorithm()
        {
            return share.clone();
        }
        let share = divide(policy, self.instances);
        shares.insert(
            policy.name().to_owned(),
            (*policy.algorithm(), share.clone()),
        );
        share
    }
}

/// `policy` with its limit, burst or capacity divided by `n` (rounded down,
/// at least 1) and its rate divided by `n` by stretching its period (exact,
/// where `rate / n` would round). A share that cannot be expressed (a
/// period beyond a year) keeps the rate and only divides the size.
fn divide(policy: &Policy, n: u64) -> Policy {
    let name = policy.name();
    let part = |x: u64| (x / n).max(1);
    let micros = Duration::from_micros;
    let slower = |per: u64| micros(per.saturating_mul(n));
    let divided = match *policy.algorithm() {
        Algorithm::FixedWindow(a) => {
            Policy::fixed_window(name, part(a.limit()), micros(a.window_micros()))
        }
        Algorithm::SlidingWindow(a) => {
            Policy::sliding_window(name, part(a.limit()), micros(a.window_micros()))
        }
        Algorithm::SlidingLog(a) => {
            Policy::sliding_log(name, part(a.limit()), micros(a.window_micros()))
        }
        Algorithm::TokenBucket(a) => {
            let r = a.rate();
            Policy::token_bucket(name, r.rate, slower(r.per), part(a.burst()))
                .or_else(|_| Policy::token_bucket(name, r.rate, micros(r.per), part(a.burst())))
        }
        Algorithm::Gcra(a) => {
            let r = a.rate();
            Policy::gcra(name, r.rate, slower(r.per), part(a.burst()))
                .or_else(|_| Policy::gcra(name, r.rate, micros(r.per), part(a.burst())))
        }
        Algorithm::LeakyBucket(a) => {
            let r = a.rate();
            Policy::leaky_bucket(name, r.rate, slower(r.per), part(a.capacity()))
                .or_else(|_| Policy::leaky_bucket(name, r.rate, micros(r.per), part(a.capacity())))
        }
        Algorithm::Concurrency(a) => {
            Policy::concurrency(name, part(a.limit()), micros(a.lease_micros()))
        }
    };
    // Every share is valid when the policy is (smaller sizes, the same or
    // a longer period within bounds, else the original period).
    divided.unwrap_or_else(|_| policy.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_divide_sizes_and_rates() {
        let f = Fallback::new(1024, 3);
        let fw = Policy::fixed_window("fw", 100, Duration::from_secs(60)).unwrap();
        assert_eq!(f.share(&fw).limit(), 33);
        let tb = Policy::token_bucket("tb", 10, Duration::from_secs(1), 20).unwrap();
        let Algorithm::TokenBucket(share) = *f.share(&tb).algorithm() else {
            panic!("a token bucket stays a token bucket");
        };
        assert_eq!(share.burst(), 6);
        assert_eq!((share.rate().rate, share.rate().per), (10, 3_000_000));
        let tiny = Policy::fixed_window("tiny", 2, Duration::from_secs(1)).unwrap();
        assert_eq!(f.share(&tiny).limit(), 1, "never below 1");
        let one = Fallback::new(1024, 1);
        assert_eq!(one.share(&fw), fw);
    }
}

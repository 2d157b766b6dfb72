//! The token bucket, GCRA and the leaky bucket in their server-clock form
//! (`lua/bucket_expiry.lua`): the key's expiry is the theoretical arrival
//! time, so a decision reads no clock and the script replies one number,
//! the backlog, from which the algorithm's own Rust code rebuilds the
//! decision.
//!
//! Over 400 lines with its tests; the code itself is about 250.

use std::time::Duration;

use super::algorithm;
use super::scripts::{Script, Scripts};
use crate::algorithm::{Algorithm, MAX_DEBT, MAX_EXACT, State, Usage};
use crate::{Decision, Error, Result, StoreErrorKind};

/// A bucket on the server's clock: its interval and capacity in whole ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BucketExpiry {
    /// `per / rate`, in ms.
    interval: u64,
    /// The burst (or the leaky bucket's capacity) times the interval, in ms.
    capacity: u64,
    /// The key's suffix, which the batch also names the form by.
    tag: &'static str,
    /// The most backlog a charge leaves, in ms: [`MAX_DEBT`] scaled units.
    max_backlog: u64,
}

impl BucketExpiry {
    /// The form of a token bucket, GCRA or leaky bucket whose interval
    /// (`per / rate`) is a whole number of ms; `None` for any other policy.
    pub(super) fn of(algorithm: &Algorithm) -> Option<BucketExpiry> {
        let (rate, tokens, tag) = algorithm::bucket_expiry(algorithm)?;
        // One token is units_per_token units, units_per_micro of which
        // drip in per µs: the interval is their ratio, in µs.
        let units_per_ms = rate.units_per_micro * 1000;
        rate.units_per_token.is_multiple_of(units_per_ms).then(|| {
            let interval = rate.units_per_token / units_per_ms;
            BucketExpiry {
                interval,
                // At most the capacity in scaled units (below 2^50).
                capacity: tokens * interval,
                tag,
                max_backlog: MAX_DEBT / units_per_ms,
            }
        })
    }

    /// The key's suffix: `tbs`, `gcras` or `lbs`.
    pub(super) fn tag(&self) -> &'static str {
        self.tag
    }

    /// The numbers the batch passes for this form: interval, capacity (ms)
    /// and cost.
    pub(super) fn batch_numbers(&self, cost: u64) -> Vec<f64> {
        vec![self.interval as f64, self.capacity as f64, cost as f64]
    }

    /// The script's arguments, as text: need and room (ms), then the
    /// deadline when there is one. `cost` is at most the burst (validated),
    /// so `need` is at most the capacity.
    pub(super) fn args(&self, cost: u64, max_wait: u64, deadline: u64) -> Vec<String> {
        let need = cost * self.interval;
        // A reservation's wait is a whole number of ms here (every debt is),
        // so it fits in max_wait µs exactly when it fits in its whole ms.
        let room = self.capacity + max_wait / 1000 - need;
        let mut args = vec![need.to_string(), room.to_string()];
        if deadline > 0 {
            args.push(deadline.to_string());
        }
        args
    }

    /// The decision from the script's reply (the backlog in ms before the
    /// decision, or -1 minus it when denied): the algorithm's own decision
    /// on a state that far ahead of now, which must agree with the
    /// script's on admission.
    pub(super) fn decision(
        &self,
        algorithm: &Algorithm,
        reply: i64,
        cost: u64,
        max_wait: u64,
    ) -> Result<Decision> {
        let admitted = reply >= 0;
        let backlog = if admitted { reply } else { -1 - reply } as u64;
        let mut state = self.state_at(algorithm, backlog, "bucket_expiry", reply)?;
        let verdict = algorithm.decide_micros(&mut state, 0, cost, max_wait);
        if verdict.allowed != admitted {
            return Err(Error::Store {
                kind: StoreErrorKind::Protocol,
                message: format!(
                    "bucket_expiry replied {reply}, but a cost of {cost} on that backlog is {}",
                    if verdict.allowed {
                        "admitted"
                    } else {
                        "denied"
                    }
                ),
            });
        }
        Ok(verdict.decision())
    }

    /// A usage call in this form: its script
    /// (`lua/bucket_expiry_{charge,refund,at_most}.lua`, or for a cost of
    /// 0 the check's, which peeks) and its arguments, as text (see each
    /// script's contract): the deadline only when there is one, and
    /// check_at_most's interval only when it is not 1 ms or a deadline
    /// follows it (a held one's always, its deadline '0' for none, then
    /// its hold in whole ms, rounded up).
    pub(super) fn usage_call<'s>(
        &self,
        scripts: &'s Scripts,
        op: Usage,
        cost: u64,
        deadline: u64,
    ) -> (&'s Script, Vec<String>) {
        let need = cost.saturating_mul(self.interval);
        let (script, mut args) = match op {
            _ if cost == 0 => (&scripts.bucket_expiry, vec![0, self.capacity, deadline]),
            Usage::Charge => {
                let need = need.min(self.max_backlog);
                (
                    &scripts.bucket_expiry_charge,
                    vec![need, self.max_backlog - need],
                )
            }
            Usage::Refund => (
                &scripts.bucket_expiry_refund,
                vec![need.min(self.max_backlog)],
            ),
            _ => {
                // More than the capacity grants what the capacity does.
                let need = need.min(self.capacity);
                let mut args = vec![need, self.capacity - need];
                if let Usage::AtMostHeld(hold) = op {
                    // The deadline's place is taken ('0' for none); its
                    // reply has the TAT written too (its stamp).
                    args.extend([self.interval, deadline, hold_ms(hold)]);
                    return (
                        &scripts.bucket_expiry_at_most_held,
                        args.iter().map(u64::to_string).collect(),
                    );
                }
                if self.interval != 1 || deadline > 0 {
                    args.push(self.interval);
                }
                (&scripts.bucket_expiry_at_most, args)
            }
        };
        if deadline > 0 && cost > 0 {
            args.push(deadline);
        }
        (script, args.iter().map(u64::to_string).collect())
    }

    /// `lua/bucket_expiry_refund_held.lua`'s arguments: the stamp (the TAT
    /// in ms the held take wrote) and the `units` (at most the burst,
    /// validated) times the interval.
    pub(super) fn refund_held_args(&self, tat: u64, units: u64) -> [String; 2] {
        [tat.to_string(), (units * self.interval).to_string()]
    }

    /// The decision of a usage operation from its script's
    /// reply (the backlog in ms before it): the algorithm's own operation on
    /// a state that far ahead of now.
    pub(super) fn usage_decision(
        &self,
        algorithm: &Algorithm,
        reply: i64,
        op: Usage,
        cost: u64,
    ) -> Result<Decision> {
        // A peek (a cost of 0, by the check's script) may answer a denial.
        let backlog = if cost == 0 && reply < 0 {
            -1 - reply
        } else {
            reply
        };
        let backlog = u64::try_from(backlog).map_err(|_| Error::Store {
            kind: StoreErrorKind::Protocol,
            message: format!("a bucket_expiry usage script replied {reply}, a negative backlog"),
        })?;
        let mut state = self.state_at(algorithm, backlog, "a bucket_expiry usage script", reply)?;
        // The script held whole ms.
        let op = match op {
            Usage::AtMostHeld(hold) => Usage::AtMostHeld(Duration::from_millis(hold_ms(hold))),
            op => op,
        };
        Ok(algorithm.usage(&mut state, 0, op, cost))
    }

    /// At now = 0, the state whose TAT (or finish time) is `backlog` ms
    /// ahead.
    fn state_at(
        &self,
        algorithm: &Algorithm,
        backlog: u64,
        script: &str,
        reply: i64,
    ) -> Result<State> {
        let protocol = |why: &str| Error::Store {
            kind: StoreErrorKind::Protocol,
            message: format!("{script} replied {reply}, {why}"),
        };
        let micros = backlog
            .checked_mul(1000)
            .filter(|&m| m < MAX_EXACT)
            .ok_or_else(|| protocol("a backlog beyond any this policy keeps"))?;
        algorithm::backlog_state(algorithm, micros).map_err(|why| protocol(&why))
    }
}

/// A held `check_at_most`'s hold in whole ms, rounded up: the grant
/// counts as arriving no sooner than the hold asks.
fn hold_ms(hold: Duration) -> u64 {
    u64::try_from(hold.as_micros().div_ceil(1000)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Policy;

    fn bucket(policy: &Policy) -> Option<BucketExpiry> {
        BucketExpiry::of(policy.algorithm())
    }

    #[test]
    fn only_whole_ms_intervals_take_the_form() {
        let s = Duration::from_secs(1);
        let tb = Policy::token_bucket("t", 10, s, 20).unwrap();
        assert_eq!(
            bucket(&tb),
            Some(BucketExpiry {
                interval: 100,
                capacity: 2000,
                tag: "tbs",
                max_backlog: (1 << 52) / 1000,
            })
        );
        let gcra = Policy::gcra("g", 120, Duration::from_secs(60), 5).unwrap();
        assert_eq!(
            bucket(&gcra).map(|b| (b.interval, b.tag)),
            Some((500, "gcras"))
        );
        let lb = Policy::leaky_bucket("l", 1000, s, 3).unwrap();
        assert_eq!(bucket(&lb).map(|b| (b.interval, b.tag)), Some((1, "lbs")));
        // 333.3 ms, 0.5 ms, 1.5 ms: not whole ms.
        for (rate, per) in [(3, 1000), (2000, 1000), (2, 3)] {
            let p = Policy::gcra("g", rate, Duration::from_millis(per), 1).unwrap();
            assert_eq!(bucket(&p), None, "{rate} per {per} ms");
        }
        let fw = Policy::fixed_window("f", 1, s).unwrap();
        assert_eq!(bucket(&fw), None);
    }

    #[test]
    fn a_hold_is_whole_ms_rounded_up() {
        assert_eq!(hold_ms(Duration::ZERO), 0);
        assert_eq!(hold_ms(Duration::from_micros(1)), 1);
        assert_eq!(hold_ms(Duration::from_micros(20_000)), 20);
        assert_eq!(hold_ms(Duration::from_micros(20_001)), 21);
        let policy = Policy::gcra("g", 10, Duration::from_secs(1), 3).unwrap();
        let b = bucket(&policy).unwrap();
        let scripts = crate::store::redis::scripts::Scripts::new();
        let held = Usage::AtMostHeld(Duration::from_micros(1_500));
        // need, room, the interval, no deadline ('0'), the hold.
        assert_eq!(
            b.usage_call(&scripts, held, 1, 0).1,
            ["100", "200", "100", "0", "2"]
        );
        // Rebuilt on a backlog of 0 with the hold the script used: the
        // grant leaves 2 ms + 100 ms of backlog.
        let d = b.usage_decision(policy.algorithm(), 0, held, 1).unwrap();
        assert_eq!(d.granted, 1);
        assert_eq!(d.reset_after, Duration::from_millis(102));
    }

    #[test]
    fn a_reply_becomes_the_algorithms_own_decision() {
        let s = Duration::from_secs(1);
        for policy in [
            Policy::token_bucket("t", 10, s, 3).unwrap(),
            Policy::gcra("g", 10, s, 3).unwrap(),
        ] {
            let b = bucket(&policy).unwrap();
            let a = policy.algorithm();
            // 150 ms of backlog, cost 1: admitted, 1.5 tokens were missing.
            let d = b.decision(a, 150, 1, 0).unwrap();
            assert!(d.allowed);
            assert_eq!(d.remaining, 0);
            assert_eq!(d.reset_after, Duration::from_millis(250));
            // 250 ms of backlog and a cost of 1 needs 50 ms more.
            let d = b.decision(a, -251, 1, 0).unwrap();
            assert!(!d.allowed);
            assert_eq!(d.retry_after, Duration::from_millis(50));
            assert_eq!(d.reset_after, Duration::from_millis(250));
            // Reserved with a wait of up to 60 ms: the wait is the delay.
            assert_eq!(b.args(1, 60_999, 0), ["100", "260"]);
            let d = b.decision(a, 250, 1, 60_999).unwrap();
            assert_eq!(d.delay, Duration::from_millis(50));
            // The script and the algorithm disagreeing is a protocol error,
            // as is a backlog no state of this policy could have.
            assert!(b.decision(a, 250, 1, 0).is_err());
            assert!(b.decision(a, -1, 1, 0).is_err());
            assert!(b.decision(a, i64::MAX, 0, 0).is_err());
        }
        let lb = Policy::leaky_bucket("l", 10, s, 3).unwrap();
        let d = bucket(&lb)
            .unwrap()
            .decision(lb.algorithm(), 120, 1, 0)
            .unwrap();
        assert_eq!(
            d.delay,
            Duration::from_millis(120),
            "a shaper's delay is the backlog"
        );
        assert_eq!(d.reset_after, Duration::from_millis(220));
    }
}

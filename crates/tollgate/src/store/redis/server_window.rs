//! The fixed window in its server-clock form
//! (`lua/fixed_window_server.lua`): the state is what the window has left,
//! under a key that expires at the window's last ms, so the hot path is one
//! `DECRBY` and reads no clock; the reply is one integer, from which the
//! decision is rebuilt here with our estimate of the server's clock.

use super::scripts::{Script, Scripts};
use crate::algorithm::{Algorithm, MAX_EXACT, Usage};
use crate::{Decision, Error, Result, StoreErrorKind};

/// 2^49: the server-clock fixed window takes limits below this, so that
/// its value, remaining·16 + tag, stays below 2^53.
/// What fixed_window_server.lua replies: its integer, or the value of a
/// window charged past its limit (a table of that one value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WindowReply {
    /// The integer reply.
    Value(i64),
    /// A window in debt: its (negative) value.
    InDebt(i64),
}

const SERVER_WINDOW_MAX_LIMIT: u64 = 1 << 49;

/// The largest charge or check_at_most the usage scripts that cost what a
/// check does take (2^48): its ·16 (2^52) on any value a window holds
/// (-2^52 and more) stays within 2^53.
const MAX_FAST_COST: u64 = 1 << 48;

/// The least limit·16 whose refund takes no limit argument
/// (`lua/fixed_window_server_refund.lua`): below its value no refund can
/// pass a full window, so the script reads the limit from the key's name
/// only from that value on.
const LARGE_FULL: u64 = 1_000_000;

/// `one` when the call takes the form for a cost of 1 (no arguments).
fn pick<'s>(one: bool, one_form: &'s Script, general: &'s Script) -> &'s Script {
    if one { one_form } else { general }
}

/// A fixed window in its server-clock form (`lua/fixed_window_server.lua`).
#[derive(Debug, Clone, Copy)]
pub(super) struct ServerWindow {
    pub(super) limit: u64,
    /// µs, a whole number of ms.
    pub(super) window: u64,
}

impl ServerWindow {
    /// The form of a fixed window of whole ms and a limit below 2^49;
    /// `None` for any other policy (a calendar window among them: its
    /// windows are not of one length).
    pub(super) fn of(algorithm: &Algorithm) -> Option<ServerWindow> {
        let (limit, window) = algorithm.fixed_window()?;
        (window.is_multiple_of(1000) && limit < SERVER_WINDOW_MAX_LIMIT)
            .then_some(ServerWindow { limit, window })
    }

    /// The script for these arguments: the form without any for a cost of
    /// 1 (see [`ServerWindow::args`]).
    pub(super) fn script<'s>(scripts: &'s Scripts, args: &[String]) -> &'s Script {
        if args.is_empty() {
            &scripts.fixed_window_server_one
        } else {
            &scripts.fixed_window_server
        }
    }

    /// The numbers the batch passes for this form: limit, window (ms) and
    /// cost.
    pub(super) fn batch_numbers(&self, cost: u64) -> Vec<f64> {
        vec![self.limit as f64, (self.window / 1000) as f64, cost as f64]
    }

    /// The script's arguments, as text: none for a cost of 1 without a
    /// deadline (the script's form for that); else the cost times 16, and
    /// for a peek or a deadline the deadline ('0' for none).
    pub(super) fn args(&self, cost: u64, deadline: u64) -> Vec<String> {
        match (cost, deadline) {
            (1, 0) => Vec::new(),
            (1.., 0) => vec![(cost * 16).to_string()],
            _ => vec![(cost * 16).to_string(), deadline.to_string()],
        }
    }

    /// The arguments of `lua/fixed_window_server_deadline.lua`: the cost
    /// times 16, none for a cost of 1 (its clock key stands for the
    /// deadline).
    pub(super) fn deadline_args(cost: u64) -> Vec<String> {
        if cost == 1 {
            Vec::new()
        } else {
            vec![(cost * 16).to_string()]
        }
    }

    /// The decision from the script's reply (the key's value, which is
    /// remaining·16 + tag, or -1 minus it when denied), the script having
    /// run, on the server's clock, at some time in `[earliest, latest]` µs.
    /// The tag names the window modulo 4 (tags 5 to 8 mark a key that
    /// outlives its window by a ms or two, see the script), which is exact
    /// as long as our estimate of the server's clock is within a window or
    /// so; `reset_after` is counted from `earliest`, so that a caller who
    /// waits it from the answer never comes back before the window ended.
    pub(super) fn decision(&self, reply: i64, earliest: u64, latest: u64) -> Result<Decision> {
        let allowed = reply >= 0;
        let value = if allowed { reply } else { -1 - reply } as u64;
        let (remaining, tag) = (value / 16, value % 16);
        if value == 0 && allowed {
            // A peek that found no window (never denied: a denial's value
            // has a tag, which the check below asks of it).
            return Ok(Decision::from_micros(
                allowed, self.limit, self.limit, 0, 0, 0,
            ));
        }
        if !(1..=8).contains(&tag) || remaining > self.limit {
            return Err(Error::Store {
                kind: StoreErrorKind::Protocol,
                message: format!(
                    "fixed_window_server replied {reply}, which names no window of a limit of {}",
                    self.limit
                ),
            });
        }
        Ok(self.in_window(allowed, remaining, tag, earliest, latest))
    }

    /// The decision from the value of a window charged past its limit
    /// (the script's reply is then a table of that negative value): a
    /// denial with nothing left, its window named by the value modulo 16.
    pub(super) fn decision_in_debt(
        &self,
        value: i64,
        earliest: u64,
        latest: u64,
    ) -> Result<Decision> {
        let tag = value.rem_euclid(16) as u64;
        if value >= 0 || !(1..=8).contains(&tag) {
            return Err(Error::Store {
                kind: StoreErrorKind::Protocol,
                message: format!(
                    "fixed_window_server replied [{value}], which names no window in debt"
                ),
            });
        }
        Ok(self.in_window(false, 0, tag, earliest, latest))
    }

    /// A usage call in this form, for the scripts that cost what a check
    /// does (`lua/fixed_window_server_{charge,at_most,refund}.lua`): its
    /// script, its arguments (as [`args`](Self::args) gives a check's:
    /// none for 1 without a deadline; a refund adds the limit·16 when it is
    /// below 10^6), and
    /// the cost it passes (check_at_most's max_cost capped at the limit,
    /// which grants the same). A cost of 0 peeks with the check's script.
    /// `None` when the cost·16 could take a value past 2^53: such a
    /// call goes to `lua/fixed_window_server_usage.lua`.
    pub(super) fn usage_call<'s>(
        &self,
        scripts: &'s Scripts,
        op: Usage,
        cost: u64,
        deadline: u64,
    ) -> Option<(&'s Script, Vec<String>, u64)> {
        let cost = match op {
            Usage::AtMost => cost.min(self.limit),
            _ => cost,
        };
        if cost == 0 {
            let args = vec!["0".to_string(), deadline.to_string()];
            return Some((&scripts.fixed_window_server, args, 0));
        }
        let mut args = self.args(cost, deadline);
        let one = args.is_empty();
        let script = match op {
            Usage::Charge if cost <= MAX_FAST_COST => pick(
                one,
                &scripts.fixed_window_server_charge_one,
                &scripts.fixed_window_server_charge,
            ),
            Usage::Refund if (cost + self.limit + 1) * 16 <= MAX_EXACT => {
                if self.limit * 16 >= LARGE_FULL {
                    // The check's arguments: the script reads the limit
                    // from the key's name when the cap may matter.
                    pick(
                        one,
                        &scripts.fixed_window_server_refund_one_large,
                        &scripts.fixed_window_server_refund_large,
                    )
                } else {
                    // The limit·16 after the cost (none in the form for
                    // 1), before the deadline.
                    args.insert(usize::from(!one), (self.limit * 16).to_string());
                    pick(
                        one,
                        &scripts.fixed_window_server_refund_one,
                        &scripts.fixed_window_server_refund,
                    )
                }
            }
            Usage::AtMost if cost <= MAX_FAST_COST => pick(
                one,
                &scripts.fixed_window_server_at_most_one,
                &scripts.fixed_window_server_at_most,
            ),
            _ => return None,
        };
        Some((script, args, cost))
    }

    /// The decision of a usage call made with [`usage_call`](Self::usage_call)
    /// (which passed `cost`), from its script's reply, the script having
    /// run on the server's clock in `[earliest, latest]`: for a charge or
    /// a refund the value after it (0: fresh), as the algorithm's
    /// `after_usage` answers; for check_at_most the value after a whole
    /// grant, or -1 - (granted·16 + tag) after a smaller one.
    pub(super) fn usage_decision(
        &self,
        op: Usage,
        cost: u64,
        reply: WindowReply,
        earliest: u64,
        latest: u64,
    ) -> Result<Decision> {
        let value = match reply {
            WindowReply::Value(v) | WindowReply::InDebt(v) => v,
        };
        if op == Usage::AtMost {
            if cost == 0 {
                let d = match reply {
                    WindowReply::Value(v) => self.decision(v, earliest, latest),
                    WindowReply::InDebt(v) => self.decision_in_debt(v, earliest, latest),
                };
                return d.map(|d| d.with_granted(0));
            }
            if value >= 0 {
                return self
                    .decision(value, earliest, latest)
                    .map(|d| d.with_granted(cost));
            }
            let (granted, tag) = ((-1 - value) as u64 / 16, (-1 - value) as u64 % 16);
            if granted >= cost || !(1..=8).contains(&tag) {
                return Err(self.protocol(value, "a grant of this window"));
            }
            let d = self.in_window(granted > 0, 0, tag, earliest, latest);
            return Ok(d.with_granted(granted));
        }
        if value == 0 {
            return Ok(Decision::from_micros(true, self.limit, self.limit, 0, 0, 0));
        }
        let (remaining, tag) = (value.div_euclid(16), value.rem_euclid(16) as u64);
        if !(1..=8).contains(&tag) || remaining >= self.limit as i64 {
            return Err(self.protocol(value, "the value of this window"));
        }
        let d = self.in_window(true, remaining.max(0) as u64, tag, earliest, latest);
        Ok(Decision::from_micros(
            op == Usage::Refund || remaining >= 0,
            self.limit,
            d.remaining,
            d.reset_after.as_micros() as u64,
            if remaining >= 1 {
                0
            } else {
                d.reset_after.as_micros() as u64
            },
            0,
        ))
    }

    fn protocol(&self, value: i64, what: &str) -> Error {
        Error::Store {
            kind: StoreErrorKind::Protocol,
            message: format!(
                "a fixed_window_server usage script replied {value}, which is not {what} (limit {})",
                self.limit
            ),
        }
    }

    /// The decision in the window that `tag` names, the script having run
    /// in `[earliest, latest]` on the server's clock.
    fn in_window(
        &self,
        allowed: bool,
        remaining: u64,
        tag: u64,
        earliest: u64,
        latest: u64,
    ) -> Decision {
        // The window whose index is tag - 1 modulo 4 nearest to the middle
        // of the interval the script ran in.
        let middle = earliest / 2 + latest / 2;
        let guess = middle / self.window;
        let k = match ((tag - 1) % 4 + 4 - guess % 4) % 4 {
            0 => guess,
            1 => guess + 1,
            d => guess.saturating_sub(4 - d),
        };
        let until_end = ((k + 1) * self.window)
            .saturating_sub(earliest)
            .clamp(1, self.window);
        let retry = if allowed { 0 } else { until_end };
        Decision::from_micros(allowed, self.limit, remaining, until_end, retry, 0)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// The reply of fixed_window_server.lua for `remaining` in window `k`.
    fn reply(k: u64, remaining: u64, allowed: bool) -> i64 {
        // A key created in its window's last ms has the tag + 4: same window.
        let late = if k.is_multiple_of(2) { 4 } else { 0 };
        let value = (remaining * 16 + k % 4 + 1 + late) as i64;
        if allowed { value } else { -1 - value }
    }

    #[test]
    fn a_server_window_reply_names_its_window_despite_a_rough_clock() {
        let w = ServerWindow {
            limit: 5,
            window: 1_000_000,
        };
        let k = 1_700_000_000u64;
        let start = k * w.window;
        // Sent 300 ms into window k, answered 1 ms later.
        let d = w
            .decision(reply(k, 3, true), start + 300_000, start + 301_000)
            .unwrap();
        assert!(d.allowed);
        assert_eq!(d.remaining, 3);
        assert_eq!(d.reset_after, Duration::from_millis(700));
        assert_eq!(d.retry_after, Duration::ZERO);
        // Our estimate of the server's clock is already in window k + 1, or
        // even k + 2: the tag still says k, which has just ended.
        for ahead in [1_000_100, 1_900_000] {
            let d = w
                .decision(reply(k, 0, false), start + ahead, start + ahead + 1000)
                .unwrap();
            assert!(!d.allowed);
            assert_eq!(d.remaining, 0);
            assert_eq!(d.retry_after, Duration::from_micros(1), "{ahead}");
        }
        // Behind by most of a window: the tag says k + 1, a whole window
        // (the most there can be) away.
        let d = w
            .decision(reply(k + 1, 4, true), start + 900_000, start + 901_000)
            .unwrap();
        assert_eq!(d.reset_after, Duration::from_secs(1));
        // No key: nothing to reset.
        let d = w.decision(0, start, start + 1000).unwrap();
        assert_eq!(
            (d.allowed, d.remaining, d.reset_after),
            (true, 5, Duration::ZERO)
        );
        // A value without a tag, or with more left than the limit, is not
        // ours; neither is its denial.
        assert!(w.decision(-1, start, start + 1000).is_err());
        // A window in debt: -3 left in window k is -48 + tag.
        let tag = (k % 4 + 1) as i64;
        let d = w
            .decision_in_debt(-48 + tag, start + 300_000, start + 301_000)
            .unwrap();
        assert!(!d.allowed);
        assert_eq!(d.remaining, 0);
        assert_eq!(d.retry_after, Duration::from_millis(700));
        assert!(w.decision_in_debt(48 + tag, start, start + 1000).is_err());
        assert!(w.decision_in_debt(-48, start, start + 1000).is_err());
        for value in [16, 9, 6 * 16 + 1] {
            assert!(w.decision(value, start, start + 1000).is_err(), "{value}");
            assert!(
                w.decision(-1 - value, start, start + 1000).is_err(),
                "{value}"
            );
        }
    }
}

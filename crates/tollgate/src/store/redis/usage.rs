//! Charge, refund and check_at_most: one atomic script on the key the
//! policy's form keeps (`lua/*_usage.lua`), each with the contract of
//! `lua/usage_prologue.lua`.

use std::sync::atomic::Ordering;

use super::RedisStore;
use super::algorithm::{self, UsageTail};
use super::form::Form;
use super::pack::{Arg, pack};
use super::reply::decision;
use crate::algorithm::{Algorithm, Usage};
use crate::{Decision, Policy, Result};

impl RedisStore {
    /// A usage operation of `cost` on `key`; the input already validated.
    pub(super) async fn usage_op(
        &self,
        policy: &Policy,
        key: &[u8],
        op: Usage,
        cost: u64,
    ) -> Result<Decision> {
        if let Usage::AtMostHeld(hold) = op {
            // Its reply carries the state written too (see held.rs).
            return Ok(self.take_held_op(policy, key, cost, hold).await?.decision);
        }
        let form = self.form(policy);
        let redis_key = self.key_in_form(policy, key, &form);
        let scripts = &self.inner.scripts;
        match form {
            Form::BucketExpiry(b) => {
                let (script, args) = b.usage_call(scripts, op, cost, self.server_deadline());
                let reply = self.run_integer(script, &redis_key, &args).await?;
                b.usage_decision(policy.algorithm(), reply, op, cost)
            }
            Form::WindowOffset { .. } => Err(super::form::offset_unsupported(op.as_str())),
            Form::Window(w) => {
                let sent = self.server_now();
                // As `server_deadline`, from the clock already read.
                let deadline = self.inner.deadline.map_or(0, |d| sent + d);
                if let Some((script, args, passed)) = w.usage_call(scripts, op, cost, deadline) {
                    let reply = self.run_window(script, &redis_key, &args).await?;
                    let error = self.inner.offset_error.load(Ordering::Relaxed);
                    let (earliest, latest) =
                        (sent.saturating_sub(error), self.server_now() + error);
                    return w.usage_decision(op, passed, reply, earliest, latest);
                }
                let (op, cost, deadline) = (
                    usage_op(op).to_string(),
                    cost.to_string(),
                    self.server_deadline().to_string(),
                );
                let args = [Arg::Str(&op), Arg::Str(&cost), Arg::Str(&deadline)];
                let script = &scripts.fixed_window_server_usage;
                let reply = self.run(script, &[&redis_key], &args).await?;
                decision(policy, &reply)
            }
            Form::Script => {
                let algorithm = policy.algorithm();
                let packed = pack(&self.usage_numbers(algorithm, op, cost)?);
                // The fixed window's change of count, as text (see its
                // script).
                let change = match op {
                    Usage::Refund => format!("-{cost}"),
                    _ => cost.to_string(),
                };
                let side = algorithm::side(algorithm);
                let mut args = vec![Arg::Bin(packed)];
                if side.cost_text {
                    args.push(Arg::Str(&change));
                }
                let script = (side.usage)(scripts);
                let reply = self.run(script, &[&redis_key], &args).await?;
                decision(policy, &reply)
            }
        }
    }
}

impl RedisStore {
    /// The numbers of a usage script in the algorithm's own script form
    /// (its ARGV[1], see `lua/usage_prologue.lua`).
    pub(super) fn usage_numbers(
        &self,
        algorithm: &Algorithm,
        op: Usage,
        cost: u64,
    ) -> Result<Vec<f64>> {
        let [time, deadline] = self.time_args()?;
        let mut numbers = vec![time, deadline, usage_op(op) as f64];
        numbers.extend(algorithm::params(
            algorithm,
            cost,
            0,
            self.calendar_time(time),
        ));
        // The hold, in scaled units (below the capacity, 2^50:
        // validated), where the algorithm's usage script reads it.
        let hold = algorithm::hold_units(algorithm, op);
        match algorithm::side(algorithm).usage_tail {
            UsageTail::None => {}
            UsageTail::HoldForWait => *numbers.last_mut().expect("its numbers") = hold,
            UsageTail::Hold => numbers.push(hold),
            UsageTail::ShaperHold => numbers.extend([1.0, hold]),
        }
        Ok(numbers)
    }
}

/// The operation as the usage scripts name it: 1 charge, 2 refund, 3
/// check_at_most, 4 held (whose reply carries its stamp).
fn usage_op(op: Usage) -> u64 {
    match op {
        Usage::Charge => 1,
        Usage::Refund => 2,
        Usage::AtMostHeld(_) => 4,
        _ => 3,
    }
}

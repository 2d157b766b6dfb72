//! A held `check_at_most` with the stamp of the state it wrote, and the
//! exact refund that compares it (`refund_held`): in the algorithm's own
//! script form, the usage scripts (`lua/token_bucket_usage_end.lua` and
//! `lua/tat_usage_end.lua` reply the stamp of a held grant) and
//! `lua/*_refund_held.lua` in their bodies; in the server-clock form,
//! `lua/bucket_expiry_held_add.lua` and `lua/bucket_expiry_refund_held.lua`.

use std::time::Duration;

use redis::Value;

use super::RedisStore;
use super::algorithm;
use super::error::store_error;
use super::form::Form;
use super::pack::{Arg, pack};
use super::reply::{decision, late};
use super::scripts::Script;
use crate::algorithm::Usage;
use crate::store::{HeldGrant, Stamp};
use crate::{Decision, Error, Policy, Result, StoreErrorKind};

impl RedisStore {
    /// A held `check_at_most` of up to `max_cost` (validated), with the
    /// stamp of the state it wrote when it granted.
    pub(super) async fn take_held_op(
        &self,
        policy: &Policy,
        key: &[u8],
        max_cost: u64,
        hold: Duration,
    ) -> Result<HeldGrant> {
        let op = Usage::AtMostHeld(hold);
        let algorithm = policy.algorithm();
        let form = self.form(policy);
        let redis_key = self.key_in_form(policy, key, &form);
        let scripts = &self.inner.scripts;
        let (decision, state) = match form {
            Form::BucketExpiry(b) => {
                let (script, args) = b.usage_call(scripts, op, max_cost, self.server_deadline());
                let (backlog, tat) = self.run_stamped(script, &redis_key, &args).await?;
                let d = b.usage_decision(algorithm, backlog, op, max_cost)?;
                (d, tat.map(|t| [t, 0]))
            }
            // Only buckets are held (validated); the window form is a
            // window's.
            Form::Script | Form::Window(_) | Form::WindowOffset { .. } => {
                let numbers = pack(&self.usage_numbers(algorithm, op, max_cost)?);
                let script = (algorithm::side(algorithm).usage)(scripts);
                let reply = self
                    .run(script, &[&redis_key], &[Arg::Bin(numbers)])
                    .await?;
                match reply[..] {
                    [ref six @ .., t, f] if reply.len() == 8 && t >= 0.0 && f >= 0.0 => {
                        (decision(policy, six)?, Some([t as u64, f as u64]))
                    }
                    _ => (decision(policy, &reply)?, None),
                }
            }
        };
        let granted = decision.granted;
        Ok(HeldGrant {
            decision,
            stamp: state
                .filter(|_| granted > 0)
                .map(|s| Stamp::new(s, granted)),
        })
    }

    /// Gives back `units` (validated) of the held take that wrote
    /// `stamp`, if the key is still that state: the refund's decision, or
    /// `None` when nothing was written.
    pub(super) async fn refund_held_op(
        &self,
        policy: &Policy,
        key: &[u8],
        stamp: Stamp,
        units: u64,
    ) -> Result<Option<Decision>> {
        let algorithm = policy.algorithm();
        let form = self.form(policy);
        let redis_key = self.key_in_form(policy, key, &form);
        let scripts = &self.inner.scripts;
        let [s0, s1] = stamp.state();
        if let Form::BucketExpiry(b) = form {
            let args = b.refund_held_args(s0, units);
            let script = &scripts.bucket_expiry_refund_held;
            let backlog = self.run_integer(script, &redis_key, &args).await?;
            if backlog < 0 {
                return Ok(None);
            }
            return b
                .usage_decision(algorithm, backlog, Usage::Refund, units)
                .map(Some);
        }
        let mut numbers = self.usage_numbers(algorithm, Usage::Refund, units)?;
        // No deadline: a refund that applies is exact whenever it runs.
        numbers[1] = 0.0;
        let script = (algorithm::side(algorithm).refund_held)(scripts);
        let args = [
            Arg::Bin(pack(&numbers)),
            Arg::Bin(pack(&[s0 as f64, s1 as f64])),
        ];
        let reply = self.run(script, &[&redis_key], &args).await?;
        if reply == [0.0] {
            return Ok(None);
        }
        decision(policy, &reply).map(Some)
    }

    /// Runs a held `check_at_most` in the server-clock form: the backlog
    /// before, and the TAT written (ms) when it granted.
    async fn run_stamped(
        &self,
        script: &Script,
        key: &[u8],
        args: &[String],
    ) -> Result<(i64, Option<u64>)> {
        let args: Vec<Arg<'_>> = args.iter().map(|a| Arg::Str(a)).collect();
        let reply: Value = script
            .run(&self.inner.conn, &[key], &args)
            .await
            .map_err(|e| store_error(&e))?;
        match reply {
            Value::Int(backlog) => Ok((backlog, None)),
            Value::Array(values) => match values[..] {
                [Value::Int(backlog), Value::Int(tat)] if tat > 0 => {
                    Ok((backlog, Some(tat as u64)))
                }
                _ => Err(protocol(script, &format!("{values:?}"))),
            },
            Value::Nil => Err(late(script)),
            other => Err(protocol(script, &format!("{other:?}"))),
        }
    }
}

fn protocol(script: &Script, reply: &str) -> Error {
    Error::Store {
        kind: StoreErrorKind::Protocol,
        message: format!("{} replied {reply}", script.name()),
    }
}

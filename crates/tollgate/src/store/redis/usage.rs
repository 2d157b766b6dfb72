//! Charge, refund and check_at_most: one atomic script on the key the
//! policy's form keeps (`lua/*_usage.lua`), each with the contract of
//! `lua/usage_prologue.lua`.

use super::RedisStore;
use super::algorithm;
use super::bucket_expiry::usage_op;
use super::form::Form;
use super::pack::{Arg, pack};
use super::reply::decision;
use super::scripts::{Script, Scripts};
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
        let form = self.form(policy);
        let redis_key = self.key_in_form(policy, key, &form);
        let scripts = &self.inner.scripts;
        match form {
            Form::BucketExpiry(b) => {
                let args = b.usage_args(op, cost, self.server_deadline());
                let script = &scripts.bucket_expiry_usage;
                let reply = self.run_integer(script, &redis_key, &args).await?;
                b.usage_decision(policy.algorithm(), reply, op, cost)
            }
            Form::Window(_) => {
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
                let [time, deadline] = self.time_args()?;
                let mut numbers = vec![time, deadline, usage_op(op) as f64];
                numbers.extend(algorithm::params(
                    algorithm,
                    cost,
                    0,
                    self.calendar_time(time),
                ));
                if let Algorithm::LeakyBucket(_) = algorithm {
                    // tat_usage.lua's `shaper` (see scripts.rs).
                    numbers.push(1.0);
                }
                let args = [Arg::Bin(pack(&numbers))];
                let script = usage_script(scripts, algorithm);
                let reply = self.run(script, &[&redis_key], &args).await?;
                decision(policy, &reply)
            }
        }
    }
}

/// The usage script of an algorithm's own script form.
fn usage_script<'s>(scripts: &'s Scripts, algorithm: &Algorithm) -> &'s Script {
    match algorithm {
        Algorithm::FixedWindow(_) => &scripts.fixed_window_usage,
        Algorithm::SlidingWindow(_) => &scripts.sliding_window_usage,
        Algorithm::SlidingLog(_) => &scripts.sliding_log_usage,
        Algorithm::TokenBucket(_) => &scripts.token_bucket_usage,
        // Refused before coming here: a concurrency policy has no usage.
        Algorithm::Gcra(_) | Algorithm::LeakyBucket(_) | Algorithm::Concurrency(_) => {
            &scripts.tat_usage
        }
    }
}

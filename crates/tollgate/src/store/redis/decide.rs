//! One decision on one key: in the policy's form, with the numbers its
//! script takes; and the same call as text, for tools that drive the
//! scripts without this client.

use std::sync::atomic::Ordering;

use super::RedisStore;
use super::algorithm;
use super::form::Form;
use super::pack::{Arg, pack};
use super::reply::decision;
use super::server_window::ServerWindow;
use super::server_window::WindowReply;
use crate::{Decision, Policy, Result};

impl RedisStore {
    /// The call a check of `cost` on `key` makes, for tools that drive a
    /// script without this client (`redis-benchmark`, `redis-cli`): the
    /// script's SHA1, the Redis key, and the arguments after it. Not for
    /// concurrency policies. Not a stable interface.
    #[doc(hidden)]
    pub fn evalsha_call(
        &self,
        policy: &Policy,
        key: &[u8],
        cost: u64,
    ) -> Result<(String, Vec<u8>, Vec<String>)> {
        let form = self.form(policy);
        let redis_key = self.key_in_form(policy, key, &form);
        let scripts = &self.inner.scripts;
        match form {
            Form::Window(w) => {
                let args = w.args(cost, 0);
                let sha = ServerWindow::script(scripts, &args).sha().to_string();
                return Ok((sha, redis_key, args));
            }
            Form::BucketExpiry(b) => {
                let sha = scripts.bucket_expiry.sha().to_string();
                return Ok((sha, redis_key, b.args(cost, 0, 0)));
            }
            Form::WindowOffset { .. } => return Err(super::form::offset_unsupported("evalsha")),
            Form::Script => {}
        }
        let [time, _] = self.time_args()?;
        let mut args = vec![time.to_string(), "0".to_string()];
        args.extend(
            algorithm::params(policy.algorithm(), cost, 0, self.calendar_time(time))
                .iter()
                .map(f64::to_string),
        );
        let sha = (algorithm::side(policy.algorithm()).check)(scripts)
            .sha()
            .to_string();
        Ok((sha, redis_key, args))
    }

    /// Decides `cost` on `key`, waiting at most `max_wait` µs for a
    /// reservation (0: a check); the input already validated.
    pub(super) async fn decide(
        &self,
        policy: &Policy,
        key: &[u8],
        cost: u64,
        max_wait: u64,
    ) -> Result<Decision> {
        let form = self.form(policy);
        let redis_key = self.key_in_form(policy, key, &form);
        if let Form::BucketExpiry(b) = form {
            let args = b.args(cost, max_wait, self.server_deadline());
            let script = &self.inner.scripts.bucket_expiry;
            let reply = self.run_integer(script, &redis_key, &args).await?;
            return b.decision(policy.algorithm(), reply, cost, max_wait);
        }
        if let Form::WindowOffset { base, derived } = form {
            let sent = self.server_now();
            let deadline = self.inner.deadline.map_or(0, |d| sent + d);
            let offset = (derived.limit as i64 - base.limit as i64) * 16;
            let args = [
                (cost * 16).to_string(),
                deadline.to_string(),
                offset.to_string(),
            ];
            let script = &self.inner.scripts.fixed_window_server_offset;
            let reply = self.run_window(script, &redis_key, &args).await?;
            let error = self.inner.offset_error.load(Ordering::Relaxed);
            let (earliest, latest) = (sent.saturating_sub(error), self.server_now() + error);
            return match reply {
                WindowReply::Value(v) => derived.decision(v, earliest, latest),
                WindowReply::InDebt(v) => derived.decision_in_debt(v, earliest, latest),
            };
        }
        if let Form::Window(w) = form {
            let sent = self.server_now();
            // As `server_deadline`, from the clock already read.
            let deadline = self.inner.deadline.map_or(0, |d| sent + d);
            let args = w.args(cost, deadline);
            let script = ServerWindow::script(&self.inner.scripts, &args);
            let reply = if deadline > 0 && cost > 0 {
                // Busy callers' checks share one read of the server's clock.
                self.run_window_check(script, redis_key, cost, deadline, &args)
                    .await?
            } else {
                self.run_window(script, &redis_key, &args).await?
            };
            let error = self.inner.offset_error.load(Ordering::Relaxed);
            let (earliest, latest) = (sent.saturating_sub(error), self.server_now() + error);
            return match reply {
                WindowReply::Value(v) => w.decision(v, earliest, latest),
                WindowReply::InDebt(v) => w.decision_in_debt(v, earliest, latest),
            };
        }
        let algorithm = policy.algorithm();
        let [time, deadline] = self.time_args()?;
        let mut numbers = vec![time, deadline];
        numbers.extend(algorithm::params(
            algorithm,
            cost,
            max_wait,
            self.calendar_time(time),
        ));
        let side = algorithm::side(algorithm);
        let cost_text;
        let mut args = vec![Arg::Bin(pack(&numbers))];
        if side.cost_text {
            cost_text = cost.to_string();
            args.push(Arg::Str(&cost_text));
        }
        let script = (side.check)(&self.inner.scripts);
        let reply = self.run(script, &[&redis_key], &args).await?;
        decision(policy, &reply)
    }
}

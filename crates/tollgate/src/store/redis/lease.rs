//! Leases on a concurrency policy: taken and given back by
//! `lua/concurrency.lua`, which holds each lease with its expiry.

use super::RedisStore;
use super::algorithm;
use super::pack::{Arg, pack};
use super::reply::decision;
use crate::algorithm::LeaseId;
use crate::{Decision, Policy, Result};

/// What to do with a lease.
#[derive(Debug, Clone, Copy)]
pub(super) enum LeaseOp {
    Acquire,
    Release,
}

impl LeaseOp {
    /// The operation's name in the script's arguments.
    fn arg(self) -> &'static str {
        match self {
            LeaseOp::Acquire => "acquire",
            LeaseOp::Release => "release",
        }
    }
}

impl RedisStore {
    /// Takes or gives back lease `id` (the input validated): the decision,
    /// and whether the lease was taken (acquire) or still held (release).
    pub(super) async fn lease(
        &self,
        policy: &Policy,
        key: &[u8],
        op: LeaseOp,
        id: LeaseId,
    ) -> Result<(Decision, bool)> {
        let redis_key = self.key_of(policy, key);
        let id = id.to_string();
        let [time, deadline] = self.time_args()?;
        let mut numbers = vec![time, deadline];
        numbers.extend(algorithm::params(policy.algorithm(), 0, 0, 0));
        let args = [Arg::Bin(pack(&numbers)), Arg::Str(op.arg()), Arg::Str(&id)];
        let reply = self
            .run(&self.inner.scripts.concurrency, &[&redis_key], &args)
            .await?;
        Ok((decision(policy, &reply)?, reply[0] == 1.0))
    }
}

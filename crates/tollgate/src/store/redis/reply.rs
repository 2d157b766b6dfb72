//! Running a script and reading its reply: packed doubles checked to be
//! whole numbers (the algorithms' scripts and the batch), or one integer
//! (the server-clock forms); a script that ran past its deadline answers
//! so, and that is an error here.

use super::RedisStore;
use super::error::store_error;
use super::pack::{Arg, unpack};
use super::scripts::Script;
use crate::algorithm::MAX_EXACT;
use crate::{Decision, Error, Policy, Result, StoreErrorKind};

impl RedisStore {
    /// Runs a script; its reply as numbers, checked to be whole.
    pub(super) async fn run(
        &self,
        script: &Script,
        keys: &[&[u8]],
        args: &[Arg<'_>],
    ) -> Result<Vec<f64>> {
        let bytes: Vec<u8> = script
            .run(&self.inner.conn, keys, args)
            .await
            .map_err(|e| store_error(&e))?;
        let reply = unpack(&bytes)
            .filter(|r| {
                r.iter()
                    .all(|v| v.fract() == 0.0 && v.abs() < MAX_EXACT as f64)
            })
            .ok_or_else(|| Error::Store {
                kind: StoreErrorKind::Protocol,
                message: format!(
                    "{} replied {} bytes that are not whole numbers below 2^53",
                    script.name(),
                    bytes.len()
                ),
            })?;
        if reply.first() == Some(&-1.0) {
            return Err(late(script));
        }
        Ok(reply)
    }

    /// Runs a server-clock form's script: text arguments, one integer
    /// back (nil when the script ran past its deadline: an error).
    pub(super) async fn run_integer(
        &self,
        script: &Script,
        key: &[u8],
        args: &[String],
    ) -> Result<i64> {
        let args: Vec<Arg<'_>> = args.iter().map(|a| Arg::Str(a)).collect();
        let reply: Option<i64> = script
            .run(&self.inner.conn, &[key], &args)
            .await
            .map_err(|e| store_error(&e))?;
        reply.ok_or_else(|| late(script))
    }
}

/// The error of a script that ran after its deadline (and wrote nothing).
fn late(script: &Script) -> Error {
    Error::Store {
        kind: StoreErrorKind::Timeout,
        message: format!(
            "the server ran {} after the decision's deadline; nothing was written",
            script.name()
        ),
    }
}

/// A decision from a script's reply: allowed, remaining, reset, retry,
/// delay (whole numbers, checked by `run`).
pub(super) fn decision(policy: &Policy, reply: &[f64]) -> Result<Decision> {
    let [allowed, remaining, reset, retry, delay] = reply[..] else {
        return Err(Error::Store {
            kind: StoreErrorKind::Protocol,
            message: format!("a script replied {} values instead of 5", reply.len()),
        });
    };
    if [remaining, reset, retry, delay].iter().any(|&v| v < 0.0) {
        return Err(Error::Store {
            kind: StoreErrorKind::Protocol,
            message: format!("a script replied a negative value: {reply:?}"),
        });
    }
    Ok(Decision::from_micros(
        allowed == 1.0,
        policy.limit(),
        remaining as u64,
        reset as u64,
        retry as u64,
        delay as u64,
    ))
}

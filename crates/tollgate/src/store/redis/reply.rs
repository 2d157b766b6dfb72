//! Running a script and reading its reply: packed doubles checked to be
//! whole numbers (the algorithms' scripts and the batch), or one integer
//! (the server-clock forms); a script that ran past its deadline answers
//! so, and that is an error here.

use super::RedisStore;
use super::coalesce::WindowCheck;
use super::error::store_error;
use super::pack::{Arg, unpack};
use super::scripts::Script;
use super::server_window::{ServerWindow, WindowReply};
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

impl RedisStore {
    /// Runs fixed_window_server.lua (or its batch wrapper's body).
    pub(super) async fn run_window(
        &self,
        script: &Script,
        key: &[u8],
        args: &[String],
    ) -> Result<WindowReply> {
        let args: Vec<Arg<'_>> = args.iter().map(|a| Arg::Str(a)).collect();
        let reply: redis::Value = script
            .run(&self.inner.conn, &[key], &args)
            .await
            .map_err(|e| store_error(&e))?;
        window_reply(script, reply)
    }

    /// Runs a window check of `cost` with a deadline: in the next group of
    /// such checks when callers are busy (see `coalesce/group.rs`), else as
    /// `script` with `args`, as [`run_window`](Self::run_window) does.
    pub(super) async fn run_window_check(
        &self,
        script: &Script,
        key: Vec<u8>,
        cost: u64,
        deadline: u64,
        args: &[String],
    ) -> Result<WindowReply> {
        let scripts = &self.inner.scripts;
        // Alone, with a clock key where there is one to name.
        let clock = self.deadline_clock_key(deadline);
        let deadline_args;
        let (alone, args) = match clock {
            Some(_) => {
                deadline_args = ServerWindow::deadline_args(cost);
                (&scripts.fixed_window_server_deadline, &deadline_args[..])
            }
            None => (script, args),
        };
        let text: Vec<Arg<'_>> = args.iter().map(|a| Arg::Str(a)).collect();
        let check = WindowCheck {
            key,
            cost16: cost * 16,
            deadline,
        };
        let reply = scripts
            .fixed_window_server_group
            .run_window(alone, &self.inner.conn, check, clock.as_deref(), &text)
            .await
            .map_err(|e| store_error(&e))?;
        window_reply(alone, reply)
    }
}

/// fixed_window_server.lua's reply read: its value, a table of the value of
/// a window in debt, or nil when the deadline passed.
fn window_reply(script: &Script, reply: redis::Value) -> Result<WindowReply> {
    match reply {
        redis::Value::Int(v) => Ok(WindowReply::Value(v)),
        redis::Value::Array(values) => match values[..] {
            [redis::Value::Int(v)] => Ok(WindowReply::InDebt(v)),
            _ => Err(Error::Store {
                kind: StoreErrorKind::Protocol,
                message: format!("{} replied an unexpected table", script.name()),
            }),
        },
        redis::Value::Nil => Err(late(script)),
        other => Err(Error::Store {
            kind: StoreErrorKind::Protocol,
            message: format!("{} replied {other:?}", script.name()),
        }),
    }
}

/// The error of a script that ran after its deadline (and wrote nothing).
pub(super) fn late(script: &Script) -> Error {
    Error::Store {
        kind: StoreErrorKind::Timeout,
        message: format!(
            "the server ran {} after the decision's deadline; nothing was written",
            script.name()
        ),
    }
}

/// A decision from a script's reply: allowed, remaining, reset, retry,
/// delay (whole numbers, checked by `run`), and for the usage scripts
/// what was granted.
pub(super) fn decision(policy: &Policy, reply: &[f64]) -> Result<Decision> {
    let (five, granted) = match reply {
        [five @ .., granted] if reply.len() == 6 => (five, *granted),
        five => (five, 0.0),
    };
    let &[allowed, remaining, reset, retry, delay] = five else {
        return Err(Error::Store {
            kind: StoreErrorKind::Protocol,
            message: format!("a script replied {} values instead of 5 or 6", reply.len()),
        });
    };
    if granted < 0.0 {
        return Err(Error::Store {
            kind: StoreErrorKind::Protocol,
            message: format!("a script granted a negative cost: {reply:?}"),
        });
    }
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
    )
    .with_granted(granted as u64))
}

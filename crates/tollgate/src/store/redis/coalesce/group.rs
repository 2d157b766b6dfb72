//! Server-clock fixed-window checks that carry a deadline queue apart
//! ([`Coalescer::query_window`]): a flush sends them, at most
//! [`MAX_PIPELINE`](super::MAX_PIPELINE) at a time, as one call of
//! `lua/fixed_window_server_group.lua`, which reads the server's clock
//! once for all of them instead of once each (the clock read is most of
//! what a deadline costs the server). The group's deadline is the
//! earliest of its checks'; each check's reply, or its own error, goes to
//! its caller.

use redis::{ErrorKind, RedisError, RedisResult, Value};

use super::{Coalescer, Item, Waiter};

/// One server-clock fixed-window check with a deadline, as the group
/// script takes it.
#[derive(Debug, Clone)]
pub(crate) struct WindowCheck {
    pub(crate) key: Vec<u8>,
    /// The cost times 16 (see `lua/fixed_window_server.lua`), at least 16.
    pub(crate) cost16: u64,
    /// When, on the server's clock (µs), the check must have run.
    pub(crate) deadline: u64,
}

impl Coalescer {
    /// One call of the group script for these checks.
    pub(super) fn group(&self, checks: Vec<(WindowCheck, Waiter)>) -> Item {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&self.group_sha).arg(checks.len());
        for (check, _) in &checks {
            cmd.arg(&check.key[..]);
        }
        let deadline = checks.iter().map(|(c, _)| c.deadline).min();
        cmd.arg(deadline.unwrap_or(0));
        if checks.iter().any(|(c, _)| c.cost16 != 16) {
            for (check, _) in &checks {
                cmd.arg(check.cost16);
            }
        }
        Item::Group(cmd, checks.into_iter().map(|(_, w)| w).collect())
    }
}

/// Hands a group's reply out: each check's own reply, or its own error.
pub(super) fn answer(waiters: Vec<Waiter>, reply: RedisResult<Value>) {
    // An array is not read as one error because one check failed.
    let reply = match reply {
        Ok(Value::Array(replies)) => Ok(Value::Array(replies)),
        other => other.and_then(Value::extract_error),
    };
    match reply {
        // Each check's own reply, or its own error.
        Ok(Value::Array(replies)) if replies.len() == waiters.len() => {
            for (waiter, reply) in waiters.into_iter().zip(replies) {
                let _ = waiter.send(reply.extract_error());
            }
        }
        // Late (nil, and nothing written), or the call's error
        // (NOSCRIPT, the connection): the same to every check.
        Ok(Value::Nil) | Err(_) => {
            for waiter in waiters {
                let _ = waiter.send(reply.clone());
            }
        }
        Ok(other) => {
            let e = RedisError::from((
                ErrorKind::Parse,
                "group reply",
                format!("{other:?} to {} window checks", waiters.len()),
            ));
            for waiter in waiters {
                let _ = waiter.send(Err(e.clone()));
            }
        }
    }
}

//! How a policy's state is kept on a store, and so under which Redis key:
//! its algorithm's script, or a server-clock form whose key's expiry does
//! the clock's work.

use super::algorithm;
use super::bucket_expiry::BucketExpiry;
use super::keys::{SERVER_WINDOW_TAG, decimal, redis_key};
use super::server_window::ServerWindow;
use super::{RedisStore, TimeSource};
use std::time::Duration;

use crate::algorithm::{Algorithm, FixedWindow};
use crate::{Error, Policy};

/// How a policy's state is kept on a store: its algorithm's script, or a
/// server-clock form whose key's expiry does the clock's work.
#[derive(Debug, Clone, Copy)]
pub(super) enum Form {
    /// The algorithm's own script (`lua/<algorithm>.lua`).
    Script,
    /// A fixed window whose key expires with its window.
    Window(ServerWindow),
    /// A bucket whose key expires at its theoretical arrival time.
    BucketExpiry(BucketExpiry),
    /// A fixed window derived from a policy in the server-clock form
    /// (an override's, a tier's), with the same window and another limit:
    /// the base's key, checked with `lua/fixed_window_server_offset.lua`.
    WindowOffset {
        /// The form of the policy it was derived from, which names the key.
        base: ServerWindow,
        /// Its own numbers.
        derived: ServerWindow,
    },
}

impl Form {
    /// The name the batch knows the form by: the key's tag.
    pub(super) fn tag(&self, policy: &Policy) -> &'static str {
        match self {
            Form::Window(_) | Form::WindowOffset { .. } => SERVER_WINDOW_TAG,
            Form::BucketExpiry(b) => b.tag(),
            Form::Script => algorithm::side(policy.algorithm()).tag,
        }
    }

    /// The numbers the batch passes for a request of `cost` in this form
    /// (see `lua/batch.lua`).
    pub(super) fn batch_numbers(&self, policy: &Policy, cost: u64, near: u64) -> Vec<f64> {
        match self {
            Form::Window(w) | Form::WindowOffset { derived: w, .. } => w.batch_numbers(cost),
            Form::BucketExpiry(b) => b.batch_numbers(cost),
            Form::Script => algorithm::params(policy.algorithm(), cost, 0, near),
        }
    }
}

impl RedisStore {
    /// The Redis key holding `key`'s state under `policy`.
    pub fn key_of(&self, policy: &Policy, key: &[u8]) -> Vec<u8> {
        self.key_in_form(policy, key, &self.form(policy))
    }

    /// [`key_of`](Self::key_of), the policy's [`form`](Self::form) already
    /// known.
    pub(super) fn key_in_form(&self, policy: &Policy, key: &[u8], form: &Form) -> Vec<u8> {
        let prefix = &self.inner.prefix;
        match form {
            Form::Window(w) | Form::WindowOffset { base: w, .. } => {
                // The form, the window in ms and the limit, which the
                // script reads when it starts a window.
                let (mut window, mut limit) = ([0; 20], [0; 20]);
                let suffix = [
                    SERVER_WINDOW_TAG.as_bytes(),
                    b":",
                    decimal(w.window / 1000, &mut window),
                    b":",
                    decimal(w.limit, &mut limit),
                ];
                redis_key(prefix, policy, key, &suffix)
            }
            Form::BucketExpiry(_) | Form::Script => {
                redis_key(prefix, policy, key, &[form.tag(policy).as_bytes()])
            }
        }
    }

    /// How `policy`'s state is kept here. With server time, a fixed window
    /// of whole ms and a limit below 2^49 has its server-clock form (see
    /// `lua/fixed_window_server.lua`), and so does a token bucket, GCRA or
    /// leaky bucket whose interval is whole ms, on Redis 7.0 or later (see
    /// `lua/bucket_expiry.lua`); everything else its algorithm's script.
    pub(super) fn form(&self, policy: &Policy) -> Form {
        if !matches!(self.inner.time, TimeSource::Server) {
            return Form::Script;
        }
        let algorithm = policy.algorithm();
        if let Some(form) = derived_window(policy) {
            return form;
        }
        if let Some(w) = ServerWindow::of(algorithm) {
            return Form::Window(w);
        }
        if !self.inner.bucket_expiry_form {
            return Form::Script;
        }
        BucketExpiry::of(algorithm).map_or(Form::Script, Form::BucketExpiry)
    }
}

/// The form of a policy derived from one in the server-clock window form
/// (an override's, a tier's) with the same window: the base's own when
/// the limit is the same, else the base's key checked with an offset, so
/// that both count in one state. `None` for any other policy (a derived
/// window of another length starts over under its own key, as it does in
/// memory, where the window's index changes with its length).
fn derived_window(policy: &Policy) -> Option<Form> {
    let (limit, window) = policy.base_window()?;
    let base = FixedWindow::new(limit, Duration::from_micros(window)).ok()?;
    let base = ServerWindow::of(&Algorithm::FixedWindow(base))?;
    let derived = ServerWindow::of(policy.algorithm())?;
    if base.window != derived.window {
        return None;
    }
    Some(if base.limit == derived.limit {
        Form::Window(base)
    } else {
        Form::WindowOffset { base, derived }
    })
}

/// `operation` refused on a [`Form::WindowOffset`]: only checks (and
/// peeks) have a script that counts against another limit on the base's
/// key.
pub(super) fn offset_unsupported(operation: &'static str) -> Error {
    Error::Unsupported {
        operation,
        algorithm: "fixed_window (server clock) under an override's or tier's limit",
    }
}

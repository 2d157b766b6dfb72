//! How a policy's state is kept on a store, and so under which Redis key:
//! its algorithm's script, or a server-clock form whose key's expiry does
//! the clock's work.

use super::algorithm;
use super::bucket_expiry::BucketExpiry;
use super::keys::{SERVER_WINDOW_TAG, decimal, redis_key};
use super::server_window::ServerWindow;
use super::{RedisStore, TimeSource};
use crate::Policy;

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
}

impl Form {
    /// The name the batch knows the form by: the key's tag.
    pub(super) fn tag(&self, policy: &Policy) -> &'static str {
        match self {
            Form::Window(_) => SERVER_WINDOW_TAG,
            Form::BucketExpiry(b) => b.tag(),
            Form::Script => algorithm::tag(policy.algorithm()),
        }
    }

    /// The numbers the batch passes for a request of `cost` in this form
    /// (see `lua/batch.lua`).
    pub(super) fn batch_numbers(&self, policy: &Policy, cost: u64, near: u64) -> Vec<f64> {
        match self {
            Form::Window(w) => w.batch_numbers(cost),
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
            Form::Window(w) => {
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
        if let Some(w) = ServerWindow::of(algorithm) {
            return Form::Window(w);
        }
        if !self.inner.bucket_expiry_form {
            return Form::Script;
        }
        BucketExpiry::of(algorithm).map_or(Form::Script, Form::BucketExpiry)
    }
}

//! What the middleware does when the store fails or the request cannot be
//! keyed: the one classification of errors, and logging them once.

use std::sync::atomic::Ordering;

use tollgate::Error;

use super::Limiter;
use crate::rejection::Rejection;

/// How the middleware treats an error from the store.
pub(super) enum Failure {
    /// Decide without this policy (fail open).
    PassThrough,
    /// Answer with this.
    Reject(Rejection),
}

impl Limiter {
    /// A store error never becomes a `500`:
    ///
    /// - `StoreUnavailable` is the store's own failure policy saying "deny":
    ///   `503`;
    /// - any other store failure means the store has no failure policy of
    ///   its own (a bare `RedisStore`): the policy is skipped and the
    ///   request passes (fail open), logged when failures start and end;
    /// - an invalid key is the request's fault: `400`;
    /// - anything else (a cost over the policy's limit, an unsupported
    ///   operation) is a setup mistake the builder could not see: `500`,
    ///   logged.
    pub(super) fn on_error(&self, limit: usize, error: Error, grpc: bool) -> Failure {
        match error {
            Error::StoreUnavailable => Failure::Reject(Rejection::store_unavailable(grpc)),
            Error::Store { .. } => {
                if !self.store_failing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        error = %error,
                        "the rate limiter's store failed; requests pass without its limits until it answers"
                    );
                }
                Failure::PassThrough
            }
            Error::InvalidKey { .. } => {
                Failure::Reject(Rejection::bad_key(grpc, &bad_key_reason(&error)))
            }
            other => {
                self.log_misconfig(self.policy(limit).name(), &other);
                Failure::Reject(Rejection::misconfigured(grpc))
            }
        }
    }

    pub(super) fn store_answered(&self) {
        if self.store_failing.load(Ordering::Relaxed)
            && self.store_failing.swap(false, Ordering::Relaxed)
        {
            tracing::info!("the rate limiter's store answers again; its limits apply");
        }
    }

    pub(super) fn log_misconfig(&self, policy: &str, error: &dyn std::fmt::Display) {
        if !self.misconfig_logged.swap(true, Ordering::Relaxed) {
            tracing::error!(policy, %error, "rate limiter setup error; requests are answered 500");
        } else {
            tracing::debug!(policy, %error, "rate limiter setup error");
        }
    }
}

pub(super) fn bad_key_reason(error: &Error) -> String {
    match error {
        Error::InvalidKey { reason } => reason.clone(),
        other => other.to_string(),
    }
}

//! The one error type of the library.

use std::fmt;

/// A result whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong when building a policy or asking for a decision.
///
/// Errors are values: nothing in the library panics on bad input. Every
/// variant has a short stable [`code`](Error::code) (for logs, metrics and the
/// service's JSON errors) and a message that names the field and the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A policy parameter is out of range; the policy cannot be built.
    #[error("invalid policy: `{field}` {reason}")]
    InvalidPolicy {
        /// The parameter's name, as written in a policy file (`limit`, `window`, ...).
        field: &'static str,
        /// Why the value was refused, with the value.
        reason: String,
    },
    /// A request argument (cost, `max_wait`, ...) is out of range.
    #[error("invalid argument: `{field}` {reason}")]
    InvalidArgument {
        /// The argument's name.
        field: &'static str,
        /// Why the value was refused, with the value.
        reason: String,
    },
    /// The key is empty or longer than [`MAX_KEY_LEN`](crate::MAX_KEY_LEN).
    #[error("invalid key: {reason}")]
    InvalidKey {
        /// Why the key was refused.
        reason: String,
    },
    /// The cost is larger than anything the policy can ever admit; waiting
    /// would not help, so this is an error and not a "retry after".
    #[error("cost {cost} exceeds the policy's {what} of {limit}")]
    CostExceedsLimit {
        /// The requested cost.
        cost: u64,
        /// The policy's `limit`, `burst` or `capacity`.
        limit: u64,
        /// Which of the three it is.
        what: &'static str,
    },
    /// The operation does not exist for the policy's algorithm (for example
    /// `reserve` on a fixed window).
    #[error("`{operation}` is not supported by the {algorithm} algorithm")]
    Unsupported {
        /// The operation asked for.
        operation: &'static str,
        /// The policy's algorithm.
        algorithm: &'static str,
    },
    /// The store failed to answer.
    #[error("store error ({kind}): {message}")]
    Store {
        /// What kind of failure it was; decides [`Error::is_transient`].
        kind: StoreErrorKind,
        /// A description without secrets (no passwords, no user keys).
        message: String,
    },
    /// The store is unavailable and the failure policy is to deny.
    #[error("store unavailable")]
    StoreUnavailable,
    /// The store cannot run this batch atomically; nothing was consumed,
    /// and the same requests checked one by one may be answered.
    #[error("not atomic: {reason}")]
    NotAtomic {
        /// Why the store refused.
        reason: String,
    },
}

/// The kinds of store failure, so that callers (and the circuit breaker) can
/// tell a dead server from a bad request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// Connection refused, reset or closed.
    Io,
    /// No answer within the deadline.
    Timeout,
    /// The server is running a long script (`BUSY`) or loading its data.
    Busy,
    /// The server is out of memory (`OOM`).
    OutOfMemory,
    /// The server reached is a replica: demoted by a failover or
    /// `REPLICAOF` (`READONLY`), or cut off from its primary
    /// (`MASTERDOWN`).
    Replica,
    /// The cluster is reconfiguring (`MOVED`, `ASK`, `TRYAGAIN`,
    /// `CLUSTERDOWN`).
    Cluster,
    /// Authentication or permission failure (`WRONGPASS`, `NOPERM`): not
    /// transient, but still the store failing this client, not a bad
    /// request.
    Auth,
    /// The server answered something the client did not expect.
    Protocol,
    /// Anything else.
    Other,
}

impl StoreErrorKind {
    /// Whether a retry soon may succeed without anyone acting: true for
    /// I/O, timeouts, `BUSY`/`LOADING`, `OOM`, a replica and cluster
    /// reconfiguration; false for permissions, protocol and other errors.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            StoreErrorKind::Io
                | StoreErrorKind::Timeout
                | StoreErrorKind::Busy
                | StoreErrorKind::OutOfMemory
                | StoreErrorKind::Replica
                | StoreErrorKind::Cluster
        )
    }

    /// A short stable name, for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreErrorKind::Io => "io",
            StoreErrorKind::Timeout => "timeout",
            StoreErrorKind::Busy => "busy",
            StoreErrorKind::OutOfMemory => "oom",
            StoreErrorKind::Replica => "replica",
            StoreErrorKind::Cluster => "cluster",
            StoreErrorKind::Auth => "auth",
            StoreErrorKind::Protocol => "protocol",
            StoreErrorKind::Other => "other",
        }
    }
}

impl fmt::Display for StoreErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Error {
    /// Whether the same call may succeed later: true for store failures that
    /// a healthy server would not produce (I/O, timeouts, `BUSY`, `OOM`,
    /// cluster reconfiguration), false for bad input.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Store { kind, .. } => kind.is_transient(),
            Error::StoreUnavailable => true,
            _ => false,
        }
    }

    /// Whether the store failed to decide (any [`Error::Store`], and
    /// [`Error::StoreUnavailable`]), as opposed to the request being bad:
    /// the errors a failure policy answers for.
    pub fn is_store_failure(&self) -> bool {
        matches!(self, Error::Store { .. } | Error::StoreUnavailable)
    }

    /// A short stable code: `invalid_policy`, `invalid_argument`,
    /// `invalid_key`, `cost_exceeds_limit`, `unsupported` (also for a batch
    /// the store cannot run atomically), `store_error`, `store_unavailable`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidPolicy { .. } => "invalid_policy",
            Error::InvalidArgument { .. } => "invalid_argument",
            Error::InvalidKey { .. } => "invalid_key",
            Error::CostExceedsLimit { .. } => "cost_exceeds_limit",
            Error::Unsupported { .. } | Error::NotAtomic { .. } => "unsupported",
            Error::Store { .. } => "store_error",
            Error::StoreUnavailable => "store_unavailable",
        }
    }

    pub(crate) fn policy(field: &'static str, reason: impl Into<String>) -> Error {
        Error::InvalidPolicy {
            field,
            reason: reason.into(),
        }
    }

    pub(crate) fn argument(field: &'static str, reason: impl Into<String>) -> Error {
        Error::InvalidArgument {
            field,
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_only_for_store_failures() {
        let io = Error::Store {
            kind: StoreErrorKind::Io,
            message: "connection refused".into(),
        };
        assert!(io.is_transient());
        let auth = Error::Store {
            kind: StoreErrorKind::Auth,
            message: "WRONGPASS".into(),
        };
        assert!(!auth.is_transient());
        assert!(auth.is_store_failure(), "still the store's failure");
        let bad = Error::policy("limit", "must be at least 1, got 0");
        assert!(!bad.is_transient() && !bad.is_store_failure());
        assert_eq!(
            Error::policy("limit", "must be at least 1, got 0").to_string(),
            "invalid policy: `limit` must be at least 1, got 0"
        );
    }
}

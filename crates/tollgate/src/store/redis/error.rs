//! Redis errors as tollgate errors.
//!
//! Every error a script can meet half-way (a `redis.call` inside it fails)
//! gets a kind, and the kind says whether waiting may help
//! ([`StoreErrorKind::is_transient`]):
//!
//! | reply | kind | transient | why |
//! |---|---|---|---|
//! | `OOM` | `oom` | yes | `maxmemory` under `noeviction`: writes fail until memory is freed |
//! | `READONLY` | `replica` | yes | the node became a replica (failover, `REPLICAOF`); the new primary takes writes |
//! | `MASTERDOWN` | `replica` | yes | a replica lost its primary and serves no stale data |
//! | `BUSY` | `busy` | yes | another script runs past `busy-reply-threshold` |
//! | `LOADING` | `busy` | yes | the server loads its dataset after a restart |
//! | `CLUSTERDOWN` | `cluster` | yes | slots unserved until the cluster heals |
//! | `TRYAGAIN` | `cluster` | yes | a multi-key call during a slot migration |
//! | `NOPERM` | `auth` | no | the ACL user may not run this (credentials rotated, rights revoked) |
//!
//! A permission error is not transient, since no retry fixes it without an
//! operator; it is still the store failing this client, not a bad request,
//! so [`ResilientStore`](crate::store::resilient::ResilientStore) decides
//! by its failure policy for every kind. Inside a script, Redis 7.0 reports
//! a command the ACL user may not run as `ERR The user executing the
//! script can't run this command`; that reply is `auth` too.

use redis::{ErrorKind, RedisError, ServerErrorKind};

use crate::{Error, StoreErrorKind};

/// Classifies a Redis error; the message never carries a password (the
/// client's errors name hosts, not credentials).
pub(crate) fn store_error(e: &RedisError) -> Error {
    Error::Store {
        kind: kind_of(e),
        message: e.to_string(),
    }
}

/// A reply that is not the shape a caller expected (a script's contract
/// broken, or a value of another type under its key).
pub(crate) fn unexpected_reply(e: impl std::fmt::Display) -> Error {
    Error::Store {
        kind: StoreErrorKind::Protocol,
        message: format!("unexpected reply: {e}"),
    }
}

pub(crate) fn kind_of(e: &RedisError) -> StoreErrorKind {
    if e.is_timeout() {
        return StoreErrorKind::Timeout;
    }
    if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
        return StoreErrorKind::Io;
    }
    match e.kind() {
        ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown) => {
            StoreErrorKind::Replica
        }
        ErrorKind::Server(
            ServerErrorKind::Moved
            | ServerErrorKind::Ask
            | ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown,
        )
        | ErrorKind::ClusterConnectionNotFound => StoreErrorKind::Cluster,
        ErrorKind::Server(ServerErrorKind::BusyLoading) => StoreErrorKind::Busy,
        ErrorKind::AuthenticationFailed | ErrorKind::Server(ServerErrorKind::NoPerm) => {
            StoreErrorKind::Auth
        }
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => StoreErrorKind::Protocol,
        _ => match e.code() {
            Some("BUSY") => StoreErrorKind::Busy,
            Some("OOM") => StoreErrorKind::OutOfMemory,
            Some("WRONGPASS" | "NOAUTH") => StoreErrorKind::Auth,
            Some("ERR") if e.detail().is_some_and(is_script_acl_refusal) => StoreErrorKind::Auth,
            _ => StoreErrorKind::Other,
        },
    }
}

/// Redis 7.0's words for a `redis.call` the script's ACL user may not run.
fn is_script_acl_refusal(detail: &str) -> bool {
    detail.contains("can't run this command") || detail.contains("no permissions")
}

pub(crate) fn is_noscript(e: &RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error the client makes of an error reply, as it reads it off
    /// the wire.
    fn reply(line: &str) -> RedisError {
        let wire = format!("-{line}\r\n");
        redis::parse_redis_value(wire.as_bytes())
            .and_then(redis::Value::extract_error)
            .expect_err("an error reply")
    }

    fn classify(line: &str) -> (StoreErrorKind, bool) {
        let kind = kind_of(&reply(line));
        (kind, kind.is_transient())
    }

    const SCRIPT: &str = "script: 88c92385, on @user_script:1.";

    #[test]
    fn oom_mid_script_is_transient() {
        let line = format!("OOM command not allowed when used memory > 'maxmemory'. {SCRIPT}");
        assert_eq!(classify(&line), (StoreErrorKind::OutOfMemory, true));
    }

    #[test]
    fn readonly_mid_script_is_transient() {
        let line = format!("READONLY You can't write against a read only replica. {SCRIPT}");
        assert_eq!(classify(&line), (StoreErrorKind::Replica, true));
    }

    #[test]
    fn masterdown_is_transient() {
        let line =
            "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";
        assert_eq!(classify(line), (StoreErrorKind::Replica, true));
    }

    #[test]
    fn busy_and_loading_are_transient() {
        let busy = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
        assert_eq!(classify(busy), (StoreErrorKind::Busy, true));
        let loading = "LOADING Redis is loading the dataset in memory";
        assert_eq!(classify(loading), (StoreErrorKind::Busy, true));
    }

    #[test]
    fn clusterdown_and_tryagain_are_transient() {
        let down = "CLUSTERDOWN The cluster is down";
        assert_eq!(classify(down), (StoreErrorKind::Cluster, true));
        let again = "TRYAGAIN Multiple keys request during rehashing of slot";
        assert_eq!(classify(again), (StoreErrorKind::Cluster, true));
    }

    #[test]
    fn permission_errors_are_not_transient() {
        // Up front (the user may not call EVALSHA), in a script (7.0's
        // wording, then 7.2's), and a rotated password.
        for line in [
            "NOPERM this user has no permissions to run the 'evalsha' command".to_owned(),
            format!(
                "ERR The user executing the script can't run this command or subcommand {SCRIPT}"
            ),
            format!("NOPERM User ro has no permissions to run the 'set' command {SCRIPT}"),
            "WRONGPASS invalid username-password pair or user is disabled.".to_owned(),
        ] {
            assert_eq!(classify(&line), (StoreErrorKind::Auth, false), "{line}");
        }
    }

    #[test]
    fn other_script_errors_are_not_transient() {
        let line = format!(
            "ERR user_script:1: Script attempted to access nonexistent global variable 'x' {SCRIPT}"
        );
        assert_eq!(classify(&line), (StoreErrorKind::Other, false));
    }
}

//! Redis errors as tollgate errors.

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

pub(crate) fn kind_of(e: &RedisError) -> StoreErrorKind {
    if e.is_timeout() {
        return StoreErrorKind::Timeout;
    }
    if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
        return StoreErrorKind::Io;
    }
    match e.kind() {
        ErrorKind::Server(
            ServerErrorKind::Moved
            | ServerErrorKind::Ask
            | ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ReadOnly,
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
            _ => StoreErrorKind::Other,
        },
    }
}

pub(crate) fn is_noscript(e: &RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

//! The one classification of everything a request can fail with: each
//! [`Code`] names the failure, and both answers derive from it, the JSON
//! error's status (`http/error.rs`) and the gRPC status (`grpc.rs`). A
//! library error keeps the code `tollgate::Error::code()` gives it.

use std::fmt;

/// What went wrong, as the service names it in answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    /// The request itself: malformed JSON, a missing or mistyped field.
    InvalidRequest,
    /// No policy of that name.
    UnknownPolicy,
    /// No such endpoint, or one that is switched off.
    NotFound,
    /// A token is configured and the request lacks it.
    Unauthorized,
    /// The token is known, not allowed on that route (the decision token
    /// on an admin route).
    Forbidden,
    /// The body exceeds its limit.
    PayloadTooLarge,
    /// The endpoint exists, not with that method.
    MethodNotAllowed,
    /// The request (its body) did not arrive in time.
    Timeout,
    /// The request's URI exceeds its limit.
    UriTooLong,
    /// The request's head exceeds its limits (bytes or fields).
    HeadersTooLarge,
    /// A policy made from the request is invalid (a gRPC limit override).
    InvalidPolicy,
    /// An argument the library refused.
    InvalidArgument,
    /// An empty key, or one over 1024 bytes.
    InvalidKey,
    /// A cost above the policy's limit.
    CostExceedsLimit,
    /// An operation the policy's algorithm does not have.
    Unsupported,
    /// The store failed (Redis answered an error).
    StoreError,
    /// No store decides (down, under `on_failure = "deny"`).
    StoreUnavailable,
    /// A bug or a race in the service itself.
    Internal,
}

impl Code {
    /// The code's stable name, as answers carry it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Code::InvalidRequest => "invalid_request",
            Code::UnknownPolicy => "unknown_policy",
            Code::NotFound => "not_found",
            Code::Unauthorized => "unauthorized",
            Code::Forbidden => "forbidden",
            Code::PayloadTooLarge => "payload_too_large",
            Code::MethodNotAllowed => "method_not_allowed",
            Code::Timeout => "request_timeout",
            Code::UriTooLong => "uri_too_long",
            Code::HeadersTooLarge => "headers_too_large",
            Code::InvalidPolicy => "invalid_policy",
            Code::InvalidArgument => "invalid_argument",
            Code::InvalidKey => "invalid_key",
            Code::CostExceedsLimit => "cost_exceeds_limit",
            Code::Unsupported => "unsupported",
            Code::StoreError => "store_error",
            Code::StoreUnavailable => "store_unavailable",
            Code::Internal => "internal",
        }
    }

    /// The code of a library error: the one its `code()` names.
    fn of(e: &tollgate::Error) -> Code {
        match e.code() {
            "invalid_policy" => Code::InvalidPolicy,
            "invalid_argument" => Code::InvalidArgument,
            "invalid_key" => Code::InvalidKey,
            "cost_exceeds_limit" => Code::CostExceedsLimit,
            "unsupported" => Code::Unsupported,
            "store_error" => Code::StoreError,
            "store_unavailable" => Code::StoreUnavailable,
            // A code added to the library later: a bug here until named.
            _ => Code::Internal,
        }
    }

    /// Whether the fault is the caller's (bad input), not the service's.
    pub(crate) fn is_bad_input(self) -> bool {
        !matches!(
            self,
            Code::StoreError | Code::StoreUnavailable | Code::Internal
        )
    }
}

/// A failed request: its code and a message that names the field or value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServiceError {
    code: Code,
    message: String,
}

impl ServiceError {
    pub(crate) fn new(code: Code, message: impl Into<String>) -> ServiceError {
        ServiceError {
            code,
            message: message.into(),
        }
    }

    /// A malformed request.
    pub(crate) fn invalid(message: impl Into<String>) -> ServiceError {
        ServiceError::new(Code::InvalidRequest, message)
    }

    pub(crate) fn code(&self) -> Code {
        self.code
    }

    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    /// The same error, its message prefixed by where it happened
    /// (`checks[2]`, `descriptor 0`).
    pub(crate) fn at(self, place: &str) -> ServiceError {
        ServiceError {
            code: self.code,
            message: format!("{place}: {}", self.message),
        }
    }
}

impl From<tollgate::Error> for ServiceError {
    fn from(e: tollgate::Error) -> ServiceError {
        ServiceError::new(Code::of(&e), e.to_string())
    }
}

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tollgate::{MemoryStore, Policy};

    use super::*;

    /// Every library error keeps its own code: the service's answers name
    /// the codes `tollgate::Error::code()` documents.
    #[test]
    fn library_errors_keep_their_code() {
        let store = MemoryStore::new();
        let window = Policy::fixed_window("w", 2, Duration::from_secs(1)).unwrap();
        let errors = [
            store.check_sync(&window, b"", 1).unwrap_err(),
            store.check_sync(&window, b"k", 3).unwrap_err(),
            store
                .reserve_sync(&window, b"k", 1, Duration::ZERO)
                .unwrap_err(),
            Policy::fixed_window("w", 0, Duration::from_secs(1)).unwrap_err(),
            "zz".parse::<tollgate::LeaseId>().unwrap_err(),
            tollgate::Error::StoreUnavailable,
            tollgate::Error::Store {
                kind: tollgate::StoreErrorKind::Io,
                message: "refused".into(),
            },
        ];
        for e in errors {
            let code = e.code();
            assert_eq!(ServiceError::from(e).code().as_str(), code);
        }
    }
}

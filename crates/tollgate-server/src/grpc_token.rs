//! `--token` on the gRPC API: with a token configured, a
//! `ShouldRateLimit` call must carry `authorization: Bearer <token>`
//! metadata, compared in constant time, as the HTTP API wants the header.
//! A call without it, or with another token, answers `UNAUTHENTICATED`
//! before its message is even decoded, so it consumes nothing. The gRPC
//! health service (`grpc.health.v1.Health`) is not wrapped: it stays open,
//! as `/healthz` does. A decision route: the admin token is accepted too
//! (see `auth.rs`).

use http::HeaderMap;
use tonic::Status;

use crate::auth::{Access, Tokens};

/// The token check, on a call's headers (its metadata).
#[derive(Debug, Clone)]
pub(crate) struct Bearer {
    tokens: Tokens,
}

impl Bearer {
    /// Checks the decision token when there is one; lets every call
    /// through otherwise.
    pub(crate) fn new(tokens: Tokens) -> Bearer {
        Bearer { tokens }
    }

    /// Ok when the call may go on; `UNAUTHENTICATED` otherwise.
    pub(crate) fn check(&self, headers: &HeaderMap) -> Result<(), Status> {
        let given = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if self.tokens.check(Access::Decision, given).is_ok() {
            Ok(())
        } else {
            Err(Status::unauthenticated(
                "a valid bearer token is required: `authorization: Bearer <token>` metadata",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(bearer: &mut Bearer, authorization: Option<&str>) -> Result<(), tonic::Code> {
        let mut headers = HeaderMap::new();
        if let Some(value) = authorization {
            headers.insert("authorization", value.parse().unwrap());
        }
        bearer.check(&headers).map_err(|s| s.code())
    }

    #[test]
    fn the_token_is_required_when_set() {
        let mut open = Bearer::new(Tokens::default());
        assert_eq!(call(&mut open, None), Ok(()));
        let mut guarded = Bearer::new(Tokens::new(Some("s3cret"), Some("adm1n")));
        assert_eq!(call(&mut guarded, Some("Bearer s3cret")), Ok(()));
        assert_eq!(call(&mut guarded, Some("Bearer adm1n")), Ok(()));
        for bad in [None, Some("Bearer s3cres"), Some("s3cret"), Some("Bearer ")] {
            assert_eq!(
                call(&mut guarded, bad),
                Err(tonic::Code::Unauthenticated),
                "{bad:?}"
            );
        }
    }
}

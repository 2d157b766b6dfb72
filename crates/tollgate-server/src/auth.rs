//! Who may ask what: the decision token (`[server] token`) and the admin
//! token (`[server] admin_token`), as both front ends check them.
//!
//! - Decision routes (checks, usage, leases, stats, metrics, gRPC) want
//!   the decision token when one is set; the admin token is accepted
//!   there too (it may do everything).
//! - Admin routes (everything that changes limits or state: overrides,
//!   reading them included, as they name customers and their plans; and
//!   `DELETE /v1/keys/...`) want the admin token, or, with none set, the
//!   decision token, as before there was one.
//! - The decision token on an admin route is `forbidden` (403): the caller
//!   is known, not allowed. Any other token is `unauthorized` (401).
//!
//! Tokens are compared in constant time and never written anywhere: the
//! type's `Debug` hides them.

use std::fmt;
use std::sync::Arc;

use subtle::ConstantTimeEq;

use crate::error::{Code, ServiceError};

/// What a route lets a token do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Decide, read the status.
    Decision,
    /// Change limits or state.
    Admin,
}

/// The configured tokens.
#[derive(Clone, Default)]
pub(crate) struct Tokens {
    decision: Option<Arc<str>>,
    admin: Option<Arc<str>>,
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |t: &Option<Arc<str>>| if t.is_some() { "<set>" } else { "<none>" };
        f.debug_struct("Tokens")
            .field("decision", &set(&self.decision))
            .field("admin", &set(&self.admin))
            .finish()
    }
}

fn same(given: &str, token: &Option<Arc<str>>) -> bool {
    token
        .as_ref()
        .is_some_and(|t| bool::from(given.as_bytes().ct_eq(t.as_bytes())))
}

impl Tokens {
    pub(crate) fn new(decision: Option<&str>, admin: Option<&str>) -> Tokens {
        Tokens {
            decision: decision.map(Arc::from),
            admin: admin.map(Arc::from),
        }
    }

    /// Whether `given` (the bearer token, `""` when none) may use a route
    /// of `access`.
    pub(crate) fn check(&self, access: Access, given: &str) -> Result<(), ServiceError> {
        let open = match access {
            Access::Decision => self.decision.is_none(),
            Access::Admin => self.decision.is_none() && self.admin.is_none(),
        };
        let admin = same(given, &self.admin);
        let decision = same(given, &self.decision);
        let allowed = match access {
            Access::Decision => decision || admin,
            // Without an admin token, the decision token is the admin one.
            Access::Admin if self.admin.is_none() => decision,
            Access::Admin => admin,
        };
        if open || allowed {
            Ok(())
        } else if decision {
            Err(ServiceError::new(
                Code::Forbidden,
                "this route changes limits or state: it wants the admin token",
            ))
        } else {
            Err(ServiceError::new(
                Code::Unauthorized,
                "a valid bearer token is required",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(tokens: &Tokens, access: Access, given: &str) -> Option<&'static str> {
        tokens.check(access, given).err().map(|e| e.code().as_str())
    }

    #[test]
    fn each_token_opens_its_routes() {
        use Access::{Admin, Decision};
        let both = Tokens::new(Some("d"), Some("a"));
        assert_eq!(code(&both, Decision, "d"), None);
        assert_eq!(code(&both, Decision, "a"), None);
        assert_eq!(code(&both, Decision, ""), Some("unauthorized"));
        assert_eq!(code(&both, Decision, "x"), Some("unauthorized"));
        assert_eq!(code(&both, Admin, "a"), None);
        assert_eq!(code(&both, Admin, "d"), Some("forbidden"));
        assert_eq!(code(&both, Admin, ""), Some("unauthorized"));
        assert_eq!(code(&both, Admin, "ad"), Some("unauthorized"));

        let decision_only = Tokens::new(Some("d"), None);
        assert_eq!(code(&decision_only, Decision, "d"), None);
        assert_eq!(code(&decision_only, Admin, "d"), None);
        assert_eq!(code(&decision_only, Admin, ""), Some("unauthorized"));

        let admin_only = Tokens::new(None, Some("a"));
        assert_eq!(code(&admin_only, Decision, ""), None);
        assert_eq!(code(&admin_only, Admin, "a"), None);
        assert_eq!(code(&admin_only, Admin, ""), Some("unauthorized"));

        let open = Tokens::default();
        assert_eq!(code(&open, Admin, ""), None);
        assert_eq!(code(&open, Decision, ""), None);
    }

    #[test]
    fn debug_never_shows_a_token() {
        let text = format!("{:?}", Tokens::new(Some("s3cret"), Some("t0p")));
        assert!(!text.contains("s3cret") && !text.contains("t0p"), "{text}");
    }
}

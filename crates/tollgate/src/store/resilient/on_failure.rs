//! The failure policy: what a resilient store answers while its primary
//! store cannot decide.

use std::fmt;
use std::str::FromStr;

use crate::{Error, Result};

/// What to answer while the primary store is unavailable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum OnFailure {
    /// Decide with a local in-memory limiter of the same algorithm, whose
    /// limit is this instance's share (the limit divided by the expected
    /// number of instances). The default.
    #[default]
    Local,
    /// Admit everything (fail open).
    Allow,
    /// Refuse with [`Error::StoreUnavailable`] (fail closed): a distinct
    /// answer, never a fake "limited".
    Deny,
}

impl OnFailure {
    /// `local`, `allow` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            OnFailure::Local => "local",
            OnFailure::Allow => "allow",
            OnFailure::Deny => "deny",
        }
    }
}

impl fmt::Display for OnFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for OnFailure {
    type Err = Error;

    fn from_str(s: &str) -> Result<OnFailure> {
        match s {
            "local" => Ok(OnFailure::Local),
            "allow" => Ok(OnFailure::Allow),
            "deny" => Ok(OnFailure::Deny),
            other => Err(Error::argument(
                "on_failure",
                format!("expected `local`, `allow` or `deny`, got {other:?}"),
            )),
        }
    }
}

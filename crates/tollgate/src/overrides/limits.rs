//! The parameters an override (or a tier) replaces, by the names a policy
//! file gives them; the others stay the policy's own. The struct lives
//! with the algorithms (`algorithm/limits.rs`), each of which applies it
//! (`Rule::with_limits`); here, the checks that come first.

use crate::algorithm::{Algorithm, Rule, each_algorithm};
use crate::{Error, Result};

pub use crate::algorithm::limits::Limits;

impl Limits {
    /// `base` with these parameters in place of its own, validated as a
    /// policy's constructor validates (the algorithm stays the same).
    pub fn apply(&self, base: &Algorithm) -> Result<Algorithm> {
        let takes = takes(base);
        if let Some(field) = self.fields().into_iter().find(|f| !takes.contains(f)) {
            return Err(Error::policy(
                field,
                format!(
                    "does not apply to {} (it takes {})",
                    base.name(),
                    takes.join(", ")
                ),
            ));
        }
        if self.fields().is_empty() {
            return Err(Error::policy(
                takes[0],
                format!(
                    "no parameter given: an override of a {} policy sets at least one of {}",
                    base.name(),
                    takes.join(", ")
                ),
            ));
        }
        each_algorithm!(base, a => a.with_limits(self).map(Algorithm::from))
    }
}

/// The parameters `algorithm` takes, by name (a calendar window's length
/// is its period, which an override does not change).
pub fn takes(algorithm: &Algorithm) -> &'static [&'static str] {
    each_algorithm!(algorithm, a => a.takes())
}

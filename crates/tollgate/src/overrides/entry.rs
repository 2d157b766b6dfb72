//! One override: what it does to the keys its selector names, and until
//! when.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::Limits;
use crate::algorithm::Algorithm;
use crate::{Error, Result};

/// What an override does to the keys it selects.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Action {
    /// The policy's parameters, some replaced.
    Limits(Limits),
    /// Always denied (without touching the store).
    Block,
    /// Always admitted, consuming nothing (without touching the store).
    Allow,
    /// The policy's tier of that name (see [`Policy::with_tier`](crate::Policy::with_tier)).
    Tier(Arc<str>),
}

impl Action {
    /// `limits`, `block`, `allow` or `tier`: the kind, as metrics label it.
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Limits(_) => "limits",
            Action::Block => "block",
            Action::Allow => "allow",
            Action::Tier(_) => "tier",
        }
    }
}

/// An override: an [`Action`], and optionally the moment it ends.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Override {
    action: Action,
    /// Unix time in ms: past it, the override is gone (on every instance
    /// that shares it, each by its own clock).
    expires_at: Option<u64>,
}

/// The longest an override may last: ten years.
pub const MAX_OVERRIDE_TTL: Duration = Duration::from_secs(10 * 365 * 86_400);

impl Override {
    /// An override doing `action`, for ever.
    pub fn new(action: Action) -> Override {
        Override {
            action,
            expires_at: None,
        }
    }

    /// Replaced parameters.
    pub fn limits(limits: Limits) -> Override {
        Override::new(Action::Limits(limits))
    }

    /// Always denied.
    pub fn block() -> Override {
        Override::new(Action::Block)
    }

    /// Always admitted.
    pub fn allow() -> Override {
        Override::new(Action::Allow)
    }

    /// The policy's tier named `tier`.
    pub fn tier(tier: &str) -> Override {
        Override::new(Action::Tier(tier.into()))
    }

    /// The same override, ending `ttl` from now (1 ms to ten years).
    pub fn with_ttl(self, ttl: Duration) -> Result<Override> {
        if ttl < Duration::from_millis(1) || ttl > MAX_OVERRIDE_TTL {
            return Err(Error::argument(
                "ttl",
                format!("must be 1ms to 3650d, got {}", crate::format_duration(ttl)),
            ));
        }
        let at = now_ms() + ttl.as_millis() as u64;
        Ok(self.expiring_at(at))
    }

    /// The same override, ending at `unix_ms` (Unix time in ms).
    pub fn expiring_at(mut self, unix_ms: u64) -> Override {
        self.expires_at = Some(unix_ms);
        self
    }

    /// What it does.
    pub fn action(&self) -> &Action {
        &self.action
    }

    /// When it ends, in Unix ms, if it does.
    pub fn expires_at(&self) -> Option<u64> {
        self.expires_at
    }

    /// How long it has left at `now_ms`, if it ends (zero once ended).
    pub fn ttl_at(&self, now_ms: u64) -> Option<Duration> {
        self.expires_at
            .map(|at| Duration::from_millis(at.saturating_sub(now_ms)))
    }

    /// Whether it has ended at `now_ms`.
    #[inline]
    pub fn expired_at(&self, now_ms: u64) -> bool {
        self.expires_at.is_some_and(|at| at <= now_ms)
    }

    /// Checks it against a policy's algorithm: its parameters applied
    /// there, or `None` for an action without any.
    pub fn derive(&self, base: &Algorithm) -> Result<Option<Algorithm>> {
        match &self.action {
            Action::Limits(l) => l.apply(base).map(Some),
            _ => Ok(None),
        }
    }
}

/// The wall clock in Unix ms.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

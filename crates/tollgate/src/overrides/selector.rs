//! Which keys an override applies to: one key exactly, or every key that
//! starts with a prefix (`trial_*`).

use std::fmt;
use std::sync::Arc;

use crate::{Error, MAX_KEY_LEN, Result};

/// Which keys an override applies to.
///
/// Written as text, a selector ending in `*` is a prefix (`trial_*`: every
/// key starting with `trial_`); any other is one key exactly. A `*`
/// anywhere else is refused, and so is a selector that is empty, a lone
/// `*`, or longer than a key can be ([`MAX_KEY_LEN`] bytes before the
/// `*`). A key that itself ends in `*` can therefore only be reached
/// through a prefix.
///
/// ```
/// use tollgate::overrides::Selector;
///
/// let trial = Selector::parse(b"trial_*")?;
/// assert!(trial.is_prefix());
/// assert!(trial.matches(b"trial_42"));
/// assert!(!trial.matches(b"pro_42"));
/// assert_eq!(trial.to_string(), "trial_*");
///
/// let err = Selector::parse(b"tr*al").unwrap_err();
/// assert_eq!(err.to_string(), "invalid argument: `selector` may have `*` only at its end, got \"tr*al\"");
/// # Ok::<(), tollgate::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Selector {
    /// The key, or the prefix without its `*`.
    bytes: Arc<[u8]>,
    prefix: bool,
}

impl Selector {
    /// Reads a selector (see the type's doc for the rules).
    pub fn parse(text: &[u8]) -> Result<Selector> {
        let (body, prefix) = match text.split_last() {
            Some((b'*', body)) => (body, true),
            _ => (text, false),
        };
        if body.is_empty() {
            return Err(Error::argument(
                "selector",
                if prefix {
                    "needs at least one byte before its `*` (the policy itself applies to every key)"
                        .to_string()
                } else {
                    "must not be empty".to_string()
                },
            ));
        }
        if body.len() > MAX_KEY_LEN {
            return Err(Error::argument(
                "selector",
                format!(
                    "must be at most {MAX_KEY_LEN} bytes (before a final `*`), got {}",
                    body.len()
                ),
            ));
        }
        if body.contains(&b'*') {
            return Err(Error::argument(
                "selector",
                format!(
                    "may have `*` only at its end, got {:?}",
                    String::from_utf8_lossy(text)
                ),
            ));
        }
        Ok(Selector {
            bytes: body.into(),
            prefix,
        })
    }

    /// One key exactly (which may end in `*`: it is taken as it is).
    pub fn exact(key: &[u8]) -> Result<Selector> {
        crate::validate_key(key)?;
        Ok(Selector {
            bytes: key.into(),
            prefix: false,
        })
    }

    /// Whether it selects every key starting with [`bytes`](Self::bytes).
    #[inline]
    pub fn is_prefix(&self) -> bool {
        self.prefix
    }

    /// The key, or the prefix without its `*`.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub(super) fn shared_bytes(&self) -> &Arc<[u8]> {
        &self.bytes
    }

    /// Whether `key` is selected.
    pub fn matches(&self, key: &[u8]) -> bool {
        if self.prefix {
            key.starts_with(&self.bytes)
        } else {
            key == &*self.bytes
        }
    }

    /// The selector as it is written: the key, or the prefix and `*`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.bytes.to_vec();
        if self.prefix {
            out.push(b'*');
        }
        out
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.bytes))?;
        if self.prefix {
            f.write_str("*")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Selector({self})")
    }
}

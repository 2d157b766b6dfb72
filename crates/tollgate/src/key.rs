//! Limited keys: arbitrary bytes, bounded in length.

use crate::{Error, Result};

/// The longest key accepted, in bytes.
pub const MAX_KEY_LEN: usize = 1024;

/// Checks that a key is usable: not empty and at most [`MAX_KEY_LEN`] bytes.
/// Any byte is allowed (braces, spaces, newlines, non-UTF-8).
#[inline]
pub fn validate_key(key: &[u8]) -> Result<()> {
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(invalid_key(key));
    }
    Ok(())
}

/// Why `key` was refused, out of the checks' way.
#[cold]
fn invalid_key(key: &[u8]) -> Error {
    if key.is_empty() {
        return Error::InvalidKey {
            reason: "the key is empty".into(),
        };
    }
    Error::InvalidKey {
        reason: format!(
            "the key is {} bytes long; the maximum is {MAX_KEY_LEN}",
            key.len()
        ),
    }
}

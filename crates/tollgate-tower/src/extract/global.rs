//! One key for every request.

use http::request::Parts;

use crate::{Key, KeyError, KeyExtractor};

/// Counts every request against one key, `global`: a limit for the whole
/// service (shared by every instance when the store is shared).
#[derive(Debug, Clone, Copy, Default)]
pub struct Global;

impl KeyExtractor for Global {
    fn extract(&self, _: &Parts) -> Result<Option<Key>, KeyError> {
        Ok(Some(Key::from_static(b"global")))
    }
}

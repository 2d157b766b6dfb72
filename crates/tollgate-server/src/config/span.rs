//! Where in a config file an error is: the byte ranges the table readers
//! report, and the line and field they become. A leaf of `config/`: every
//! table's reader imports it, and `mod.rs` turns its ranges into lines.

use std::ops::Range;

use super::bounded::excerpt;

/// An error a table reader found, at a field's bytes when it knows them.
pub(crate) type FieldError = (Option<Range<usize>>, String);
/// An error at a field's bytes.
pub(crate) type SpannedError = (Range<usize>, String);

/// The field whose value starts at byte `offset` of a TOML `text`, as
/// ``[table] `key` `` (the parser's own errors say what they expected, not
/// where); `None` when `offset` is not at a `key = value` line's value.
pub(super) fn field_at(text: &str, offset: usize) -> Option<String> {
    let before = text.get(..offset)?;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let (key, _) = before[line_start..].split_once('=')?;
    let key = key.trim();
    if key.is_empty() || key.starts_with('[') || key.starts_with('#') {
        return None;
    }
    let table = before[..line_start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .and_then(|l| {
            let end = match l.strip_prefix("[[") {
                Some(_) => l.find("]]").map(|i| i + 1),
                None => l.find(']'),
            };
            end.map(|end| format!("{} ", &l[..=end]))
        })
        .unwrap_or_default();
    Some(format!("{table}`{}`", excerpt(key)))
}

/// The 1-based line of byte `offset` in `text`.
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

//! Numbers to and from the scripts: the algorithms' numbers go packed as
//! little-endian doubles in one argument (cheaper for Lua to unpack than
//! one text argument each) and replies come back the same way.

/// A script argument: numbers packed for `struct.unpack`, or a text.
#[derive(Debug, Clone)]
pub(crate) enum Arg<'a> {
    Bin(Vec<u8>),
    Str(&'a str),
}

/// Numbers packed as little-endian doubles, as the scripts' ARGV[1] (and
/// the batch's per-request numbers) carry them. Every value is an integer
/// below 2^53 (or -1), so the double is exact.
pub(crate) fn pack(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// A reply of little-endian doubles, back to numbers; `None` when its
/// length is not a whole number of doubles.
pub(crate) fn unpack(reply: &[u8]) -> Option<Vec<f64>> {
    if !reply.len().is_multiple_of(8) {
        return None;
    }
    Some(
        reply
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect(),
    )
}

//! A `RateLimitRequest` as the native service decides it: its domain, its
//! `hits_addend` and each descriptor's entries, `limit` and `hits_addend`,
//! borrowed. Read straight from the frame's bytes ([`View::parse`]) for
//! the common message, or from prost's decoded message
//! ([`View::of`]) for every other, so both decide through the same code
//! (`grpc.rs`).
//!
//! [`View::parse`] reads only what it is sure prost reads the same way:
//! the request's `domain` (1), `descriptors` (2) and `hits_addend` (3), a
//! descriptor's `entries` (1) and `hits_addend` (3, a `UInt64Value`), an
//! entry's `key` (1) and `value` (2), with their wire types, each singular
//! field at most once, its strings UTF-8 and its `uint32` within 32 bits.
//! Anything else (a `limit` override, `is_negative_hits`, an unknown or
//! repeated field, a malformed varint) is `None`: prost decodes the
//! message instead, and answers or refuses it as it always did.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use smallvec::SmallVec;

/// A request, borrowed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct View<'a> {
    pub(crate) domain: &'a str,
    pub(crate) hits_addend: u32,
    pub(crate) descriptors: SmallVec<[Described<'a>; 2]>,
}

/// One descriptor, borrowed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Described<'a> {
    pub(crate) entries: SmallVec<[(&'a str, &'a str); 3]>,
    pub(crate) limit: Option<RateLimitOverride>,
    pub(crate) hits_addend: Option<u64>,
}

/// Protobuf's wire types this reads.
const VARINT: u8 = 0;
const LEN: u8 = 2;

/// A varint off the front of `b` (at most 10 bytes, within 64 bits).
fn varint(b: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for i in 0..10 {
        let (&byte, rest) = b.split_first()?;
        *b = rest;
        if i == 9 && byte > 1 {
            return None;
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

/// The next field's number and wire type off the front of `b`.
fn key(b: &mut &[u8]) -> Option<(u64, u8)> {
    let key = varint(b)?;
    let number = key >> 3;
    if number == 0 || number > u64::from(u32::MAX >> 3) {
        return None;
    }
    Some((number, (key & 7) as u8))
}

/// A length-delimited field's bytes off the front of `b`.
fn bytes<'a>(b: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = usize::try_from(varint(b)?).ok()?;
    if len > b.len() {
        return None;
    }
    let (field, rest) = b.split_at(len);
    *b = rest;
    Some(field)
}

/// A string field, set once.
fn string<'a>(b: &mut &'a [u8], slot: &mut Option<&'a str>) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(std::str::from_utf8(bytes(b)?).ok()?);
    Some(())
}

/// An entry: its key and value.
fn entry(mut b: &[u8]) -> Option<(&str, &str)> {
    let (mut k, mut v) = (None, None);
    while !b.is_empty() {
        match key(&mut b)? {
            (1, LEN) => string(&mut b, &mut k)?,
            (2, LEN) => string(&mut b, &mut v)?,
            _ => return None,
        }
    }
    Some((k.unwrap_or_default(), v.unwrap_or_default()))
}

/// A `UInt64Value`'s value.
fn uint64_value(mut b: &[u8]) -> Option<u64> {
    let mut value = None;
    while !b.is_empty() {
        match key(&mut b)? {
            (1, VARINT) if value.is_none() => value = Some(varint(&mut b)?),
            _ => return None,
        }
    }
    Some(value.unwrap_or_default())
}

fn descriptor(mut b: &[u8]) -> Option<Described<'_>> {
    let mut d = Described {
        entries: SmallVec::new(),
        limit: None,
        hits_addend: None,
    };
    while !b.is_empty() {
        match key(&mut b)? {
            (1, LEN) => d.entries.push(entry(bytes(&mut b)?)?),
            (3, LEN) if d.hits_addend.is_none() => {
                d.hits_addend = Some(uint64_value(bytes(&mut b)?)?);
            }
            _ => return None,
        }
    }
    Some(d)
}

impl<'a> View<'a> {
    /// The common message read from its bytes; `None` for anything prost
    /// must read (see the module's docs).
    pub(crate) fn parse(mut b: &'a [u8]) -> Option<View<'a>> {
        let (mut domain, mut hits_addend) = (None, None);
        let mut descriptors = SmallVec::new();
        while !b.is_empty() {
            match key(&mut b)? {
                (1, LEN) => string(&mut b, &mut domain)?,
                (2, LEN) => descriptors.push(descriptor(bytes(&mut b)?)?),
                (3, VARINT) if hits_addend.is_none() => {
                    hits_addend = Some(u32::try_from(varint(&mut b)?).ok()?);
                }
                _ => return None,
            }
        }
        Some(View {
            domain: domain.unwrap_or_default(),
            hits_addend: hits_addend.unwrap_or_default(),
            descriptors,
        })
    }

    /// Prost's decoded message, borrowed.
    pub(crate) fn of(request: &'a RateLimitRequest) -> View<'a> {
        View {
            domain: &request.domain,
            hits_addend: request.hits_addend,
            descriptors: request
                .descriptors
                .iter()
                .map(|d| Described {
                    entries: d
                        .entries
                        .iter()
                        .map(|e| (e.key.as_str(), e.value.as_str()))
                        .collect(),
                    limit: d.limit,
                    hits_addend: d.hits_addend.as_ref().map(|h| h.value),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
    use envoy_types::pb::google::protobuf::UInt64Value;
    use proptest::prelude::*;
    use prost::Message;

    use super::*;

    fn request() -> impl Strategy<Value = RateLimitRequest> {
        let entry = ("[a-z_]{0,6}", "\\PC{0,8}").prop_map(|(key, value)| Entry { key, value });
        let descriptor = (
            proptest::collection::vec(entry, 0..4),
            proptest::option::of(any::<u64>()),
        )
            .prop_map(|(entries, hits)| RateLimitDescriptor {
                entries,
                hits_addend: hits.map(|value| UInt64Value { value }),
                ..Default::default()
            });
        (
            "[a-z]{0,5}",
            proptest::collection::vec(descriptor, 0..4),
            any::<u32>(),
        )
            .prop_map(|(domain, descriptors, hits_addend)| RateLimitRequest {
                domain,
                descriptors,
                hits_addend,
            })
    }

    proptest! {
        /// Every message prost writes of the fields read here reads as
        /// prost's decoded message does.
        #[test]
        fn reads_what_prost_writes_as_prost_reads_it(r in request()) {
            let bytes = r.encode_to_vec();
            prop_assert_eq!(View::parse(&bytes), Some(View::of(&r)));
        }

        /// Whatever bytes it is given, what it reads is what prost reads.
        #[test]
        fn reads_nothing_prost_reads_otherwise(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let decoded = RateLimitRequest::decode(bytes.as_slice());
            let read = View::parse(&bytes);
            if read.is_some() {
                prop_assert!(decoded.is_ok(), "{:?}", decoded);
            }
            if let (Some(view), Ok(decoded)) = (read, &decoded) {
                prop_assert_eq!(view, View::of(decoded));
            }
        }
    }

    #[test]
    fn leaves_to_prost_what_it_does_not_read() {
        let limited = RateLimitRequest {
            domain: "d".into(),
            descriptors: vec![RateLimitDescriptor {
                limit: Some(RateLimitOverride {
                    requests_per_unit: 3,
                    unit: 1,
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let negative = RateLimitRequest {
            descriptors: vec![RateLimitDescriptor {
                is_negative_hits: true,
                ..Default::default()
            }],
            ..Default::default()
        };
        for r in [limited, negative] {
            assert_eq!(View::parse(&r.encode_to_vec()), None, "{r:?}");
        }
        // A field twice (prost keeps the last), an unknown field, a
        // `uint32` over 32 bits (prost truncates), bad UTF-8.
        for bytes in [
            &b"\x0a\x01a\x0a\x01b"[..],
            b"\x20\x01",
            b"\x18\x80\x80\x80\x80\x10",
            b"\x0a\x01\xff",
        ] {
            assert_eq!(View::parse(bytes), None, "{bytes:?}");
        }
    }
}

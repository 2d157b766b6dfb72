//! The native service's `RateLimitResponse` written straight into its
//! gRPC frame from the decisions, without prost's owned message (its
//! `String`s and `Vec`s): the same bytes prost writes for the message
//! `grpc.rs` builds from the same decisions (`rls_answer.rs`), field by
//! field in prost's order (by field number), zero values left out as proto3 does. The
//! general path's message and this are held to the same bytes by
//! `grpc.rs`'s tests.

use bytes::{BufMut, Bytes, BytesMut};
use tollgate::{Decision, Policy};
use tollgate_tower::headers::{QuotaItem, RATELIMIT, RATELIMIT_POLICY};

use crate::rls_answer::{code, limit_remaining, requests_per_unit, unit, until};

const VARINT: u64 = 0;
const LEN: u64 = 2;

/// The frame header: the compressed flag and the length.
const HEADER: usize = 5;

fn varint(buf: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        buf.put_u8(v as u8 | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// A varint field, left out when zero.
fn number(buf: &mut BytesMut, field: u64, v: u64) {
    if v != 0 {
        varint(buf, field << 3 | VARINT);
        varint(buf, v);
    }
}

/// A length-delimited field written by `write`: its length put in front
/// once known (one byte kept for it, moved along when it needs more).
fn nested(buf: &mut BytesMut, field: u64, write: impl FnOnce(&mut BytesMut)) {
    varint(buf, field << 3 | LEN);
    let at = buf.len();
    buf.put_u8(0);
    write(buf);
    let len = buf.len() - at - 1;
    let width = varint_len(len as u64);
    if width > 1 {
        buf.put_bytes(0, width - 1);
        buf.copy_within(at + 1..at + 1 + len, at + width);
    }
    let mut len = len as u64;
    for byte in &mut buf[at..at + width] {
        *byte = len as u8 & 0x7f | if len >= 0x80 { 0x80 } else { 0 };
        len >>= 7;
    }
}

/// A string field, left out when empty.
fn string(buf: &mut BytesMut, field: u64, s: &str) {
    if !s.is_empty() {
        varint(buf, field << 3 | LEN);
        varint(buf, s.len() as u64);
        buf.put_slice(s.as_bytes());
    }
}

/// What the header values are written through.
struct Text<'b>(&'b mut BytesMut);

impl std::fmt::Write for Text<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.put_slice(s.as_bytes());
        Ok(())
    }
}

/// A `DescriptorStatus` of a decided descriptor (`rls_answer::descriptor_status`).
fn status(buf: &mut BytesMut, policy: &Policy, d: &Decision) {
    number(buf, 1, code(d) as u64);
    nested(buf, 2, |buf| {
        number(buf, 1, u64::from(requests_per_unit(policy)));
        number(buf, 2, unit(policy) as u64);
        string(buf, 3, policy.name());
    });
    number(buf, 3, u64::from(limit_remaining(d)));
    let until = until(d);
    nested(buf, 4, |buf| {
        number(buf, 1, until.as_secs());
        number(buf, 2, u64::from(until.subsec_nanos()));
    });
}

/// An envoy `HeaderValue` whose value `value` writes.
fn header(
    buf: &mut BytesMut,
    name: &str,
    value: impl FnOnce(&mut Text<'_>) -> std::fmt::Result,
) -> std::fmt::Result {
    let mut result = Ok(());
    nested(buf, 3, |buf| {
        string(buf, 1, name);
        nested(buf, 2, |buf| result = value(&mut Text(buf)));
    });
    result
}

/// The framed `RateLimitResponse` of `slots` (each descriptor's policy
/// and decision; `None` matched no table): the overall code, each
/// status, and the IETF fields of the decided ones as
/// `response_headers_to_add` (`rls_answer::envoy_headers`).
pub(crate) fn framed<'p>(slots: &[Option<(&'p Policy, &'p Decision)>]) -> Bytes {
    let mut buf = BytesMut::with_capacity(256);
    buf.put_bytes(0, HEADER);
    let over = slots.iter().flatten().any(|(_, d)| !d.allowed);
    number(&mut buf, 1, if over { 2 } else { 1 });
    for slot in slots {
        nested(&mut buf, 2, |buf| match slot {
            Some((p, d)) => status(buf, p, d),
            None => number(buf, 1, 1),
        });
    }
    let items = || slots.iter().flatten().map(|(p, d)| QuotaItem::of(p, d));
    if items().next().is_some() {
        let each = |out: &mut Text<'_>, write: fn(&QuotaItem<'_>, &mut Text<'_>) -> _| {
            for (i, item) in items().enumerate() {
                if i > 0 {
                    std::fmt::Write::write_str(out, ", ")?;
                }
                write(&item, out)?;
            }
            Ok(())
        };
        // Writing to a buffer cannot fail.
        let _ = header(&mut buf, RATELIMIT_POLICY.as_str(), |out| {
            each(out, |i, o| i.write_policy(o))
        });
        let _ = header(&mut buf, RATELIMIT.as_str(), |out| {
            each(out, |i, o| i.write_limit(o))
        });
    }
    let len = (buf.len() - HEADER) as u32;
    buf[1..HEADER].copy_from_slice(&len.to_be_bytes());
    buf.freeze()
}

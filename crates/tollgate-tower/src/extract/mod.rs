//! Ready-made [`KeyExtractor`](crate::KeyExtractor)s.
//!
//! | extractor | key | when absent |
//! |---|---|---|
//! | [`Global`] | one key for every request | — |
//! | [`PeerIp`] | the connection's peer address (IPv6 grouped by /64) | setup error (`500`) |
//! | [`Header`] | a header's value | limit skipped |
//! | [`Principal`] | a value your authentication put in the request's extensions | limit skipped |
//! | [`ForwardedFor`] | the client address written by your own proxies (opt-in, spoofable) | peer address |
//! | [`from_fn`] | whatever a closure returns | limit skipped on `None` |

mod forwarded;
mod from_fn;
mod global;
mod header;
mod ip;
mod peer_ip;
mod principal;

pub use forwarded::ForwardedFor;
pub use from_fn::{FromFn, from_fn};
pub use global::Global;
pub use header::Header;
pub use peer_ip::PeerIp;
pub use principal::Principal;

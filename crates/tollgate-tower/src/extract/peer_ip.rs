//! The connection's peer address.

use std::net::SocketAddr;

use http::request::Parts;

use super::ip::{DEFAULT_IPV6_PREFIX, ip_key, validate_ipv6_prefix};
use crate::{Key, KeyError, KeyExtractor};

/// Counts requests by the address of the connection they came on.
///
/// The address is read from the request's extensions, where the server
/// puts it: axum's `ConnectInfo<SocketAddr>` (serve the app with
/// `into_make_service_with_connect_info::<SocketAddr>()`, or add axum's
/// `MockConnectInfo` layer in tests; feature `axum`, on by default), tonic's `TcpConnectInfo` (feature `tonic`), or a plain
/// `SocketAddr` a hyper service inserts itself. A request with none of them
/// is answered `500` and the mistake is logged: without an address, a
/// per-address limit cannot work, and silently skipping it would leave the
/// service unprotected.
///
/// IPv6 clients are grouped by their /64 (configurable), since one host
/// can pick any address in its /64.
///
/// Behind a reverse proxy every request has the proxy's address: see
/// [`ForwardedFor`](super::ForwardedFor).
#[derive(Debug, Clone, Copy)]
pub struct PeerIp {
    ipv6_prefix: u8,
}

impl PeerIp {
    /// Keys requests by peer address, IPv6 addresses by their /64.
    pub fn new() -> PeerIp {
        PeerIp {
            ipv6_prefix: DEFAULT_IPV6_PREFIX,
        }
    }

    /// Groups IPv6 addresses by their first `bits` bits (1 to 128; 128 keys
    /// each address alone).
    pub fn ipv6_prefix(self, bits: u8) -> tollgate::Result<PeerIp> {
        Ok(PeerIp {
            ipv6_prefix: validate_ipv6_prefix(bits)?,
        })
    }

    pub(crate) fn ipv6_prefix_bits(&self) -> u8 {
        self.ipv6_prefix
    }
}

impl Default for PeerIp {
    fn default() -> Self {
        PeerIp::new()
    }
}

/// The peer address the server recorded in the request's extensions.
pub(crate) fn peer_addr(request: &Parts) -> Option<SocketAddr> {
    #[cfg(feature = "axum")]
    if let Some(info) = request
        .extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
    {
        return Some(info.0);
    }
    // What axum's own tests use in place of a connection.
    #[cfg(feature = "axum")]
    if let Some(info) = request
        .extensions
        .get::<axum::extract::connect_info::MockConnectInfo<SocketAddr>>()
    {
        return Some(info.0);
    }
    #[cfg(feature = "tonic")]
    if let Some(addr) = request
        .extensions
        .get::<tonic::transport::server::TcpConnectInfo>()
        .and_then(|info| info.remote_addr())
    {
        return Some(addr);
    }
    request.extensions.get::<SocketAddr>().copied()
}

pub(crate) const NO_PEER_ADDRESS: &str = "PeerIp found no peer address in the request's extensions: \
serve an axum app with `into_make_service_with_connect_info::<SocketAddr>()`, \
or insert the connection's `SocketAddr` into each request";

impl KeyExtractor for PeerIp {
    fn extract(&self, request: &Parts) -> Result<Option<Key>, KeyError> {
        match peer_addr(request) {
            Some(addr) => Ok(Some(ip_key(addr.ip(), self.ipv6_prefix))),
            None => Err(KeyError::new(NO_PEER_ADDRESS)),
        }
    }
}

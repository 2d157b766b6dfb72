//! The `[server]` table: where the service listens, who may ask it, and
//! how long and how many connections it keeps.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use tollgate::parse_duration;

use serde::Deserialize;
use toml::Spanned;

use super::span::SpannedError;
use crate::grpc_tls::{GrpcTls, TlsFile};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    listen: Option<Spanned<String>>,
    grpc_listen: Option<Spanned<String>>,
    token: Option<Spanned<String>>,
    token_file: Option<Spanned<String>>,
    admin_token: Option<Spanned<String>>,
    admin_token_file: Option<Spanned<String>>,
    grpc_tls_cert: Option<Spanned<String>>,
    grpc_tls_key: Option<Spanned<String>>,
    grpc_tls_client_ca: Option<Spanned<String>>,
    max_connections: Option<Spanned<i64>>,
    header_timeout: Option<Spanned<String>>,
    body_timeout: Option<Spanned<String>>,
    idle_timeout: Option<Spanned<String>>,
    http2_keepalive_interval: Option<Spanned<String>>,
    http2_keepalive_timeout: Option<Spanned<String>>,
}

/// Where the service listens and who may ask it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ServerSettings {
    pub(crate) listen: Option<SocketAddr>,
    pub(crate) grpc_listen: Option<SocketAddr>,
    pub(crate) token: Option<String>,
    /// The token the routes that change limits or state want (overrides,
    /// `DELETE /v1/keys/...`); without it, `token` guards them too.
    pub(crate) admin_token: Option<String>,
    /// TLS on the gRPC server: its certificate chain and key (PEM), and
    /// the CA that signs client certificates for mutual TLS; paths
    /// relative to the config file. Read when the service starts.
    pub(crate) grpc_tls_cert: Option<TlsFile>,
    pub(crate) grpc_tls_key: Option<TlsFile>,
    pub(crate) grpc_tls_client_ca: Option<TlsFile>,
    /// Timeouts and the connection cap, on every listener.
    pub(crate) connections: ConnectionLimits,
}

/// How long a connection may take, and how many a listener keeps: the
/// same on the HTTP listener and the gRPC one (in ERL mode too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnectionLimits {
    /// Open connections per listener; one more is closed as soon as it is
    /// accepted (and a warning logged, at most every 10 s).
    pub(crate) max_connections: usize,
    /// HTTP/1: from when the service waits for a request's head until the
    /// whole head is read (a kept-alive connection's wait for its next
    /// request included).
    pub(crate) header_timeout: Duration,
    /// From a request's head until its whole body is read (HTTP/1 and
    /// HTTP/2); on gRPC, the most a call may take.
    pub(crate) body_timeout: Duration,
    /// A connection on which no byte moves either way for this long is
    /// closed.
    pub(crate) idle_timeout: Duration,
    /// HTTP/2 (and gRPC): how often the service pings a connection...
    pub(crate) http2_keepalive_interval: Duration,
    /// ...and how long it waits for the answer before closing it.
    pub(crate) http2_keepalive_timeout: Duration,
}

impl ConnectionLimits {
    /// The most `max_connections` may be.
    pub(crate) const MAX_CONNECTIONS: i64 = 1_000_000;
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 1024,
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            http2_keepalive_interval: Duration::from_secs(30),
            http2_keepalive_timeout: Duration::from_secs(20),
        }
    }
}

/// Reads the connection fields of `[server]` over the defaults.
fn connection_limits(raw: &mut RawServer) -> Result<ConnectionLimits, SpannedError> {
    let mut limits = ConnectionLimits::default();
    if let Some(n) = raw.max_connections.take() {
        let max = ConnectionLimits::MAX_CONNECTIONS;
        if !(1..=max).contains(n.get_ref()) {
            return Err((
                n.span(),
                format!(
                    "[server] `max_connections` must be from 1 to {max}, got {}",
                    n.get_ref()
                ),
            ));
        }
        limits.max_connections = *n.get_ref() as usize;
    }
    for (value, field, slot) in [
        (
            raw.header_timeout.take(),
            "header_timeout",
            &mut limits.header_timeout,
        ),
        (
            raw.body_timeout.take(),
            "body_timeout",
            &mut limits.body_timeout,
        ),
        (
            raw.idle_timeout.take(),
            "idle_timeout",
            &mut limits.idle_timeout,
        ),
        (
            raw.http2_keepalive_interval.take(),
            "http2_keepalive_interval",
            &mut limits.http2_keepalive_interval,
        ),
        (
            raw.http2_keepalive_timeout.take(),
            "http2_keepalive_timeout",
            &mut limits.http2_keepalive_timeout,
        ),
    ] {
        if let Some(v) = value {
            *slot = positive_duration(v.get_ref(), field).map_err(|e| (v.span(), e))?;
        }
    }
    Ok(limits)
}

/// A duration above zero (`"30s"`), or an error naming `field`.
pub(crate) fn positive_duration(text: &str, field: &str) -> Result<Duration, String> {
    match parse_duration(text) {
        Ok(d) if d.is_zero() => Err(format!("[server] `{field}` must be more than 0")),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("[server] `{field}`: {e}")),
    }
}

impl ServerSettings {
    /// The gRPC server's TLS, once the file and the command line are put
    /// together: a certificate and a key, or neither; a client CA only
    /// with them; and only with a gRPC address to serve.
    pub(crate) fn grpc_tls(&self) -> Result<Option<GrpcTls>, String> {
        let parts = [
            &self.grpc_tls_cert,
            &self.grpc_tls_key,
            &self.grpc_tls_client_ca,
        ];
        let Some(tls) = GrpcTls::from_parts(parts, " under [server]")? else {
            return Ok(None);
        };
        if self.grpc_listen.is_none() {
            return Err(format!(
                "{} needs a gRPC server: --grpc-listen (or `grpc_listen` under [server])",
                tls.cert.named_by
            ));
        }
        Ok(Some(tls))
    }
}

fn address(
    value: Option<Spanned<String>>,
    field: &str,
) -> Result<Option<SocketAddr>, SpannedError> {
    match value {
        Some(v) => Ok(Some(v.get_ref().parse::<SocketAddr>().map_err(|e| {
            (
                v.span(),
                format!("[server] `{field}`: {e}: {:?} (expected an address such as \"127.0.0.1:8080\")", v.get_ref()),
            )
        })?)),
        None => Ok(None),
    }
}

pub(super) fn server_settings(
    mut raw: RawServer,
    file: &str,
) -> Result<ServerSettings, SpannedError> {
    let connections = connection_limits(&mut raw)?;
    let grpc_listen = address(raw.grpc_listen, "grpc_listen")?;
    let listen = address(raw.listen, "listen")?;
    let token = secret(raw.token, raw.token_file, "token", file)?;
    let admin_token = secret(raw.admin_token, raw.admin_token_file, "admin_token", file)?;
    let tls_file = |value: Option<Spanned<String>>, field: &str| {
        value.map(|v| TlsFile::new(beside(file, v.get_ref()), format!("[server] `{field}`")))
    };
    Ok(ServerSettings {
        listen,
        grpc_listen,
        token,
        admin_token,
        grpc_tls_cert: tls_file(raw.grpc_tls_cert, "grpc_tls_cert"),
        grpc_tls_key: tls_file(raw.grpc_tls_key, "grpc_tls_key"),
        grpc_tls_client_ca: tls_file(raw.grpc_tls_client_ca, "grpc_tls_client_ca"),
        connections,
    })
}

/// A path named in the config file: relative ones are relative to it.
/// A bearer token, given in the file (`field`) or in a file of its own
/// (`field_file`, relative to the config file, trimmed): never empty.
fn secret(
    value: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
    field: &str,
    file: &str,
) -> Result<Option<String>, SpannedError> {
    match (value, path) {
        (Some(t), Some(f)) => {
            let span = t.span().start.min(f.span().start)..t.span().end.max(f.span().end);
            Err((
                span,
                format!("[server] `{field}` and `{field}_file` exclude each other"),
            ))
        }
        (Some(t), None) if t.get_ref().is_empty() => {
            Err((t.span(), format!("[server] `{field}` must not be empty")))
        }
        (Some(t), None) => Ok(Some(t.into_inner())),
        (None, Some(f)) => {
            let path = beside(file, f.get_ref());
            let token =
                super::bounded::read_text(&path, super::bounded::MAX_CONFIG_BYTES, "token files")
                    .map_err(|e| {
                        (
                            f.span(),
                            format!("[server] `{field}_file` {}: {}", path.display(), e.message),
                        )
                    })?
                    .trim()
                    .to_string();
            if token.is_empty() {
                return Err((
                    f.span(),
                    format!("[server] `{field}_file` {} is empty", path.display()),
                ));
            }
            Ok(Some(token))
        }
        (None, None) => Ok(None),
    }
}

fn beside(file: &str, path: &str) -> std::path::PathBuf {
    Path::new(file)
        .parent()
        .unwrap_or(Path::new("."))
        .join(path)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::ConnectionLimits;
    use crate::config::Config;

    const POLICY: &str =
        "[[policy]]\nname = \"p\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1s\"\n";

    fn limits(server: &str) -> Result<ConnectionLimits, String> {
        Config::parse("t.toml", &format!("[server]\n{server}\n{POLICY}"))
            .map(|c| c.server.connections)
            .map_err(|e| e.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn connection_limits_have_defaults_and_read_every_field() {
        assert_eq!(limits(""), Ok(ConnectionLimits::default()));
        let all = limits(
            "max_connections = 7\nheader_timeout = \"1s\"\nbody_timeout = \"2s\"\nidle_timeout = \"3s\"\nhttp2_keepalive_interval = \"4s\"\nhttp2_keepalive_timeout = \"5s\"",
        )
        .unwrap();
        let s = Duration::from_secs;
        assert_eq!(
            all,
            ConnectionLimits {
                max_connections: 7,
                header_timeout: s(1),
                body_timeout: s(2),
                idle_timeout: s(3),
                http2_keepalive_interval: s(4),
                http2_keepalive_timeout: s(5),
            }
        );
    }

    #[test]
    fn the_admin_token_is_read_and_checked_like_the_token() {
        let config = |server: &str| {
            Config::parse("t.toml", &format!("[server]\n{server}\n{POLICY}"))
                .map(|c| (c.server.token, c.server.admin_token))
                .map_err(|e| e.iter().map(ToString::to_string).collect::<String>())
        };
        assert_eq!(
            config("token = \"d\"\nadmin_token = \"a\""),
            Ok((Some("d".into()), Some("a".into())))
        );
        let e = config("admin_token = \"\"").unwrap_err();
        assert!(
            e.contains("t.toml:2:") && e.contains("`admin_token` must not be empty"),
            "{e}"
        );
        let e = config("admin_token = \"a\"\nadmin_token_file = \"f\"").unwrap_err();
        assert!(
            e.contains("`admin_token` and `admin_token_file` exclude each other"),
            "{e}"
        );
        let e = config("admin_token_file = \"no-such-file\"").unwrap_err();
        assert!(
            e.contains("t.toml:2:") && e.contains("`admin_token_file`"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_limit_names_its_field_and_line() {
        for (field, value, needle) in [
            ("max_connections", "0", "from 1 to 1000000, got 0"),
            ("max_connections", "-3", "got -3"),
            ("header_timeout", "\"0s\"", "more than 0"),
            ("body_timeout", "\"soon\"", "`body_timeout`"),
            ("idle_timeout", "\"0ms\"", "more than 0"),
            (
                "http2_keepalive_timeout",
                "\"5\"",
                "`http2_keepalive_timeout`",
            ),
        ] {
            let e = limits(&format!("{field} = {value}")).unwrap_err();
            assert!(
                e.contains(needle) && e.contains("t.toml:2:"),
                "{field} = {value}: {e}"
            );
        }
    }
}

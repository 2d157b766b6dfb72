//! The `[server]` table: where the service listens and who may ask it.

use std::net::SocketAddr;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::SpannedError;
use crate::grpc_tls::{GrpcTls, TlsFile};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    listen: Option<Spanned<String>>,
    grpc_listen: Option<Spanned<String>>,
    token: Option<Spanned<String>>,
    token_file: Option<Spanned<String>>,
    grpc_tls_cert: Option<Spanned<String>>,
    grpc_tls_key: Option<Spanned<String>>,
    grpc_tls_client_ca: Option<Spanned<String>>,
}

/// Where the service listens and who may ask it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ServerSettings {
    pub(crate) listen: Option<SocketAddr>,
    pub(crate) grpc_listen: Option<SocketAddr>,
    pub(crate) token: Option<String>,
    /// TLS on the gRPC server: its certificate chain and key (PEM), and
    /// the CA that signs client certificates for mutual TLS; paths
    /// relative to the config file. Read when the service starts.
    pub(crate) grpc_tls_cert: Option<TlsFile>,
    pub(crate) grpc_tls_key: Option<TlsFile>,
    pub(crate) grpc_tls_client_ca: Option<TlsFile>,
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

pub(super) fn server_settings(raw: RawServer, file: &str) -> Result<ServerSettings, SpannedError> {
    let grpc_listen = address(raw.grpc_listen, "grpc_listen")?;
    let listen = address(raw.listen, "listen")?;
    let token = match (raw.token, raw.token_file) {
        (Some(t), Some(f)) => {
            let span = t.span().start.min(f.span().start)..f.span().end;
            return Err((
                span,
                "[server] `token` and `token_file` exclude each other".into(),
            ));
        }
        (Some(t), None) if t.get_ref().is_empty() => {
            return Err((t.span(), "[server] `token` must not be empty".into()));
        }
        (Some(t), None) => Some(t.into_inner()),
        (None, Some(f)) => {
            let path = beside(file, f.get_ref());
            let token = std::fs::read_to_string(&path)
                .map_err(|e| {
                    (
                        f.span(),
                        format!("[server] `token_file` {}: {e}", path.display()),
                    )
                })?
                .trim()
                .to_string();
            if token.is_empty() {
                return Err((
                    f.span(),
                    format!("[server] `token_file` {} is empty", path.display()),
                ));
            }
            Some(token)
        }
        (None, None) => None,
    };
    let tls_file = |value: Option<Spanned<String>>, field: &str| {
        value.map(|v| TlsFile::new(beside(file, v.get_ref()), format!("[server] `{field}`")))
    };
    Ok(ServerSettings {
        listen,
        grpc_listen,
        token,
        grpc_tls_cert: tls_file(raw.grpc_tls_cert, "grpc_tls_cert"),
        grpc_tls_key: tls_file(raw.grpc_tls_key, "grpc_tls_key"),
        grpc_tls_client_ca: tls_file(raw.grpc_tls_client_ca, "grpc_tls_client_ca"),
    })
}

/// A path named in the config file: relative ones are relative to it.
fn beside(file: &str, path: &str) -> std::path::PathBuf {
    Path::new(file)
        .parent()
        .unwrap_or(Path::new("."))
        .join(path)
}

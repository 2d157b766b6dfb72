//! The `[server]` table: where the service listens and who may ask it.

use std::net::SocketAddr;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::SpannedError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    listen: Option<Spanned<String>>,
    grpc_listen: Option<Spanned<String>>,
    token: Option<Spanned<String>>,
    token_file: Option<Spanned<String>>,
}

/// Where the service listens and who may ask it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ServerSettings {
    pub(crate) listen: Option<SocketAddr>,
    pub(crate) grpc_listen: Option<SocketAddr>,
    pub(crate) token: Option<String>,
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
            // A relative token file is relative to the config file.
            let path = Path::new(file)
                .parent()
                .unwrap_or(Path::new("."))
                .join(f.get_ref());
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
    Ok(ServerSettings {
        listen,
        grpc_listen,
        token,
    })
}

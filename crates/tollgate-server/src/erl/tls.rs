//! TLS on ERL mode's gRPC server, as ERL sets it up
//! (`GRPC_SERVER_USE_TLS`, `GRPC_SERVER_TLS_CERT`, `GRPC_SERVER_TLS_KEY`,
//! and `GRPC_CLIENT_TLS_CACERT` for mutual TLS: a client must then show a
//! certificate that CA signed, or the handshake fails).

use std::path::{Path, PathBuf};

use tonic::transport::{Certificate, Identity, ServerTlsConfig};

/// Where the server's certificate chain and key are, and the client CA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GrpcTls {
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
    /// Present: mutual TLS, clients need a certificate this CA signed.
    pub(crate) client_ca: Option<PathBuf>,
}

fn read(what: &str, path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{what} {}: {e}", path.display()))
}

impl GrpcTls {
    /// The server's TLS configuration, the files read now; an error names
    /// the variable and the file.
    pub(crate) fn server_config(&self) -> Result<ServerTlsConfig, String> {
        let cert = read("GRPC_SERVER_TLS_CERT", &self.cert)?;
        let key = read("GRPC_SERVER_TLS_KEY", &self.key)?;
        let mut config = ServerTlsConfig::new().identity(Identity::from_pem(cert, key));
        if let Some(ca) = &self.client_ca {
            let ca = read("GRPC_CLIENT_TLS_CACERT", ca)?;
            config = config.client_ca_root(Certificate::from_pem(ca));
        }
        Ok(config)
    }
}

//! TLS on the gRPC server, in both modes: `tollgate serve --grpc-tls-cert`,
//! `--grpc-tls-key` and `--grpc-tls-client-ca` (or `[server]`'s
//! `grpc_tls_cert`, `grpc_tls_key`, `grpc_tls_client_ca`), and in ERL mode
//! ERL's `GRPC_SERVER_USE_TLS` with `GRPC_SERVER_TLS_CERT`,
//! `GRPC_SERVER_TLS_KEY` and `GRPC_CLIENT_TLS_CACERT`. With a client CA
//! the TLS is mutual: a client must show a certificate that CA signed, or
//! the handshake fails.
//!
//! The files are read, and their PEM checked, at start; an error names
//! where the file was given (the flag, the field or the variable) and its
//! path.

use std::path::PathBuf;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};

/// A PEM file, and where it was named (`--grpc-tls-cert`,
/// ``[server] `grpc_tls_cert` ``, `GRPC_SERVER_TLS_CERT`), for errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsFile {
    pub(crate) path: PathBuf,
    pub(crate) named_by: String,
}

impl TlsFile {
    pub(crate) fn new(path: impl Into<PathBuf>, named_by: impl Into<String>) -> TlsFile {
        TlsFile {
            path: path.into(),
            named_by: named_by.into(),
        }
    }

    /// The file's bytes, once `check` finds in them what it should.
    fn read(&self, check: fn(&[u8]) -> Result<(), String>) -> Result<Vec<u8>, String> {
        let bytes = std::fs::read(&self.path)
            .map_err(|e| format!("{} {}: {e}", self.named_by, self.path.display()))?;
        check(&bytes).map_err(|e| format!("{} {}: {e}", self.named_by, self.path.display()))?;
        Ok(bytes)
    }
}

/// The server's certificate chain and key, and the client CA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GrpcTls {
    pub(crate) cert: TlsFile,
    pub(crate) key: TlsFile,
    /// Present: mutual TLS, clients need a certificate this CA signed.
    pub(crate) client_ca: Option<TlsFile>,
}

fn certificates(pem: &[u8]) -> Result<(), String> {
    let mut n = 0;
    for cert in CertificateDer::pem_slice_iter(pem) {
        cert.map_err(|e| format!("not a PEM certificate: {e}"))?;
        n += 1;
    }
    if n == 0 {
        return Err("no PEM certificate in it".to_string());
    }
    Ok(())
}

fn private_key(pem: &[u8]) -> Result<(), String> {
    PrivateKeyDer::from_pem_slice(pem)
        .map(drop)
        .map_err(|e| format!("no PEM private key in it: {e}"))
}

impl GrpcTls {
    /// The TLS the flags (and fields) `--grpc-tls-cert`, `--grpc-tls-key`
    /// and `--grpc-tls-client-ca` give: a certificate and a key, or
    /// neither; a client CA only with them. `fields` is where the same
    /// fields may be given instead (` under [server]`), or empty.
    pub(crate) fn from_parts(
        [cert, key, ca]: [&Option<TlsFile>; 3],
        fields: &str,
    ) -> Result<Option<GrpcTls>, String> {
        let or = |field: &str| {
            if fields.is_empty() {
                String::new()
            } else {
                format!(" (or `{field}`{fields})")
            }
        };
        let key_hint = format!("--grpc-tls-key{}", or("grpc_tls_key"));
        let cert_hint = format!("--grpc-tls-cert{}", or("grpc_tls_cert"));
        match (cert, key, ca) {
            (None, None, None) => Ok(None),
            (Some(cert), Some(key), ca) => Ok(Some(GrpcTls {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: ca.clone(),
            })),
            (Some(cert), None, _) => Err(format!("{} needs {key_hint}", cert.named_by)),
            (None, Some(key), _) => Err(format!("{} needs {cert_hint}", key.named_by)),
            (None, None, Some(ca)) => {
                Err(format!("{} needs {cert_hint} and {key_hint}", ca.named_by))
            }
        }
    }

    /// The server's TLS configuration, the files read and checked now.
    pub(crate) fn server_config(&self) -> Result<ServerTlsConfig, String> {
        let cert = self.cert.read(certificates)?;
        let key = self.key.read(private_key)?;
        let mut config = ServerTlsConfig::new().identity(Identity::from_pem(cert, key));
        if let Some(ca) = &self.client_ca {
            config = config.client_ca_root(Certificate::from_pem(ca.read(certificates)?));
        }
        Ok(config)
    }

    /// `server` with this TLS; an error names the files when the
    /// certificate and key do not make a whole.
    pub(crate) fn apply(&self, server: Server) -> Result<Server, String> {
        let config = self.server_config()?;
        server.tls_config(config).map_err(|e| {
            let cause = std::error::Error::source(&e).map_or(e.to_string(), |s| s.to_string());
            format!(
                "{} {} with {} {}: {cause}",
                self.cert.named_by,
                self.cert.path.display(),
                self.key.named_by,
                self.key.path.display()
            )
        })
    }
}

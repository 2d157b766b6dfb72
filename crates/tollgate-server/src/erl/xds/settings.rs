//! ERL's environment for its xDS config source (`src/settings/settings.go`):
//! `CONFIG_TYPE=GRPC_XDS_SOTW` turns it on.
//!
//! Honoured: `CONFIG_GRPC_XDS_SERVER_URL` (`host:port`, default
//! `localhost:18000`), `CONFIG_GRPC_XDS_NODE_ID` (`default`),
//! `CONFIG_GRPC_XDS_NODE_METADATA` (`k1=v1,k2=v2`, string values),
//! `CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS` (`k1:v1,k2:v2`, sent with the
//! stream), `CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL` (3s: the wait
//! after a failed connection), `XDS_CLIENT_BACKOFF_INITIAL_INTERVAL` (10s)
//! and `XDS_CLIENT_BACKOFF_MAX_INTERVAL` (60s): the wait after a stream that
//! was lost, doubled at each loss up to the maximum, jittered by half,
//! reset once the server answers. Durations are Go's (`500ms`, `3s`,
//! `1m30s`).
//!
//! TLS to the server: `CONFIG_GRPC_XDS_SERVER_USE_TLS=true`, the server
//! checked against `CONFIG_GRPC_XDS_SERVER_TLS_CACERT` (required: no system
//! roots) under the name `CONFIG_GRPC_XDS_SERVER_TLS_SAN` (default: the
//! URL's host), and a client certificate from
//! `CONFIG_GRPC_XDS_CLIENT_TLS_CERT` and `_KEY` when both are set, as an
//! mTLS server (Envoy Gateway's) asks. The files are read at start; one
//! that cannot be read stops it.
//!
//! Refused: any `CONFIG_TYPE` other than `FILE` and `GRPC_XDS_SOTW`.

use std::collections::HashMap;
use std::time::Duration;

use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue};
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

/// How to reach the xDS server and who to say we are.
#[derive(Debug, Clone)]
pub(crate) struct XdsSettings {
    /// The server's URI (`http://host:port`).
    pub(crate) server: String,
    pub(crate) node_id: String,
    pub(crate) node_metadata: Vec<(String, String)>,
    /// Sent as gRPC metadata on the stream.
    pub(crate) headers: Vec<(AsciiMetadataKey, AsciiMetadataValue)>,
    /// The wait after a connection that failed.
    pub(crate) connect_retry: Duration,
    /// The first wait after a lost stream.
    pub(crate) backoff_initial: Duration,
    /// The longest wait after lost streams.
    pub(crate) backoff_max: Duration,
    /// TLS to the server, when on (the server URI is then `https://`).
    pub(crate) tls: Option<ClientTlsConfig>,
}

impl XdsSettings {
    /// The defaults ERL has, for a server at `server` (`host:port`).
    pub(crate) fn new(server: &str) -> XdsSettings {
        XdsSettings {
            server: uri(server),
            node_id: "default".to_string(),
            node_metadata: Vec::new(),
            headers: Vec::new(),
            connect_retry: Duration::from_secs(3),
            backoff_initial: Duration::from_secs(10),
            backoff_max: Duration::from_secs(60),
            tls: None,
        }
    }
}

fn uri(server: &str) -> String {
    if server.contains("://") {
        server.to_string()
    } else {
        format!("http://{server}")
    }
}

/// `None` when the config comes from files (`CONFIG_TYPE` unset or
/// `FILE`); every error found otherwise.
pub(crate) fn read(vars: &HashMap<String, String>) -> Result<Option<XdsSettings>, Vec<String>> {
    let get = |name: &str| vars.get(name).map(String::as_str).filter(|v| !v.is_empty());
    match get("CONFIG_TYPE") {
        None => return Ok(None),
        Some(t) if t.eq_ignore_ascii_case("FILE") => return Ok(None),
        Some(t) if t.eq_ignore_ascii_case("GRPC_XDS_SOTW") => {}
        Some(t) => return Err(vec![format!("CONFIG_TYPE={t}: not FILE or GRPC_XDS_SOTW")]),
    }
    let mut errors = Vec::new();
    let mut s = XdsSettings::new(get("CONFIG_GRPC_XDS_SERVER_URL").unwrap_or("localhost:18000"));
    if let Some(id) = get("CONFIG_GRPC_XDS_NODE_ID") {
        s.node_id = id.to_string();
    }
    if get("CONFIG_GRPC_XDS_SERVER_USE_TLS")
        .is_some_and(|v| matches!(v, "1" | "t" | "T" | "TRUE" | "true" | "True"))
    {
        s.tls = tls(&get, &mut errors);
        s.server = s.server.replacen("http://", "https://", 1);
    }
    let name = "CONFIG_GRPC_XDS_NODE_METADATA";
    for (k, v) in pairs(get(name), '=', name, &mut errors) {
        s.node_metadata.push((k.to_string(), v.to_string()));
    }
    let name = "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS";
    for (k, v) in pairs(get(name), ':', name, &mut errors) {
        match (
            AsciiMetadataKey::from_bytes(k.to_ascii_lowercase().as_bytes()),
            AsciiMetadataValue::try_from(v),
        ) {
            (Ok(k), Ok(v)) => s.headers.push((k, v)),
            _ => errors.push(format!("{name}: '{k}:{v}' is not a valid header")),
        }
    }
    for (name, field) in [
        (
            "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
            &mut s.connect_retry,
        ),
        (
            "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
            &mut s.backoff_initial,
        ),
        ("XDS_CLIENT_BACKOFF_MAX_INTERVAL", &mut s.backoff_max),
    ] {
        if let Some(v) = get(name) {
            match go_duration(v) {
                Some(d) if !d.is_zero() => *field = d,
                _ => errors.push(format!("{name}={v}: not a duration such as 3s or 500ms")),
            }
        }
    }
    if errors.is_empty() {
        Ok(Some(s))
    } else {
        Err(errors)
    }
}

/// The client's TLS settings from the files the variables name.
fn tls<'v>(
    get: &dyn Fn(&str) -> Option<&'v str>,
    errors: &mut Vec<String>,
) -> Option<ClientTlsConfig> {
    let mut read = |name: &str| {
        let path = get(name)?;
        std::fs::read(path)
            .map_err(|e| errors.push(format!("{name}={path}: cannot read it: {e}")))
            .ok()
    };
    let ca = read("CONFIG_GRPC_XDS_SERVER_TLS_CACERT");
    let cert = read("CONFIG_GRPC_XDS_CLIENT_TLS_CERT");
    let key = read("CONFIG_GRPC_XDS_CLIENT_TLS_KEY");
    let Some(ca) = ca else {
        errors.push("CONFIG_GRPC_XDS_SERVER_USE_TLS=true needs CONFIG_GRPC_XDS_SERVER_TLS_CACERT, the CA of the xDS server's certificate".to_string());
        return None;
    };
    let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca));
    match (cert, key) {
        (Some(cert), Some(key)) => config = config.identity(Identity::from_pem(cert, key)),
        (None, None) => {}
        _ => errors.push(
            "CONFIG_GRPC_XDS_CLIENT_TLS_CERT and CONFIG_GRPC_XDS_CLIENT_TLS_KEY go together"
                .to_string(),
        ),
    }
    if let Some(san) = get("CONFIG_GRPC_XDS_SERVER_TLS_SAN") {
        config = config.domain_name(san);
    }
    Some(config)
}

/// `k1<sep>v1,k2<sep>v2`; an entry without the separator is an error.
fn pairs<'v>(
    value: Option<&'v str>,
    sep: char,
    name: &str,
    errors: &mut Vec<String>,
) -> Vec<(&'v str, &'v str)> {
    let mut out = Vec::new();
    for entry in value
        .unwrap_or("")
        .split(',')
        .filter(|e| !e.trim().is_empty())
    {
        match entry.split_once(sep) {
            Some((k, v)) if !k.trim().is_empty() => out.push((k.trim(), v.trim())),
            _ => errors.push(format!("{name}: '{entry}' is not key{sep}value")),
        }
    }
    out
}

/// A Go duration: numbers each followed by `h`, `m`, `s`, `ms`, `us` or `ns`.
fn go_duration(text: &str) -> Option<Duration> {
    let mut total = 0f64;
    let mut rest = text;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += number * scale;
        rest = &rest[unit_len..];
    }
    Some(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_vars(vars: &[(&str, &str)]) -> Result<Option<XdsSettings>, Vec<String>> {
        read(
            &vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn files_unless_grpc_xds_sotw() {
        assert!(read_vars(&[]).unwrap().is_none());
        assert!(read_vars(&[("CONFIG_TYPE", "FILE")]).unwrap().is_none());
        assert_eq!(
            read_vars(&[("CONFIG_TYPE", "GRPC_XDS_DELTA")]).unwrap_err(),
            ["CONFIG_TYPE=GRPC_XDS_DELTA: not FILE or GRPC_XDS_SOTW"]
        );
        let s = read_vars(&[("CONFIG_TYPE", "GRPC_XDS_SOTW")])
            .unwrap()
            .unwrap();
        assert_eq!(s.server, "http://localhost:18000");
        assert_eq!(s.node_id, "default");
        assert_eq!(s.connect_retry, Duration::from_secs(3));
        assert_eq!(s.backoff_initial, Duration::from_secs(10));
        assert_eq!(s.backoff_max, Duration::from_secs(60));
    }

    #[test]
    fn what_envoy_gateway_sets_is_honoured() {
        let s = read_vars(&[
            ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
            ("CONFIG_GRPC_XDS_SERVER_URL", "envoy-gateway:18001"),
            ("CONFIG_GRPC_XDS_NODE_ID", "eg-infra"),
            ("CONFIG_GRPC_XDS_NODE_METADATA", "zone=a,team=b"),
            ("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "X-Token:abc"),
            ("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "1m30s"),
            ("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "250ms"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(s.server, "http://envoy-gateway:18001");
        assert_eq!(s.node_id, "eg-infra");
        assert_eq!(
            s.node_metadata,
            [("zone".into(), "a".into()), ("team".into(), "b".into())]
        );
        assert_eq!(s.headers[0].0.as_str(), "x-token");
        assert_eq!(s.headers[0].1, "abc");
        assert_eq!(s.connect_retry, Duration::from_secs(90));
        assert_eq!(s.backoff_initial, Duration::from_millis(250));
    }

    #[test]
    fn bad_values_are_named() {
        let errors = read_vars(&[
            ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
            ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
            ("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "/nonexistent/cert.pem"),
            ("CONFIG_GRPC_XDS_NODE_METADATA", "zone"),
            ("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "3"),
            ("XDS_CLIENT_BACKOFF_MAX_INTERVAL", "1x"),
        ])
        .unwrap_err();
        assert_eq!(
            errors,
            [
                "CONFIG_GRPC_XDS_CLIENT_TLS_CERT=/nonexistent/cert.pem: cannot read it: No such file or directory (os error 2)",
                "CONFIG_GRPC_XDS_SERVER_USE_TLS=true needs CONFIG_GRPC_XDS_SERVER_TLS_CACERT, the CA of the xDS server's certificate",
                "CONFIG_GRPC_XDS_NODE_METADATA: 'zone' is not key=value",
                "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL=3: not a duration such as 3s or 500ms",
                "XDS_CLIENT_BACKOFF_MAX_INTERVAL=1x: not a duration such as 3s or 500ms",
            ]
        );
    }
}

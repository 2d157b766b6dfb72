//! ERL's environment (`src/settings/settings.go`), read by `tollgate serve`
//! in ERL mode so that switching is an image change.
//!
//! Honoured: the Redis variables `redis_env` reads (`REDIS_URL`,
//! `REDIS_SOCKET_TYPE`, `REDIS_TYPE` single, cluster or sentinel,
//! `REDIS_AUTH`, `REDIS_SENTINEL_AUTH`), `REDIS_TLS`,
//! `REDIS_TLS_SKIP_HOSTNAME_VERIFICATION`, `HOST`, `PORT`,
//! `GRPC_HOST`, `GRPC_PORT`, `RUNTIME_ROOT`, `RUNTIME_SUBDIRECTORY`,
//! `RUNTIME_APPDIRECTORY`, `RUNTIME_IGNOREDOTFILES`, `CACHE_KEY_PREFIX`,
//! `SHADOW_MODE`, `QUOTA_MODE`, `LIMIT_RESPONSE_HEADERS_ENABLED`,
//! `LIMIT_LIMIT_HEADER`, `LIMIT_REMAINING_HEADER`, `LIMIT_RESET_HEADER`,
//! `EXPIRATION_JITTER_MAX_SECONDS`, `NEAR_LIMIT_RATIO`, `BACKEND_TYPE`
//! (redis), `GRPC_SERVER_USE_TLS`, `GRPC_SERVER_TLS_CERT`,
//! `GRPC_SERVER_TLS_KEY`, `GRPC_CLIENT_TLS_CACERT`, `RESPONSE_DYNAMIC_METADATA`,
//! `LOCAL_CACHE_SIZE_IN_BYTES` (see `local_cache`). `CONFIG_TYPE` and the
//! xDS source's variables are read by `xds::read`.
//!
//! Refused (the service does not start) when set to what would change
//! behaviour tollgate does not have: see [`REFUSED`]. Everything else ERL
//! reads (log, stats sink, pool and pipeline tuning, the `REDIS_PERSECOND_*`
//! settings of the second Redis `REDIS_PERSECOND` would turn on) is about
//! ERL's own process, or unused, and is ignored.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use super::redis_env::RedisTarget;
use super::settings::{HeaderNames, Settings};
use crate::grpc_tls::{GrpcTls, TlsFile};

/// Variables refused when set to a value that turns on what tollgate's ERL
/// mode does not do, with that value's test and why.
pub(crate) const REFUSED: &[Refused] = &[
    (
        "BACKEND_TYPE",
        |v| !v.eq_ignore_ascii_case("redis"),
        "only the redis backend is supported",
    ),
    (
        "REDIS_PERSECOND",
        is_true,
        "a second Redis for per-second limits is not supported",
    ),
    (
        "REDIS_TLS_CLIENT_CERT",
        |v| !v.is_empty(),
        "a client certificate for Redis is not supported",
    ),
    (
        "REDIS_TLS_CACERT",
        |v| !v.is_empty(),
        "a CA of its own for Redis is not supported (the Mozilla roots of webpki-roots are used)",
    ),
    (
        "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION",
        is_true,
        "/healthcheck does not look at the Redis connection",
    ),
    (
        "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
        is_true,
        "ERL mode always counts every call",
    ),
    (
        "MERGE_DOMAIN_CONFIG",
        is_true,
        "a domain in two files is an error",
    ),
    (
        "GRPC_CLIENT_TLS_SAN",
        |v| !v.is_empty(),
        "checking the client certificate's SAN is not supported",
    ),
];

/// A variable's name, the test of a value it is refused with, and why.
pub(crate) type Refused = (&'static str, fn(&str) -> bool, &'static str);

fn is_true(v: &str) -> bool {
    // Go's strconv.ParseBool spellings of true
    matches!(v, "1" | "t" | "T" | "TRUE" | "true" | "True")
}

/// What ERL's environment asks for.
#[derive(Debug, Clone)]
pub(crate) struct ErlEnv {
    pub(crate) settings: Settings,
    /// Where the counters are; `None` when `REDIS_URL` is unset.
    pub(crate) redis: Option<RedisTarget>,
    pub(crate) http: SocketAddr,
    pub(crate) grpc: SocketAddr,
    /// `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY`, when
    /// `RUNTIME_ROOT` is set.
    pub(crate) config_dir: Option<PathBuf>,
    /// Skip names starting with `.` (the default; `RUNTIME_IGNOREDOTFILES=false` loads them).
    pub(crate) ignore_dotfiles: bool,
    /// TLS on the gRPC server (`GRPC_SERVER_USE_TLS=true`).
    pub(crate) grpc_tls: Option<GrpcTls>,
    /// `LOCAL_CACHE_SIZE_IN_BYTES`: 0 (the default) is no local cache.
    pub(crate) local_cache_bytes: u64,
}

/// Reads the variables; every error found is returned.
pub(crate) fn read(
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<ErlEnv, Vec<String>> {
    let vars: HashMap<String, String> = vars.into_iter().collect();
    let get = |name: &str| vars.get(name).map(String::as_str);
    let mut errors = Vec::new();
    for (name, refused, why) in REFUSED {
        if let Some(v) = get(name).filter(|v| refused(v)) {
            errors.push(format!(
                "{name}={v}: {why}; tollgate will not start with it"
            ));
        }
    }
    let mut flag = |name: &str, default: bool| match get(name) {
        None | Some("") => default,
        Some(v) if is_true(v) => true,
        Some("0" | "f" | "F" | "FALSE" | "false" | "False") => false,
        Some(v) => {
            errors.push(format!("{name}={v}: not a boolean"));
            default
        }
    };
    let global_shadow = flag("SHADOW_MODE", false);
    let global_quota = flag("QUOTA_MODE", false);
    let headers_on = flag("LIMIT_RESPONSE_HEADERS_ENABLED", false);
    let tls = flag("REDIS_TLS", false);
    let insecure = flag("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", false);
    let ignore_dotfiles = flag("RUNTIME_IGNOREDOTFILES", true);
    let grpc_tls_on = flag("GRPC_SERVER_USE_TLS", false);
    let dynamic_metadata = flag("RESPONSE_DYNAMIC_METADATA", false);
    let parse = |name: &str, default: &str| -> String {
        get(name)
            .filter(|v| !v.is_empty())
            .unwrap_or(default)
            .to_string()
    };
    let headers = headers_on.then(|| {
        let d = HeaderNames::default();
        HeaderNames {
            limit: parse("LIMIT_LIMIT_HEADER", &d.limit),
            remaining: parse("LIMIT_REMAINING_HEADER", &d.remaining),
            reset: parse("LIMIT_RESET_HEADER", &d.reset),
        }
    });
    let prefix = parse("CACHE_KEY_PREFIX", "");
    let jitter = parse("EXPIRATION_JITTER_MAX_SECONDS", "300");
    let cache_bytes = parse("LOCAL_CACHE_SIZE_IN_BYTES", "0");
    let ratio = parse("NEAR_LIMIT_RATIO", "0.8");
    let host = parse("HOST", "0.0.0.0");
    let port = parse("PORT", "8080");
    let grpc_host = parse("GRPC_HOST", "0.0.0.0");
    let grpc_port = parse("GRPC_PORT", "8081");
    let jitter_max_seconds = jitter.parse().unwrap_or_else(|_| {
        errors.push(format!(
            "EXPIRATION_JITTER_MAX_SECONDS={jitter}: not a whole number of seconds"
        ));
        0
    });
    let local_cache_bytes = cache_bytes.parse().unwrap_or_else(|_| {
        errors.push(format!(
            "LOCAL_CACHE_SIZE_IN_BYTES={cache_bytes}: not a whole number of bytes"
        ));
        0
    });
    let near_limit_ratio = ratio
        .parse::<f32>()
        .ok()
        .filter(|r| (0.0..=1.0).contains(r))
        .unwrap_or_else(|| {
            errors.push(format!("NEAR_LIMIT_RATIO={ratio}: not a ratio from 0 to 1"));
            0.8
        });
    let mut addr = |host_var: &str, host: &str, port_var: &str, port: &str| match (
        host.parse::<IpAddr>(),
        port.parse::<u16>(),
    ) {
        (Ok(ip), Ok(port)) => SocketAddr::new(ip, port),
        (Err(_), _) => {
            errors.push(format!("{host_var}={host}: not an IP address"));
            SocketAddr::from(([0, 0, 0, 0], 0))
        }
        (_, Err(_)) => {
            errors.push(format!("{port_var}={port}: not a port"));
            SocketAddr::from(([0, 0, 0, 0], 0))
        }
    };
    let http = addr("HOST", &host, "PORT", &port);
    let grpc = addr("GRPC_HOST", &grpc_host, "GRPC_PORT", &grpc_port);
    let redis = super::redis_env::read(get, tls, insecure, &mut errors);
    let config_dir = get("RUNTIME_ROOT").map(|root| {
        let mut dir = PathBuf::from(root);
        dir.push(get("RUNTIME_SUBDIRECTORY").unwrap_or(""));
        dir.push(get("RUNTIME_APPDIRECTORY").unwrap_or("config"));
        dir
    });
    let path = |name: &str| {
        get(name)
            .filter(|v| !v.is_empty())
            .map(|v| TlsFile::new(v, name))
    };
    let grpc_tls = match (
        grpc_tls_on,
        path("GRPC_SERVER_TLS_CERT"),
        path("GRPC_SERVER_TLS_KEY"),
    ) {
        (false, _, _) => None,
        (true, Some(cert), Some(key)) => Some(GrpcTls {
            cert,
            key,
            client_ca: path("GRPC_CLIENT_TLS_CACERT"),
        }),
        (true, _, _) => {
            errors.push(
                "GRPC_SERVER_USE_TLS=true needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY"
                    .to_string(),
            );
            None
        }
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(ErlEnv {
        settings: Settings {
            prefix,
            global_shadow,
            global_quota,
            headers,
            ietf_headers: false,
            jitter_max_seconds,
            near_limit_ratio,
            dynamic_metadata,
        },
        redis,
        http,
        grpc,
        config_dir,
        ignore_dotfiles,
        grpc_tls,
        local_cache_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Result<ErlEnv, Vec<String>> {
        read(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn defaults_are_erls() {
        let e = env(&[]).unwrap();
        assert_eq!(e.http, "0.0.0.0:8080".parse().unwrap());
        assert_eq!(e.grpc, "0.0.0.0:8081".parse().unwrap());
        assert!(e.redis.is_none() && e.config_dir.is_none() && e.ignore_dotfiles);
        assert_eq!(e.settings.jitter_max_seconds, 300);
        assert!(e.settings.headers.is_none() && !e.settings.global_shadow);
        assert_eq!(e.local_cache_bytes, 0);
    }

    #[test]
    fn honours_what_a_deployment_sets() {
        let e = env(&[
            ("REDIS_URL", "redis.ns:6379"),
            ("REDIS_AUTH", "user:p@ss"),
            ("REDIS_TLS", "true"),
            ("PORT", "9080"),
            ("GRPC_HOST", "127.0.0.1"),
            ("RUNTIME_ROOT", "/data"),
            ("RUNTIME_SUBDIRECTORY", "ratelimit"),
            ("RUNTIME_IGNOREDOTFILES", "false"),
            ("CACHE_KEY_PREFIX", "rl:"),
            ("SHADOW_MODE", "1"),
            ("QUOTA_MODE", "True"),
            ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
            ("LIMIT_RESET_HEADER", "X-Reset"),
            ("RESPONSE_DYNAMIC_METADATA", "true"),
            ("LOCAL_CACHE_SIZE_IN_BYTES", "1048576"),
        ])
        .unwrap();
        assert_eq!(
            e.redis,
            Some(RedisTarget::Urls(vec![
                "rediss://user:p%40ss@redis.ns:6379".to_string()
            ]))
        );
        assert_eq!(e.local_cache_bytes, 1 << 20);
        assert_eq!(e.http.port(), 9080);
        assert_eq!(e.grpc, "127.0.0.1:8081".parse().unwrap());
        assert_eq!(e.config_dir, Some(PathBuf::from("/data/ratelimit/config")));
        assert!(!e.ignore_dotfiles);
        assert_eq!(e.settings.prefix, "rl:");
        assert!(e.settings.global_shadow && e.settings.global_quota);
        assert!(e.settings.dynamic_metadata);
        let h = e.settings.headers.unwrap();
        assert_eq!(
            (h.limit.as_str(), h.reset.as_str()),
            ("RateLimit-Limit", "X-Reset")
        );
        let c = env(&[
            ("REDIS_TYPE", "cluster"),
            ("REDIS_URL", "a:1, b:2"),
            ("REDIS_AUTH", "pw"),
        ])
        .unwrap();
        assert_eq!(
            c.redis,
            Some(RedisTarget::Urls(vec![
                "redis://:pw@a:1".to_string(),
                "redis://:pw@b:2".to_string()
            ]))
        );
    }

    #[test]
    fn refuses_what_it_cannot_honour() {
        let errors = env(&[
            ("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true"),
            ("REDIS_PERSECOND", "true"),
            ("SHADOW_MODE", "maybe"),
            ("PORT", "http"),
            ("LOCAL_CACHE_SIZE_IN_BYTES", "1MB"),
        ])
        .unwrap_err();
        assert_eq!(errors.len(), 5, "{errors:?}");
        assert!(errors[0].starts_with("REDIS_PERSECOND=true"), "{errors:?}");
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("LOCAL_CACHE_SIZE_IN_BYTES=1MB")),
            "{errors:?}"
        );
        // set to their harmless values, they are fine
        assert!(
            env(&[
                ("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "false"),
                ("CONFIG_TYPE", "FILE"),
                ("LOCAL_CACHE_SIZE_IN_BYTES", "0")
            ])
            .is_ok()
        );
    }
}

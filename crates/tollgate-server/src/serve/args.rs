//! `tollgate serve`'s command line, and `--redis`'s values put back whole.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use crate::config;

/// Arguments of `tollgate serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The config file (default: `tollgate.toml` if it exists, else the
    /// built-in example policies).
    #[arg(long, env = "TOLLGATE_CONFIG")]
    pub(super) config: Option<PathBuf>,
    /// Where the HTTP API listens (default 127.0.0.1:8080; port 0 picks a
    /// free port, printed at start).
    #[arg(long, env = "TOLLGATE_LISTEN")]
    pub(super) listen: Option<SocketAddr>,
    /// Where Envoy's rate limit gRPC API listens (off unless given here or
    /// as `[server] grpc_listen`).
    #[arg(long, env = "TOLLGATE_GRPC_LISTEN")]
    pub(super) grpc_listen: Option<SocketAddr>,
    /// A Redis URL; repeat it for a cluster's seed nodes, or give one
    /// `redis+sentinel://host:26379,…/master_name` URL. Overrides the
    /// config's `[store]` servers.
    #[arg(long = "redis", env = "TOLLGATE_REDIS", value_delimiter = ',')]
    pub(super) redis: Vec<String>,
    /// Redis Sentinel: a sentinel's URL; repeat it for each. Overrides the
    /// config's `[store]` servers; needs `--redis-master-name` (or the
    /// config's `master_name`).
    #[arg(
        long = "redis-sentinel",
        env = "TOLLGATE_REDIS_SENTINEL",
        value_delimiter = ',',
        conflicts_with = "redis"
    )]
    pub(super) redis_sentinel: Vec<String>,
    /// Redis Sentinel: the name the sentinels know the master by.
    #[arg(long = "redis-master-name", env = "TOLLGATE_REDIS_MASTER_NAME")]
    pub(super) redis_master_name: Option<String>,
    /// Refuse to start when Redis does not answer at startup (by default
    /// the service starts anyway, decides by the failure policy, and
    /// connects as soon as Redis answers). Same as `[store]
    /// require_at_startup = true`.
    #[arg(long, env = "TOLLGATE_REQUIRE_REDIS")]
    pub(super) require_redis: bool,
    /// TLS on the gRPC server: its certificate chain (PEM). Needs
    /// `--grpc-tls-key`; overrides `[server] grpc_tls_cert`.
    #[arg(long, env = "TOLLGATE_GRPC_TLS_CERT")]
    pub(super) grpc_tls_cert: Option<PathBuf>,
    /// TLS on the gRPC server: the certificate's private key (PEM).
    #[arg(long, env = "TOLLGATE_GRPC_TLS_KEY")]
    pub(super) grpc_tls_key: Option<PathBuf>,
    /// Mutual TLS on the gRPC server: the CA (PEM) that must have signed a
    /// client's certificate; a client without one is refused at the
    /// handshake.
    #[arg(long, env = "TOLLGATE_GRPC_TLS_CLIENT_CA")]
    pub(super) grpc_tls_client_ca: Option<PathBuf>,
    /// The most connections each listener keeps open (default 1024); one
    /// more is closed at once and a warning logged. Same as `[server]
    /// max_connections`.
    #[arg(long, env = "TOLLGATE_MAX_CONNECTIONS",
        value_parser = clap::value_parser!(u32).range(1..=config::ConnectionLimits::MAX_CONNECTIONS))]
    pub(super) max_connections: Option<u32>,
    /// A bearer token every request but /healthz, /readyz, the status page
    /// (and the gRPC health check) must carry: HTTP's `Authorization:
    /// Bearer <token>` header, or gRPC's `authorization: Bearer <token>`
    /// metadata. Not in ERL mode.
    #[arg(long, env = "TOLLGATE_TOKEN", hide_env_values = true)]
    pub(super) token: Option<String>,
    /// A bearer token for the routes that change limits or state (the
    /// overrides, `DELETE /v1/keys/...`); the `--token` there is refused
    /// with 403. Without it, `--token` guards those routes too. Same as
    /// `[server] admin_token`.
    #[arg(long, env = "TOLLGATE_ADMIN_TOKEN", hide_env_values = true)]
    pub(super) admin_token: Option<String>,
    /// ERL mode: serve this envoyproxy/ratelimit YAML config (a file, or a
    /// directory read recursively) with ERL's semantics, Redis keys,
    /// endpoints and environment variables.
    #[arg(long, env = "TOLLGATE_ENVOY_CONFIG")]
    pub(super) envoy_config: Option<PathBuf>,
    /// Every policy in shadow mode: decided and counted, never refused
    /// (also `SHADOW_MODE=true`, as in ERL).
    #[arg(long, env = "SHADOW_MODE")]
    pub(super) shadow: bool,
    /// ERL mode with the config where ERL's `RUNTIME_ROOT`,
    /// `RUNTIME_SUBDIRECTORY` and `RUNTIME_APPDIRECTORY` say.
    #[arg(long)]
    pub(super) erl: bool,
    /// ERL mode: rules may name a policy of `--config` instead of a fixed
    /// window (`rate_limit: {tollgate_policy: NAME}`). Same as `[erl]
    /// extensions = true`.
    #[arg(long, env = "TOLLGATE_ERL_EXTENSIONS")]
    pub(super) erl_extensions: bool,
    /// ERL mode: the rate-limit headers answers carry: `erl` (ERL's three,
    /// when `LIMIT_RESPONSE_HEADERS_ENABLED=true`) or `ietf` (the IETF
    /// `RateLimit-Policy` and `RateLimit`, always). Same as `[erl] headers`.
    #[arg(long, env = "TOLLGATE_ERL_HEADERS", value_enum)]
    pub(super) erl_headers: Option<config::HeaderStyle>,
    /// For tests only: every decision's clock stands still at this Unix
    /// time in ms (`crate::test_clock`).
    #[arg(long, env = "TOLLGATE_TEST_CLOCK_MS", hide = true)]
    pub(super) test_clock_ms: Option<u64>,
}

/// `--redis` splits its values at commas (for a cluster's seeds), which
/// also cuts a `redis+sentinel://h1,h2/master` URL into pieces: those
/// without a scheme of their own are put back onto the sentinel URL they
/// came from.
pub(super) fn whole_urls(urls: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(urls.len());
    for url in urls {
        match out.last_mut() {
            Some(last)
                if !url.contains("://") && last.to_ascii_lowercase().contains("+sentinel://") =>
            {
                last.push(',');
                last.push_str(&url);
            }
            _ => out.push(url),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_sentinel_url_cut_at_its_commas_is_made_whole() {
        let cut = [
            "redis+sentinel://:pw@h1:26379",
            "h2:26379",
            "h3/mymaster",
            "redis://other:6379",
        ];
        assert_eq!(
            super::whole_urls(cut.map(String::from).to_vec()),
            [
                "redis+sentinel://:pw@h1:26379,h2:26379,h3/mymaster",
                "redis://other:6379"
            ]
        );
        let seeds = ["redis://a:1", "redis://b:2"].map(String::from).to_vec();
        assert_eq!(super::whole_urls(seeds.clone()), seeds);
    }
}

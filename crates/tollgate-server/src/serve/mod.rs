//! `tollgate serve`: the rate-limit service. `overrides.rs`: what the
//! command line puts over the config file; `reload.rs`: reloading on
//! SIGHUP and when the config file changes.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use clap::Args;
use metrics_exporter_prometheus::PrometheusBuilder;
use tokio::signal::unix::{SignalKind, signal};

use crate::config::{self, Config};
use crate::grpc_tls::{GrpcTls, TlsFile};
use crate::http::router;
use crate::listen::listener::Listener;
use crate::listen::{Stopping, finish, serving};
use crate::state::AppState;
use crate::store;

mod overrides;
mod reload;
mod sync;

use self::overrides::Overrides;
use self::reload::reload_on_change;

/// The policies served when no config file is given nor found.
const BUILT_IN: &str = include_str!("../../examples/tollgate.toml");

/// Arguments of `tollgate serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The config file (default: `tollgate.toml` if it exists, else the
    /// built-in example policies).
    #[arg(long, env = "TOLLGATE_CONFIG")]
    config: Option<PathBuf>,
    /// Where the HTTP API listens (default 127.0.0.1:8080; port 0 picks a
    /// free port, printed at start).
    #[arg(long, env = "TOLLGATE_LISTEN")]
    listen: Option<SocketAddr>,
    /// Where Envoy's rate limit gRPC API listens (off unless given here or
    /// as `[server] grpc_listen`).
    #[arg(long, env = "TOLLGATE_GRPC_LISTEN")]
    grpc_listen: Option<SocketAddr>,
    /// A Redis URL; repeat it for a cluster's seed nodes, or give one
    /// `redis+sentinel://host:26379,…/master_name` URL. Overrides the
    /// config's `[store]` servers.
    #[arg(long = "redis", env = "TOLLGATE_REDIS", value_delimiter = ',')]
    redis: Vec<String>,
    /// Redis Sentinel: a sentinel's URL; repeat it for each. Overrides the
    /// config's `[store]` servers; needs `--redis-master-name` (or the
    /// config's `master_name`).
    #[arg(
        long = "redis-sentinel",
        env = "TOLLGATE_REDIS_SENTINEL",
        value_delimiter = ',',
        conflicts_with = "redis"
    )]
    redis_sentinel: Vec<String>,
    /// Redis Sentinel: the name the sentinels know the master by.
    #[arg(long = "redis-master-name", env = "TOLLGATE_REDIS_MASTER_NAME")]
    redis_master_name: Option<String>,
    /// Refuse to start when Redis does not answer at startup (by default
    /// the service starts anyway, decides by the failure policy, and
    /// connects as soon as Redis answers). Same as `[store]
    /// require_at_startup = true`.
    #[arg(long, env = "TOLLGATE_REQUIRE_REDIS")]
    require_redis: bool,
    /// TLS on the gRPC server: its certificate chain (PEM). Needs
    /// `--grpc-tls-key`; overrides `[server] grpc_tls_cert`.
    #[arg(long, env = "TOLLGATE_GRPC_TLS_CERT")]
    grpc_tls_cert: Option<PathBuf>,
    /// TLS on the gRPC server: the certificate's private key (PEM).
    #[arg(long, env = "TOLLGATE_GRPC_TLS_KEY")]
    grpc_tls_key: Option<PathBuf>,
    /// Mutual TLS on the gRPC server: the CA (PEM) that must have signed a
    /// client's certificate; a client without one is refused at the
    /// handshake.
    #[arg(long, env = "TOLLGATE_GRPC_TLS_CLIENT_CA")]
    grpc_tls_client_ca: Option<PathBuf>,
    /// The most connections each listener keeps open (default 1024); one
    /// more is closed at once and a warning logged. Same as `[server]
    /// max_connections`.
    #[arg(long, env = "TOLLGATE_MAX_CONNECTIONS",
        value_parser = clap::value_parser!(u32).range(1..=config::ConnectionLimits::MAX_CONNECTIONS))]
    max_connections: Option<u32>,
    /// A bearer token every request but /healthz, /readyz, the status page
    /// (and the gRPC health check) must carry: HTTP's `Authorization:
    /// Bearer <token>` header, or gRPC's `authorization: Bearer <token>`
    /// metadata. Not in ERL mode.
    #[arg(long, env = "TOLLGATE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A bearer token for the routes that change limits or state (the
    /// overrides, `DELETE /v1/keys/...`); the `--token` there is refused
    /// with 403. Without it, `--token` guards those routes too. Same as
    /// `[server] admin_token`.
    #[arg(long, env = "TOLLGATE_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// ERL mode: serve this envoyproxy/ratelimit YAML config (a file, or a
    /// directory read recursively) with ERL's semantics, Redis keys,
    /// endpoints and environment variables.
    #[arg(long, env = "TOLLGATE_ENVOY_CONFIG")]
    envoy_config: Option<PathBuf>,
    /// Every policy in shadow mode: decided and counted, never refused
    /// (also `SHADOW_MODE=true`, as in ERL).
    #[arg(long, env = "SHADOW_MODE")]
    shadow: bool,
    /// ERL mode with the config where ERL's `RUNTIME_ROOT`,
    /// `RUNTIME_SUBDIRECTORY` and `RUNTIME_APPDIRECTORY` say.
    #[arg(long)]
    erl: bool,
    /// ERL mode: rules may name a policy of `--config` instead of a fixed
    /// window (`rate_limit: {tollgate_policy: NAME}`). Same as `[erl]
    /// extensions = true`.
    #[arg(long, env = "TOLLGATE_ERL_EXTENSIONS")]
    erl_extensions: bool,
    /// ERL mode: the rate-limit headers answers carry: `erl` (ERL's three,
    /// when `LIMIT_RESPONSE_HEADERS_ENABLED=true`) or `ietf` (the IETF
    /// `RateLimit-Policy` and `RateLimit`, always). Same as `[erl] headers`.
    #[arg(long, env = "TOLLGATE_ERL_HEADERS", value_enum)]
    erl_headers: Option<config::HeaderStyle>,
    /// For tests only: every decision's clock stands still at this Unix
    /// time in ms (`crate::test_clock`).
    #[arg(long, env = "TOLLGATE_TEST_CLOCK_MS", hide = true)]
    test_clock_ms: Option<u64>,
}

fn load(args: &ServeArgs) -> Result<(Config, Option<PathBuf>), Vec<config::ConfigError>> {
    let path = match &args.config {
        Some(p) => Some(p.clone()),
        None => Some(PathBuf::from("tollgate.toml")).filter(|p| p.exists()),
    };
    match &path {
        Some(p) => Ok((Config::load(p)?, path)),
        None => Ok((Config::parse("built-in example policies", BUILT_IN)?, None)),
    }
}

/// `--redis` splits its values at commas (for a cluster's seeds), which
/// also cuts a `redis+sentinel://h1,h2/master` URL into pieces: those
/// without a scheme of their own are put back onto the sentinel URL they
/// came from.
fn whole_urls(urls: Vec<String>) -> Vec<String> {
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

/// Runs the service until SIGTERM or SIGINT; exit code 0, or 2 when the
/// configuration is wrong, 1 when the service cannot start.
pub(crate) fn run(args: ServeArgs) -> i32 {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    crate::test_clock::pin(args.test_clock_ms);
    let grpc_tls = [
        (&args.grpc_tls_cert, "--grpc-tls-cert"),
        (&args.grpc_tls_key, "--grpc-tls-key"),
        (&args.grpc_tls_client_ca, "--grpc-tls-client-ca"),
    ]
    .map(|(path, flag)| path.as_ref().map(|p| TlsFile::new(p, flag)));
    if args.erl || args.envoy_config.is_some() {
        let own_mode = [
            (args.token.is_some(), "--token (TOLLGATE_TOKEN)"),
            (
                args.admin_token.is_some(),
                "--admin-token (TOLLGATE_ADMIN_TOKEN)",
            ),
            (!args.redis_sentinel.is_empty(), "--redis-sentinel"),
            (args.redis_master_name.is_some(), "--redis-master-name"),
            (args.require_redis, "--require-redis"),
        ];
        if let Some((_, flag)) = own_mode.iter().find(|(given, _)| *given) {
            eprintln!(
                "error: {flag} is for tollgate's own mode; ERL mode takes ERL's variables (Sentinel: REDIS_TYPE=sentinel, or --redis redis+sentinel://…)"
            );
            return 2;
        }
        let grpc_tls = match GrpcTls::from_parts(grpc_tls.each_ref(), "") {
            Ok(tls) => tls,
            Err(e) => {
                eprintln!("error: {e}");
                return 2;
            }
        };
        return crate::erl::serve::run(crate::erl::serve::Flags {
            grpc_tls,
            envoy_config: args.envoy_config,
            listen: args.listen,
            grpc_listen: args.grpc_listen,
            redis: whole_urls(args.redis),
            config: args.config,
            extensions: args.erl_extensions,
            headers: args.erl_headers,
            max_connections: args.max_connections.map(|n| n as usize),
        });
    }
    if args.erl_extensions || args.erl_headers.is_some() {
        eprintln!(
            "error: --erl-extensions and --erl-headers are for ERL mode (--envoy-config PATH or --erl)"
        );
        return 2;
    }
    let (mut config, path) = match load(&args) {
        Ok(loaded) => loaded,
        Err(errors) => {
            for e in errors {
                eprintln!("error: {e}");
            }
            return 2;
        }
    };
    let overrides = Overrides {
        redis: whole_urls(args.redis.clone()),
        redis_sentinel: args.redis_sentinel.clone(),
        redis_master_name: args.redis_master_name.clone(),
        require_redis: args.require_redis,
        token: args.token.clone(),
        admin_token: args.admin_token.clone(),
        grpc_listen: args.grpc_listen,
        grpc_tls,
        shadow: args.shadow,
        max_connections: args.max_connections.map(|n| n as usize),
    };
    if let Err(e) = overrides.apply(&mut config) {
        eprintln!("error: {e}");
        return 2;
    }
    if config.erl != config::ErlSettings::default() {
        eprintln!(
            "warning: [erl] applies in ERL mode only (--envoy-config PATH or --erl); ignored here"
        );
    }
    let listen = args
        .listen
        .or(config.server.listen)
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080)));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return 1;
        }
    };
    let grpc = config.server.grpc_listen;
    runtime.block_on(serve(config, path, listen, grpc, overrides))
}

async fn serve(
    config: Config,
    path: Option<PathBuf>,
    listen: SocketAddr,
    grpc: Option<SocketAddr>,
    overrides: Overrides,
) -> i32 {
    // TLS files are checked before anything starts, as `validate` checks
    // them.
    let grpc_builder = match crate::validate::grpc_server(&config) {
        Ok(builder) => builder,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let metrics = match PrometheusBuilder::new().install_recorder() {
        Ok(handle) => Some(handle),
        Err(e) => {
            eprintln!("warning: metrics are off: {e}");
            None
        }
    };
    let backend = match store::build(&config.store).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    if metrics.is_some() {
        register_metrics(&backend);
    }
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on {listen}: {e}");
            return 1;
        }
    };
    let local = listener.local_addr().map_or(listen, |a| a);
    let limits = config.server.connections;
    let listener = Listener::new(listener, "HTTP", &limits);
    let grpc = match grpc {
        None => None,
        Some(addr) => match tokio::net::TcpListener::bind(addr).await {
            Ok(tcp) => Some(Listener::new(tcp, "gRPC", &limits)),
            Err(e) => {
                eprintln!("error: cannot listen for gRPC on {addr}: {e}");
                return 1;
            }
        },
    };
    // The first line says where, for people and for scripts and tests. A
    // closed stdout must not stop the service: write errors are ignored.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "tollgate listening on http://{local}");
    if let Some(addr) = grpc.as_ref().and_then(|g| g.local_addr().ok()) {
        let _ = writeln!(out, "tollgate gRPC (Envoy rate limit service) on {addr}");
    }
    let _ = writeln!(out, "store: {}", backend.describe());
    for p in &config.policies.policies {
        let _ = writeln!(
            out,
            "policy {}: {} (limit {})",
            p.name(),
            p.algorithm().name(),
            p.limit()
        );
    }
    let _ = out.flush();
    drop(out);
    let redis = backend.redis.clone();
    let state = Arc::new(AppState {
        overrides: if redis.is_some() {
            crate::overrides::SharedOverrides::shared()
        } else {
            crate::overrides::SharedOverrides::local()
        },
        backend,
        tokens: crate::auth::Tokens::new(
            config.server.token.as_deref(),
            config.server.admin_token.as_deref(),
        ),
        policies: RwLock::new(Arc::new(config.policies.clone())),
        metrics: metrics.clone(),
        status: Default::default(),
    });
    state.overrides.set_base(&config.policies);
    if let Some(builder) = redis {
        sync::start(state.clone(), builder).await;
    }
    if let Some(handle) = metrics {
        // Without an exporter task, histograms are drained here.
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(5)).await;
                handle.run_upkeep();
            }
        });
    }
    if let Some(path) = path {
        tokio::spawn(reload_on_change(state.clone(), path, overrides, config));
    }
    // One signal stops both servers.
    let stopping = Stopping::on_signal();
    let grpc_server = grpc.map(|incoming| {
        let service = crate::grpc::service(state.clone());
        let until = stopping.clone().stopped();
        let mut builder = serving::grpc_limits(grpc_builder, &limits);
        tokio::spawn(async move {
            builder
                .add_service(crate::grpc::health().await)
                .add_service(service)
                .serve_with_incoming_shutdown(incoming, until)
                .await
        })
    });
    let app = router(state);
    let http = serving::serve_http(listener, app, limits, stopping.stopped()).await;
    let grpc = match grpc_server {
        Some(task) => match task.await {
            Ok(result) => result.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        },
        None => Ok(()),
    };
    finish(http, grpc)
}

/// Registers the service's label-free series at their present values, so a
/// dashboard (`deploy/grafana/tollgate.json`) shows zero, not "no data",
/// before the first script load, pipeline or breaker switch.
fn register_metrics(backend: &crate::store::Backend) {
    use tollgate::metrics as m;
    for name in [
        m::SCRIPT_LOADS,
        m::PIPELINES,
        m::PIPELINED_CALLS,
        m::MASTER_SWITCHES,
        m::BATCH_REFUNDS,
    ] {
        metrics::counter!(name).increment(0);
    }
    if let Some(state) = backend.breaker() {
        let open = state == tollgate::store::resilient::BreakerState::Open;
        metrics::gauge!(m::BREAKER_STATE).set(if open { 1.0 } else { 0.0 });
    }
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

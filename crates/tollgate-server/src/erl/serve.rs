//! `tollgate serve --envoy-config PATH` (or `--erl`): the service in ERL
//! mode. ERL's environment is read first (a variable tollgate cannot
//! honour stops it); a config that fails validation at start stops it
//! (exit 2); a change to the files, or SIGHUP, reloads, and a bad new
//! config keeps the running one and logs why. With
//! `CONFIG_TYPE=GRPC_XDS_SOTW` the config comes from an xDS server instead
//! (see `xds`).
//!
//! With extensions (`--erl-extensions`, or `[erl] extensions = true` in
//! the `--config` file), rules may name that file's policies
//! (`tollgate_policy`); the policies decide on the store its `[store]`
//! table describes, with ERL's Redis (`--redis`, `REDIS_URL`) in place of
//! its servers when one is given. A change to either file reloads both
//! together: the ERL files are checked against the new policies, and the
//! pair is put in force whole or not at all.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;

use super::env::{self, ErlEnv};
use super::local_cache::LocalCache;
use super::reload::{Seen, Source};
use super::state::ErlState;
use crate::config::{Config, ConnectionLimits, HeaderStyle};
use crate::grpc_tls::GrpcTls;
use crate::listen::grpc::Grpc;
use crate::listen::listener::Listener;
use crate::listen::{Stopping, finish, serving};

/// What the command line says over ERL's environment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Flags {
    pub(crate) envoy_config: Option<PathBuf>,
    pub(crate) listen: Option<SocketAddr>,
    pub(crate) grpc_listen: Option<SocketAddr>,
    pub(crate) redis: Vec<String>,
    /// The TOML config: its `[erl]` table, and with extensions its policies.
    pub(crate) config: Option<PathBuf>,
    /// `--erl-extensions`: rules may name the TOML's policies.
    pub(crate) extensions: bool,
    /// `--erl-headers`: which headers answers carry.
    pub(crate) headers: Option<HeaderStyle>,
    /// `--grpc-tls-cert`, `--grpc-tls-key`, `--grpc-tls-client-ca`: over
    /// `GRPC_SERVER_USE_TLS` and its files.
    pub(crate) grpc_tls: Option<GrpcTls>,
    /// `--max-connections`: over the TOML's `[server] max_connections`.
    pub(crate) max_connections: Option<usize>,
}

/// Where the config comes from: files (reloaded on change) or an xDS
/// server (`CONFIG_TYPE=GRPC_XDS_SOTW`, followed for ever).
enum Origin {
    Files(Source, Seen),
    Xds(Box<super::xds::XdsSettings>),
}

/// Runs ERL mode until SIGTERM or SIGINT: exit 0; 2 for a bad config or
/// environment; 1 when it cannot start.
pub(crate) fn run(flags: Flags) -> i32 {
    let vars: std::collections::HashMap<String, String> = std::env::vars().collect();
    let (env, xds) = match (env::read(vars.clone()), super::xds::read(&vars)) {
        (Ok(env), Ok(xds)) => (env, xds),
        (a, b) => {
            let errors = a.err().into_iter().chain(b.err()).flatten();
            for e in errors {
                eprintln!("error: {e}");
            }
            return 2;
        }
    };
    let toml = match flags.config.as_deref().map(Config::load).transpose() {
        Ok(toml) => toml,
        Err(errors) => {
            for e in errors {
                eprintln!("error: {e}");
            }
            return 2;
        }
    };
    let erl = toml.as_ref().map(|c| c.erl.clone()).unwrap_or_default();
    // The TOML's `[server]` gives the connection limits (its addresses and
    // token are tollgate's own mode's).
    let mut limits = toml
        .as_ref()
        .map(|c| c.server.connections)
        .unwrap_or_default();
    if let Some(n) = flags.max_connections {
        limits.max_connections = n;
    }
    let extensions = flags.extensions || erl.extensions;
    if extensions && toml.is_none() {
        eprintln!(
            "error: --erl-extensions needs --config FILE, the TOML config whose policies `tollgate_policy` names"
        );
        return 2;
    }
    let mut env = env;
    env.settings.ietf_headers = flags.headers.or(erl.headers) == Some(HeaderStyle::Ietf);
    let policies = toml.filter(|_| extensions);
    if let Some(xds) = xds {
        if flags.envoy_config.is_some() {
            eprintln!(
                "error: CONFIG_TYPE=GRPC_XDS_SOTW and --envoy-config both give the config; keep one"
            );
            return 2;
        }
        // Until the server's first push, no domain has a config.
        return start(Start {
            flags,
            env,
            limits,
            origin: Origin::Xds(Box::new(xds)),
            config: super::ErlConfig::default(),
            policies,
        });
    }
    let Some(path) = flags
        .envoy_config
        .clone()
        .or_else(|| env.config_dir.clone())
    else {
        eprintln!("error: ERL mode needs --envoy-config PATH or RUNTIME_ROOT");
        return 2;
    };
    let source = Source {
        path,
        ignore_dotfiles: env.ignore_dotfiles,
        policies: flags.config.clone().filter(|_| extensions),
    };
    // Taken before the load, so that a change made while starting is seen.
    let seen = source.seen();
    let config = match source.load(policies.as_ref().map(|c| &c.policies)) {
        Ok(config) => config,
        Err(errors) => {
            for e in errors {
                eprintln!("error: {e}");
            }
            return 2;
        }
    };
    start(Start {
        flags,
        env,
        limits,
        origin: Origin::Files(source, seen),
        config,
        policies,
    })
}

/// What the service starts with, once the command line, the environment
/// and the files are read.
struct Start {
    flags: Flags,
    env: ErlEnv,
    /// Timeouts and the cap on both listeners.
    limits: ConnectionLimits,
    origin: Origin,
    /// The config in force at start (empty until xDS pushes one).
    config: super::ErlConfig,
    /// With extensions, the TOML config whose policies rules name.
    policies: Option<Config>,
}

fn start(start: Start) -> i32 {
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
    runtime.block_on(serve(start))
}

async fn serve(start: Start) -> i32 {
    // TLS files are checked before anything starts.
    let mut tls = None;
    if let Some(files) = start
        .flags
        .grpc_tls
        .as_ref()
        .or(start.env.grpc_tls.as_ref())
    {
        match files.apply(tonic::transport::Server::builder()) {
            Ok(with_tls) => tls = Some(with_tls),
            Err(e) => {
                eprintln!("error: gRPC TLS: {e}");
                return 2;
            }
        }
    }
    let metrics = PrometheusBuilder::new().install_recorder().ok();
    let (counter, store, policy_store) = match super::stores::stores(
        &start.flags.redis,
        &start.env,
        start.policies.as_ref(),
    )
    .await
    {
        Ok(stores) => stores,
        Err(code) => return code,
    };
    let (http, grpc) = match bind(&start).await {
        Ok(listeners) => listeners,
        Err(code) => return code,
    };
    announce(&start, &http, &grpc, &store, policy_store.as_ref());
    let Start {
        env,
        limits,
        origin,
        config,
        ..
    } = start;
    let mut state = ErlState::new(config, env.settings.clone(), counter, metrics.clone())
        .with_local_cache(LocalCache::with_bytes(env.local_cache_bytes));
    if let Some(backend) = policy_store {
        state = state.with_store(backend.store);
    }
    let state = Arc::new(state);
    if let Some(handle) = metrics {
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(5)).await;
                handle.run_upkeep();
            }
        });
    }
    match origin {
        Origin::Files(source, seen) => {
            tokio::spawn(super::reload::reload_on_change(state.clone(), source, seen))
        }
        Origin::Xds(xds) => tokio::spawn(super::xds::run(state.clone(), *xds)),
    };
    serve_both(state, tls, limits, http, grpc).await
}

/// The HTTP and gRPC listeners, or the exit code when one cannot bind.
async fn bind(start: &Start) -> Result<(Listener, Listener), i32> {
    let http_addr = start.flags.listen.unwrap_or(start.env.http);
    let grpc_addr = start.flags.grpc_listen.unwrap_or(start.env.grpc);
    let http = match tokio::net::TcpListener::bind(http_addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on {http_addr}: {e}");
            return Err(1);
        }
    };
    let http = Listener::new(http, "HTTP", &start.limits);
    let grpc = match tokio::net::TcpListener::bind(grpc_addr).await {
        Ok(g) => Listener::new(g, "gRPC", &start.limits),
        Err(e) => {
            eprintln!("error: cannot listen for gRPC on {grpc_addr}: {e}");
            return Err(1);
        }
    };
    Ok((http, grpc))
}

/// The first lines: where the service listens, its stores, its cache and
/// where its config comes from. A closed stdout must not stop the
/// service: write errors are ignored.
fn announce(
    start: &Start,
    http: &Listener,
    grpc: &Listener,
    store: &str,
    policy_store: Option<&crate::store::Backend>,
) {
    let http_addr = start.flags.listen.unwrap_or(start.env.http);
    let grpc_addr = start.flags.grpc_listen.unwrap_or(start.env.grpc);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "tollgate listening on http://{}",
        http.local_addr().map_or(http_addr, |a| a)
    );
    let _ = writeln!(
        out,
        "tollgate gRPC (Envoy rate limit service) on {}",
        grpc.local_addr().map_or(grpc_addr, |a| a)
    );
    let _ = writeln!(out, "store: {store}");
    if let Some(backend) = policy_store {
        let _ = writeln!(
            out,
            "extensions: tollgate_policy names the policies of {} on {}",
            start
                .flags
                .config
                .as_deref()
                .unwrap_or(std::path::Path::new(""))
                .display(),
            backend.describe()
        );
    }
    let bytes = start.env.local_cache_bytes;
    if bytes > 0 {
        let _ = writeln!(
            out,
            "local cache: {} bytes, {} counters",
            bytes,
            (bytes / super::local_cache::BYTES_PER_KEY).max(1)
        );
    }
    let _ = match &start.origin {
        Origin::Files(source, _) => writeln!(
            out,
            "ERL mode: {} ({} domains)",
            source.path.display(),
            start.config.domains().len()
        ),
        Origin::Xds(xds) => writeln!(
            out,
            "ERL mode: xDS from {} (node {})",
            xds.server, xds.node_id
        ),
    };
    let _ = out.flush();
}

/// The gRPC server (with `grpc.health.v1.Health`) and ERL's HTTP
/// endpoints, until one signal stops both.
async fn serve_both(
    state: Arc<ErlState>,
    tls: Option<tonic::transport::Server>,
    limits: ConnectionLimits,
    http: Listener,
    grpc: Listener,
) -> i32 {
    let stopping = Stopping::on_signal();
    let (health, health_service) = tonic_health::server::health_reporter();
    for name in ["", "ratelimit"] {
        health
            .set_service_status(name, tonic_health::ServingStatus::Serving)
            .await;
    }
    let grpc_task = {
        let server = Grpc {
            rls: super::grpc::service(state.clone()),
            health: health_service,
            tls,
            limits,
        };
        tokio::spawn(server.serve(grpc, stopping.clone().stopped()))
    };
    let http_result =
        serving::serve_http(http, super::http::router(state), limits, stopping.stopped()).await;
    let grpc_result = grpc_task.await.unwrap_or_else(|e| Err(e.to_string()));
    finish(http_result, grpc_result)
}

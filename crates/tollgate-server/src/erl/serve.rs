//! `tollgate serve --envoy-config PATH` (or `--erl`): the service in ERL
//! mode. ERL's environment is read first (a variable tollgate cannot
//! honour stops it); a config that fails validation at start stops it
//! (exit 2); a change to the files, or SIGHUP, reloads, and a bad new
//! config keeps the running one and logs why. With
//! `CONFIG_TYPE=GRPC_XDS_SOTW` the config comes from an xDS server instead
//! (see `xds`).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use tokio::signal::unix::{SignalKind, signal};

use super::counter::{Counter, MemoryCounter};
use super::env::{self, ErlEnv};
use super::files::{self, Fingerprint};
use super::redis::RedisCounter;
use super::redis_env::RedisTarget;
use super::state::ErlState;

/// What the command line says over ERL's environment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Flags {
    pub(crate) envoy_config: Option<PathBuf>,
    pub(crate) listen: Option<SocketAddr>,
    pub(crate) grpc_listen: Option<SocketAddr>,
    pub(crate) redis: Vec<String>,
}

/// Where the config comes from, and how its directory is read.
#[derive(Debug, Clone)]
struct Source {
    path: PathBuf,
    ignore_dotfiles: bool,
}

impl Source {
    fn load(&self) -> Result<super::ErlConfig, Vec<super::ConfigError>> {
        files::load(&self.path, self.ignore_dotfiles, None)
    }
}

/// Where the config comes from: files (reloaded on change) or an xDS
/// server (`CONFIG_TYPE=GRPC_XDS_SOTW`, followed for ever).
enum Origin {
    Files(Source, Fingerprint),
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
    if let Some(xds) = xds {
        if flags.envoy_config.is_some() {
            eprintln!(
                "error: CONFIG_TYPE=GRPC_XDS_SOTW and --envoy-config both give the config; keep one"
            );
            return 2;
        }
        // Until the server's first push, no domain has a config.
        return start(
            flags,
            env,
            Origin::Xds(Box::new(xds)),
            super::ErlConfig::default(),
        );
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
    };
    // Taken before the load, so that a change made while starting is seen.
    let seen = files::fingerprint(&source.path, source.ignore_dotfiles);
    let config = match source.load() {
        Ok(config) => config,
        Err(errors) => {
            for e in errors {
                eprintln!("error: {e}");
            }
            return 2;
        }
    };
    start(flags, env, Origin::Files(source, seen), config)
}

fn start(flags: Flags, env: ErlEnv, origin: Origin, config: super::ErlConfig) -> i32 {
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
    runtime.block_on(serve(flags, env, origin, config))
}

async fn serve(flags: Flags, env: ErlEnv, origin: Origin, config: super::ErlConfig) -> i32 {
    let metrics = PrometheusBuilder::new().install_recorder().ok();
    let target = if flags.redis.is_empty() {
        env.redis.clone()
    } else {
        Some(RedisTarget::Urls(flags.redis.clone()))
    };
    let (counter, store): (Arc<dyn Counter>, String) = match target {
        None => (Arc::new(MemoryCounter::default()), "memory".to_string()),
        Some(target) => match RedisCounter::connect(&target).await {
            Ok(c) => (Arc::new(c), target.describe()),
            Err(e) => {
                eprintln!("error: cannot connect to {}: {e}", target.describe());
                return 1;
            }
        },
    };
    let http_addr = flags.listen.unwrap_or(env.http);
    let grpc_addr = flags.grpc_listen.unwrap_or(env.grpc);
    let http = match tokio::net::TcpListener::bind(http_addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on {http_addr}: {e}");
            return 1;
        }
    };
    let grpc = match tonic::transport::server::TcpIncoming::bind(grpc_addr) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: cannot listen for gRPC on {grpc_addr}: {e}");
            return 1;
        }
    };
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
    let _ = match &origin {
        Origin::Files(source, _) => writeln!(
            out,
            "ERL mode: {} ({} domains)",
            source.path.display(),
            config.domains().len()
        ),
        Origin::Xds(xds) => writeln!(
            out,
            "ERL mode: xDS from {} (node {})",
            xds.server, xds.node_id
        ),
    };
    let _ = out.flush();
    drop(out);

    let state = Arc::new(ErlState::new(
        config,
        env.settings.clone(),
        counter,
        metrics.clone(),
    ));
    if let Some(handle) = metrics {
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(5)).await;
                handle.run_upkeep();
            }
        });
    }
    match origin {
        Origin::Files(source, seen) => tokio::spawn(reload_on_change(state.clone(), source, seen)),
        Origin::Xds(xds) => tokio::spawn(super::xds::run(state.clone(), *xds)),
    };
    let (stop, stopping) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        crate::serve::shutdown().await;
        let _ = stop.send(true);
    });
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let (health, health_service) = tonic_health::server::health_reporter();
    for name in ["", "ratelimit"] {
        health
            .set_service_status(name, tonic_health::ServingStatus::Serving)
            .await;
    }
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = &env.grpc_tls {
        match tls.apply(builder) {
            Ok(with_tls) => builder = with_tls,
            Err(e) => {
                eprintln!("error: gRPC TLS: {e}");
                return 2;
            }
        }
    }
    let grpc_task = {
        let service = super::grpc::service(state.clone());
        let until = stopped(stopping.clone());
        tokio::spawn(async move {
            builder
                .add_service(health_service)
                .add_service(service)
                .serve_with_incoming_shutdown(grpc, until)
                .await
        })
    };
    let http_result = axum::serve(http, super::http::router(state))
        .with_graceful_shutdown(stopped(stopping))
        .await;
    let grpc_result = match grpc_task.await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    crate::serve::finish(http_result, grpc_result)
}

/// Reloads on SIGHUP and when a file changes, is added or goes (checked
/// every second).
async fn reload_on_change(state: Arc<ErlState>, source: Source, mut seen: Fingerprint) {
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return;
    };
    loop {
        tokio::select! {
            _ = hup.recv() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                if files::fingerprint(&source.path, source.ignore_dotfiles) == seen {
                    continue;
                }
            }
        }
        seen = files::fingerprint(&source.path, source.ignore_dotfiles);
        match source.load() {
            Ok(config) => {
                tracing::info!(domains = ?config.domains(), "reloaded {}", source.path.display());
                state.replace(config);
            }
            Err(errors) => {
                metrics::counter!("tollgate_erl_config_load_errors_total").increment(1);
                for e in errors {
                    tracing::error!("reload refused, the running config stays: {e}");
                }
            }
        }
    }
}

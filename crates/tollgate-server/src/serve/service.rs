//! The service, once its config is settled: the store, the listeners, the
//! shared state, and the HTTP and gRPC servers run until SIGTERM or SIGINT.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use super::overrides::Overrides;
use super::reload::reload_on_change;
use super::sync;
use crate::config::Config;
use crate::http::router;
use crate::listen::grpc::Grpc;
use crate::listen::listener::Listener;
use crate::listen::{Stopping, finish, serving};
use crate::state::AppState;
use crate::store;

pub(super) async fn serve(
    config: Config,
    path: Option<PathBuf>,
    listen: SocketAddr,
    grpc: Option<SocketAddr>,
    overrides: Overrides,
) -> i32 {
    // TLS files are checked before anything starts, as `validate` checks
    // them.
    let tls = match crate::validate::grpc_server(&config) {
        Ok(tls) => tls,
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
    announce(local, grpc.as_ref(), &backend, &config);
    let redis = backend.redis.clone();
    let state = shared_state(&config, backend, metrics.clone());
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
        let rls = crate::grpc::service(state.clone());
        let until = stopping.clone().stopped();
        tokio::spawn(async move {
            let grpc = Grpc {
                rls,
                health: crate::grpc::health().await,
                tls,
                limits,
            };
            grpc.serve(incoming, until).await
        })
    });
    let app = router(state);
    let http = serving::serve_http(listener, app, limits, stopping.stopped()).await;
    let grpc = match grpc_server {
        Some(task) => task.await.unwrap_or_else(|e| Err(e.to_string())),
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

/// The first lines: where the service listens, its store and policies.
fn announce(local: SocketAddr, grpc: Option<&Listener>, backend: &store::Backend, config: &Config) {
    // The first line says where, for people and for scripts and tests. A
    // closed stdout must not stop the service: write errors are ignored.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "tollgate listening on http://{local}");
    if let Some(addr) = grpc.and_then(|g| g.local_addr().ok()) {
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
}

/// What every request handler shares, from the config and the store.
fn shared_state(
    config: &Config,
    backend: store::Backend,
    metrics: Option<PrometheusHandle>,
) -> Arc<AppState> {
    let redis = backend.redis.is_some();
    Arc::new(AppState {
        overrides: if redis {
            crate::overrides::SharedOverrides::shared()
        } else {
            crate::overrides::SharedOverrides::local()
        },
        backend,
        tokens: crate::auth::Tokens::new(
            config.server.token.as_deref(),
            config.server.admin_token.as_deref(),
        ),
        policies: arc_swap::ArcSwap::from_pointee(config.policies.clone()),
        metrics,
        status: Default::default(),
    })
}

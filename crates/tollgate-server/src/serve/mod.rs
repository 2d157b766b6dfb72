//! `tollgate serve`: the rate-limit service. `args.rs` its command line;
//! this file the start (ERL mode handed to `crate::erl::serve`, the file
//! loaded, the command line put over it); `service.rs` the service run
//! until a signal; `overrides.rs` the command line over the file;
//! `reload.rs` the reload loop; `sync.rs` the overrides' Redis sync.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::config::{self, Config};
use crate::grpc_tls::{GrpcTls, TlsFile};

mod args;
mod overrides;
mod reload;
mod service;
mod sync;

pub(crate) use self::args::ServeArgs;
use self::args::whole_urls;
use self::overrides::Overrides;

/// The policies served when no config file is given nor found.
const BUILT_IN: &str = include_str!("../../examples/tollgate.toml");

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
        return run_erl(args, grpc_tls);
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
    let overrides = own_overrides(&args, grpc_tls);
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
    runtime.block_on(service::serve(config, path, listen, grpc, overrides))
}

/// ERL mode (`--erl` or `--envoy-config`): refuses tollgate's own flags,
/// then runs `crate::erl::serve` with the flags it takes.
fn run_erl(args: ServeArgs, grpc_tls: [Option<TlsFile>; 3]) -> i32 {
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
    crate::erl::serve::run(crate::erl::serve::Flags {
        grpc_tls,
        envoy_config: args.envoy_config,
        listen: args.listen,
        grpc_listen: args.grpc_listen,
        redis: whole_urls(args.redis),
        config: args.config,
        extensions: args.erl_extensions,
        headers: args.erl_headers,
        max_connections: args.max_connections.map(|n| n as usize),
    })
}

/// What the command line puts over the config file, kept for reloads.
fn own_overrides(args: &ServeArgs, grpc_tls: [Option<TlsFile>; 3]) -> Overrides {
    Overrides {
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
    }
}

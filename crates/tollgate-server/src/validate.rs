//! `tollgate validate`: checks a config file, or an ERL (envoyproxy/
//! ratelimit) YAML config.

use std::path::{Path, PathBuf};

use clap::Args;
use tonic::transport::Server;

use crate::{config, erl};

/// Arguments of `tollgate validate`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).multiple(true).args(["config", "envoy_config"])))]
pub(crate) struct ValidateArgs {
    /// The config file.
    #[arg(long)]
    config: Option<PathBuf>,
    /// An ERL YAML config: one file, or a directory whose `*.yaml` and
    /// `*.yml` files are read recursively (names starting with `.`
    /// skipped).
    #[arg(long)]
    envoy_config: Option<PathBuf>,
    /// Accept tollgate's extension keys in the ERL config
    /// (`rate_limit: {tollgate_policy: NAME}`, a policy of `--config`);
    /// also turned on by `[erl] extensions = true` in that file.
    #[arg(long, requires = "config")]
    erl_extensions: bool,
}

/// tonic's server with the TLS `config` asks for, its files read and
/// checked now; `None` without TLS (the gRPC listener then serves plain
/// HTTP/2 itself, see `listen/grpc.rs`). `validate` runs the same checks,
/// so that it cannot pass what `serve` refuses.
pub(crate) fn grpc_server(config: &config::Config) -> Result<Option<Server>, String> {
    config
        .server
        .grpc_tls()?
        .map(|tls| {
            tls.apply(Server::builder())
                .map_err(|e| format!("gRPC TLS: {e}"))
        })
        .transpose()
}

/// A config file as `serve` reads it: parsed, and what `serve` checks
/// before it starts.
fn load(path: &Path) -> Result<config::Config, Vec<String>> {
    let to_strings = |errors: Vec<config::ConfigError>| {
        errors.iter().map(ToString::to_string).collect::<Vec<_>>()
    };
    let loaded = config::Config::load(path).map_err(to_strings)?;
    grpc_server(&loaded).map_err(|e| vec![format!("{}: {e}", path.display())])?;
    Ok(loaded)
}

/// Exit 0 when valid (warnings, such as an old name, printed); else every error with its file and line, exit 2.
pub(crate) fn run(args: ValidateArgs) -> i32 {
    let loaded = match args.config.as_deref().map(load).transpose() {
        Ok(set) => set,
        Err(errors) => {
            for e in errors {
                eprintln!("error: {e}");
            }
            return 2;
        }
    };
    if let (Some(path), Some(c)) = (&args.config, &loaded) {
        for warning in &c.warnings {
            eprintln!("warning: {warning}");
        }
        println!(
            "{}: {} policies, valid",
            path.display(),
            c.policies.policies.len()
        );
    }
    let Some(path) = &args.envoy_config else {
        return 0;
    };
    let extensions = args.erl_extensions || loaded.as_ref().is_some_and(|c| c.erl.extensions);
    let lookup = |name: &str| loaded.as_ref().and_then(|c| c.policies.get(name).cloned());
    let policies: Option<erl::PolicyLookup<'_>> = extensions.then_some(&lookup);
    match erl::load(path, true, policies) {
        Ok(erl) => {
            println!(
                "{}: ERL config, {} domains, {} rules, valid",
                path.display(),
                erl.domains().len(),
                erl.rules().len()
            );
            0
        }
        Err(errors) => {
            for e in errors {
                eprintln!("error: {e}");
            }
            2
        }
    }
}

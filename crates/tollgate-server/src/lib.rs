//! The `tollgate` command as a library: the service (`serve`), its HTTP and
//! gRPC front ends over one decision path (`decide.rs`) and one error
//! classification (`error.rs`), and the other subcommands, each in its own
//! module. `main.rs` is a thin binary that calls [`run`].

#[cfg(test)]
mod alloc_tests;
mod auth;
mod bench;
mod check;
mod client;
mod config;
mod decide;
mod descriptor;
mod erl;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod grpc;
#[cfg(test)]
mod grpc_fast_tests;
mod grpc_tls;
mod grpc_token;
mod grpc_unary;
mod http;
mod json_value;
mod listen;
mod meters;
mod override_cli;
mod overrides;
mod palette;
mod regions;
mod rls_answer;
mod rls_encode;
#[cfg(test)]
mod rls_fuzz;
mod rls_view;
mod serve;
mod simulate;
mod state;
mod status;
mod store;
mod test_clock;
mod validate;

use std::ffi::OsString;

use clap::{Parser, Subcommand};

/// tollgate: exact, distributed rate limiting.
#[derive(Debug, Parser)]
#[command(name = "tollgate", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the rate-limit service (HTTP JSON API, Envoy rate limit gRPC API).
    Serve(serve::ServeArgs),
    /// Ask a running service for a decision; exit 0 allowed, 1 denied.
    Check(check::CheckArgs),
    /// Drive a running service's HTTP API; print decisions per second and
    /// latency percentiles.
    Bench(bench::BenchArgs),
    /// Set, read, list or remove a running service's per-key overrides.
    Override(override_cli::OverrideArgs),
    /// Check a config file; print every error with its line.
    Validate(validate::ValidateArgs),
    /// Replay a trace of requests against a policy file on a virtual clock.
    Simulate(simulate::SimulateArgs),
}

/// Parses the command line and runs the subcommand it names; returns the
/// process's exit code.
pub fn run() -> i32 {
    let cli = Cli::parse_from(arguments(std::env::args_os()));
    match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Check(args) => check::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Override(args) => override_cli::run(args),
        Command::Validate(args) => validate::run(args),
        Command::Simulate(args) => simulate::run(args),
    }
}

/// The command line, as `tollgate`'s own. Started as `ratelimit` (the
/// image's `/bin/ratelimit` is a link to `tollgate`, where
/// envoyproxy/ratelimit's deployments run `/bin/ratelimit`), it is
/// `tollgate serve --erl` followed by the arguments given, so that
/// replacing ERL's image is the only change such a deployment needs.
fn arguments(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args = args.into_iter();
    let first = args.next();
    let called = first
        .as_deref()
        .and_then(|a| std::path::Path::new(a).file_name())
        .is_some_and(|name| name == "ratelimit");
    if called {
        let erl = ["tollgate", "serve", "--erl"].map(OsString::from);
        erl.into_iter().chain(args).collect()
    } else {
        first.into_iter().chain(args).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    fn arguments(args: &[&str]) -> Vec<OsString> {
        super::arguments(args.iter().map(OsString::from))
    }

    #[test]
    fn started_as_ratelimit_it_serves_in_erl_mode() {
        assert_eq!(
            arguments(&["/bin/ratelimit"]),
            ["tollgate", "serve", "--erl"]
        );
        assert_eq!(
            arguments(&["ratelimit", "--listen", "127.0.0.1:0"]),
            ["tollgate", "serve", "--erl", "--listen", "127.0.0.1:0"]
        );
        for own in [
            &["tollgate", "serve"][..],
            &["/usr/local/bin/tollgate", "--version"],
            &["/bin/ratelimit-client"],
        ] {
            assert_eq!(arguments(own), own);
        }
    }
}

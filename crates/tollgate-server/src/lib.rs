//! The `tollgate` command as a library: the service (`serve`), its HTTP and
//! gRPC front ends over one decision path (`decide.rs`) and one error
//! classification (`error.rs`), and the other subcommands, each in its own
//! module. `main.rs` is a thin binary that calls [`run`].

mod bench;
mod check;
mod client;
mod config;
mod decide;
mod descriptor;
mod erl;
mod error;
mod grpc;
mod grpc_decode;
mod grpc_tls;
mod grpc_token;
mod http;
mod json_value;
mod overrides;
mod palette;
#[cfg(test)]
mod rls_fuzz;
mod serve;
mod simulate;
mod state;
mod status;
mod store;
mod validate;

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
    /// Check a config file; print every error with its line.
    Validate(validate::ValidateArgs),
    /// Replay a trace of requests against a policy file on a virtual clock.
    Simulate(simulate::SimulateArgs),
}

/// Parses the command line and runs the subcommand it names; returns the
/// process's exit code.
pub fn run() -> i32 {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Check(args) => check::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Validate(args) => validate::run(args),
        Command::Simulate(args) => simulate::run(args),
    }
}

//! The `tollgate` command: a thin entry point; each subcommand lives in its
//! own module.

mod bench;
mod check;
mod client;
mod config;
mod descriptor;
mod erl;
mod grpc;
mod http;
mod serve;
mod simulate;
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

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Check(args) => check::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Validate(args) => validate::run(args),
        Command::Simulate(args) => simulate::run(args),
    };
    std::process::exit(code);
}

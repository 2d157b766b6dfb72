//! The `tollgate` command: a thin entry point; each subcommand lives in its
//! own module.

mod config;
mod simulate;

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
    /// Replay a trace of requests against a policy file on a virtual clock.
    Simulate(simulate::SimulateArgs),
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Simulate(args) => simulate::run(args),
    };
    std::process::exit(code);
}

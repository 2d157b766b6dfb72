//! `tollgate validate`: checks a config file.

use std::path::PathBuf;

use clap::Args;

use crate::config;

/// Arguments of `tollgate validate`.
#[derive(Debug, Args)]
pub(crate) struct ValidateArgs {
    /// The config file.
    #[arg(long)]
    config: PathBuf,
}

/// Exit 0 when the file is valid; else every error with its line, exit 2.
pub(crate) fn run(args: ValidateArgs) -> i32 {
    match config::load(&args.config) {
        Ok(set) => {
            println!(
                "{}: {} policies, valid",
                args.config.display(),
                set.policies.len()
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

//! The `tollgate` command: parse the arguments, run the subcommand (all in
//! the `tollgate_server` library), exit with its code.

fn main() {
    std::process::exit(tollgate_server::run());
}

//! The `tollgate` command: parse the arguments, run the subcommand (all in
//! the `tollgate_server` library), exit with its code.

/// With the `mimalloc` feature (a default one), the service allocates
/// through mimalloc, made for many threads, rather than the system's
/// allocator.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(tollgate_server::run());
}

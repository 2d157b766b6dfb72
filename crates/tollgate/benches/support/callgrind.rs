//! What the instruction-counting benchmarks share (`memory.rs`,
//! `overrides.rs`): this benchmark's own binary run again as a child
//! under callgrind, counting inside the functions named `counted` only.

use std::path::Path;
use std::process::{Command, Stdio};

/// The instructions callgrind counts inside `*counted*` in a child run of
/// this benchmark with `env` set (which tells the child what to run),
/// its profile written to `out`; `what` names the run in a failure.
pub(crate) fn counted_instructions(out: &Path, env: (&str, &str), what: &str) -> f64 {
    let exe = std::env::current_exe().expect("the benchmark's own path");
    let status = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=*counted*",
        ])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&exe)
        .env(env.0, env.1)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("valgrind (package valgrind)");
    assert!(status.success(), "callgrind on {what}: {status}");
    let text = std::fs::read_to_string(out).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("totals: "))
        .and_then(|t| t.trim().parse().ok())
        .expect("a callgrind total")
}

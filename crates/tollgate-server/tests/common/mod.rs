//! What the test files share: the binary without the environment's
//! `TOLLGATE_*` variables, `simulate` run from the repository's root,
//! a running service (`service.rs`) and its HTTP answers (`reply.rs`),
//! Envoy's request messages (`envoy.rs`), gRPC calls framed by hand
//! (`h2.rs`),
//! test certificates (`tls.rs`).

#![allow(dead_code)] // each test file uses its own part

pub(crate) mod envoy;
pub(crate) mod h2;
pub(crate) mod regions;
pub(crate) mod reply;
pub(crate) mod service;
pub(crate) mod tls;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

/// The repository's root, where `examples/` is.
pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The binary, without the `TOLLGATE_*` variables of the environment the
/// tests run in (a developer's `TOLLGATE_REDIS` would point a test at that
/// Redis, `TOLLGATE_TOKEN` lock it out): a test sets what it means to.
pub(crate) fn tollgate() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tollgate"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("TOLLGATE_") {
            cmd.env_remove(name);
        }
    }
    cmd
}

/// Runs `tollgate simulate ARGS` from the repository's root.
pub(crate) fn simulate(args: &[&str]) -> Output {
    tollgate()
        .arg("simulate")
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run tollgate")
}

/// The standard output of a run that must have succeeded.
pub(crate) fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// A fresh directory of this test process's: `tollgate-test-PID/N` under
/// the system's temp dir. A test process cannot remove its own at exit
/// (a test binary has no exit hook, and services started by a test may
/// still write there), so the first call removes the directories of test
/// processes that have ended, and the temp dir holds at most those of the
/// ones running.
pub(crate) fn temp_dir() -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(remove_ended_processes_dirs);
    let dir = std::env::temp_dir()
        .join(format!("tollgate-test-{}", std::process::id()))
        .join(NEXT.fetch_add(1, Ordering::Relaxed).to_string());
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Removes `tollgate-test-PID` directories whose process is gone (on
/// Linux, where `/proc/PID` says so; elsewhere nothing is removed).
fn remove_ended_processes_dirs() {
    if !cfg!(target_os = "linux") {
        return;
    }
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("tollgate-test-"))
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            // Another test process may sweep the same directory at once.
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

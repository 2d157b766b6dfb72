//! Small process, port and directory helpers shared by the harness.

use std::io::{self, Read};
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The hint printed whenever a Redis binary cannot be found.
pub(crate) const INSTALL_HINT: &str = "install Redis first: run the test command from the \
     project README (it installs redis-server, redis-sentinel and redis-cli, e.g. \
     `apt-get install -y redis-server redis-sentinel`), or point TOLLGATE_REDIS_SERVER / \
     TOLLGATE_REDIS_SENTINEL / TOLLGATE_REDIS_CLI at the binaries";

/// Path (or name looked up on `PATH`) of `redis-server`.
pub(crate) fn redis_server_bin() -> String {
    std::env::var("TOLLGATE_REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned())
}

/// Path (or name looked up on `PATH`) of `redis-sentinel`.
pub(crate) fn redis_sentinel_bin() -> String {
    std::env::var("TOLLGATE_REDIS_SENTINEL").unwrap_or_else(|_| "redis-sentinel".to_owned())
}

/// Path (or name looked up on `PATH`) of `redis-cli`.
pub(crate) fn redis_cli_bin() -> String {
    std::env::var("TOLLGATE_REDIS_CLI").unwrap_or_else(|_| "redis-cli".to_owned())
}

/// Ports that must never be used: the default Redis port and its cluster bus
/// port, so that a server someone happens to run is never touched.
fn reserved(port: u16) -> bool {
    port == 6379 || port == 16379
}

/// Returns a loopback TCP port that was free a moment ago.
///
/// It binds `127.0.0.1:0`, reads the port the kernel picked and closes the
/// listener again, so the port can be taken by someone else before it is
/// used: [`RedisServer`](crate::RedisServer) handles that race by retrying
/// with a new port. Never returns 6379 or 16379.
///
/// # Panics
///
/// If no loopback port can be bound at all.
pub fn free_port() -> u16 {
    loop {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap_or_else(|e| panic!("cannot bind a free port on 127.0.0.1: {e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("cannot read the bound port: {e}"))
            .port();
        if !reserved(port) {
            return port;
        }
    }
}

/// Creates a fresh, empty directory under the system temp dir.
pub(crate) fn make_temp_dir(tag: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let base = std::env::temp_dir();
    for _ in 0..100 {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!(
            "tollgate-testkit-{tag}-{}-{n}-{nanos:x}",
            std::process::id()
        ));
        match std::fs::create_dir(&dir) {
            Ok(()) => return dir,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => panic!("cannot create temp dir {}: {e}", dir.display()),
        }
    }
    panic!("cannot create a unique temp dir under {}", base.display())
}

/// Sends `signal` (a name such as `STOP`) to `pid` using the shell's `kill`.
pub(crate) fn send_signal(pid: u32, signal: &str) -> io::Result<()> {
    let status = Command::new("sh")
        .arg("-c")
        .arg("kill -s \"$1\" \"$2\"")
        .arg("tollgate-testkit-kill")
        .arg(signal)
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "kill -s {signal} {pid} failed: {status}"
        )))
    }
}

/// Output of a finished command.
pub(crate) struct Output {
    pub(crate) success: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs `program args` with no stdin, capturing its output; kills it and
/// panics if it has not finished within `timeout`.
pub(crate) fn run_with_timeout(program: &str, args: &[String], timeout: Duration) -> Output {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                panic!("`{program}` not found: {INSTALL_HINT}")
            }
            panic!("cannot run `{program}`: {e}")
        });
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "`{program} {}` did not finish within {timeout:?}",
                    args.join(" ")
                );
            }
            Err(e) => panic!("waiting for `{program}` failed: {e}"),
        }
    };
    Output {
        success: status.success(),
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut buf);
        }
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// The last `lines` lines of a text file (empty if unreadable).
pub(crate) fn file_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Kills a child we spawned and reaps it; errors (already dead) are ignored.
pub(crate) fn kill_and_reap(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

//! The `redis-server` process's lifecycle: start attempts on fresh ports,
//! the watchdog that outlives a killed test, readiness, SIGSTOP/SIGCONT,
//! SIGKILL and restart.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{Inner, Program, RedisServer, SENTINEL_CONFIG, STARTUP_TIMEOUT, ServerState};
use crate::resp::Reply;
use crate::util::{self, INSTALL_HINT};

/// How many fresh ports [`RedisServer::start`] tries when the port it picked
/// was taken by someone else before `redis-server` could bind it.
const PORT_ATTEMPTS: usize = 10;

/// Shell snippet run next to every server: it blocks reading its stdin, a
/// pipe whose write end only the test process holds. When the harness shuts
/// the server down it first writes `disarm`; if instead the test process dies
/// without running `Drop` (SIGKILL, abort), the pipe closes, `read` sees EOF
/// and the watchdog kills the orphaned server and removes its directory.
const WATCHDOG: &str = "read -r line; [ \"$line\" = disarm ] || \
     { kill -s CONT \"$1\"; kill -s KILL \"$1\"; rm -rf \"$2\"; }; exit 0";

pub(super) struct Process {
    child: Child,
    watchdog: Option<Child>,
}

impl Process {
    /// Kills the server for good: disarms the watchdog (so it never signals a
    /// pid we may have reaped), resumes it in case it is stopped, SIGKILLs it
    /// and reaps it.
    pub(super) fn kill(mut self) {
        if let Some(mut watchdog) = self.watchdog.take() {
            if let Some(mut stdin) = watchdog.stdin.take() {
                let _ = stdin.write_all(b"disarm\n");
            }
            let _ = watchdog.wait();
        }
        let _ = util::send_signal(self.child.id(), "CONT");
        util::kill_and_reap(&mut self.child);
    }
}

/// Chooses the port for one start attempt, plus extra arguments that depend
/// on the attempt (the cluster bus port).
pub(crate) type PortPicker<'a> = &'a mut dyn FnMut() -> (u16, Vec<String>);

/// Why one start attempt failed.
enum AttemptError {
    /// The process exited; `port_in_use` tells whether the log says it could
    /// not bind its port(s).
    Exited {
        status: ExitStatus,
        port_in_use: bool,
    },
    TimedOut,
}

impl RedisServer {
    /// Starts a server in a fresh temp directory, asking `pick` for a new port
    /// (and port-dependent arguments) whenever the previous one turned out to
    /// be taken.
    pub(crate) fn launch(tag: &str, extra: Vec<String>, pick: PortPicker<'_>) -> RedisServer {
        Self::launch_program(tag, Program::Server, extra, pick)
    }

    /// [`RedisServer::launch`] for `program` (`redis-sentinel`, or
    /// `redis-server`).
    pub(crate) fn launch_program(
        tag: &str,
        program: Program,
        extra: Vec<String>,
        pick: PortPicker<'_>,
    ) -> RedisServer {
        let mut last_error = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let dir = util::make_temp_dir(tag);
            let (port, port_args) = pick();
            let mut args = extra.clone();
            args.extend(port_args);
            let server = RedisServer {
                port,
                dir,
                password: args
                    .iter()
                    .position(|a| a == "--requirepass")
                    .and_then(|i| args.get(i + 1))
                    .cloned(),
                args,
                program: program.clone(),
                inner: Mutex::new(Inner {
                    state: ServerState::Killed,
                    pid: 0,
                    process: None,
                }),
            };
            match server.spawn_and_wait() {
                Ok(()) => return server,
                Err(AttemptError::Exited {
                    port_in_use: true,
                    status,
                }) => {
                    last_error = format!(
                        "port {port} was taken ({status}); log:\n{}",
                        server.log_tail(5)
                    );
                }
                Err(e) => server.startup_panic(&e),
            }
        }
        panic!(
            "redis-server could not bind a free port after {PORT_ATTEMPTS} attempts; last: {last_error}"
        )
    }

    /// Spawns the process on `self.port` and waits for it to be ready.
    fn spawn_and_wait(&self) -> Result<(), AttemptError> {
        let log_path = self.log_path();
        let log_start = std::fs::metadata(&log_path).map(|m| m.len()).unwrap_or(0);
        let mut process = self.spawn();
        let pid = process.child.id();
        {
            let mut inner = self.lock();
            inner.pid = pid;
        }
        match wait_ready(self, &mut process.child, Instant::now() + STARTUP_TIMEOUT) {
            Ok(()) => {
                let mut inner = self.lock();
                inner.state = ServerState::Running;
                inner.process = Some(process);
                Ok(())
            }
            Err(err) => {
                process.kill();
                Err(match err {
                    AttemptError::Exited { status, .. } => {
                        let log = std::fs::read(&log_path).unwrap_or_default();
                        let new = String::from_utf8_lossy(
                            log.get(usize::try_from(log_start).unwrap_or(0)..)
                                .unwrap_or_default(),
                        );
                        AttemptError::Exited {
                            status,
                            port_in_use: new.contains("Address already in use"),
                        }
                    }
                    other => other,
                })
            }
        }
    }

    fn spawn(&self) -> Process {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", self.log_path().display()));
        let log_err = log
            .try_clone()
            .unwrap_or_else(|e| panic!("cannot clone log file handle: {e}"));
        let mut command = match &self.program {
            Program::Server => Command::new(util::redis_server_bin()),
            Program::Sentinel(config) => {
                let path = self.dir.join(SENTINEL_CONFIG);
                if !path.exists() {
                    std::fs::write(&path, config)
                        .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
                }
                let mut command = Command::new(util::redis_sentinel_bin());
                command.arg(path);
                command
            }
        };
        let bin = format!("{:?}", command.get_program());
        let child = command
            .arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--daemonize", "no", "--dir"])
            .arg(&self.dir)
            .args(&self.args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .unwrap_or_else(|e| {
                if e.kind() == io::ErrorKind::NotFound {
                    panic!("`{bin}` not found: {INSTALL_HINT}");
                }
                panic!("cannot start `{bin}`: {e}")
            });
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg("tollgate-testkit-watchdog")
            .arg(child.id().to_string())
            .arg(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        Process { child, watchdog }
    }

    fn startup_panic(&self, err: &AttemptError) -> ! {
        let what = match err {
            AttemptError::Exited { status, .. } => format!("exited during startup ({status})"),
            AttemptError::TimedOut => {
                format!("did not answer PING within {STARTUP_TIMEOUT:?}")
            }
        };
        panic!(
            "redis-server on 127.0.0.1:{} {what}; args {:?}; log tail ({}):\n{}",
            self.port,
            self.args,
            self.log_path().display(),
            self.log_tail(30)
        )
    }

    /// Kills the process with SIGKILL (no shutdown, no save) and reaps it.
    /// The port is closed afterwards; [`RedisServer::restart`] brings the
    /// server back on the same port. Does nothing if already killed.
    pub fn kill9(&self) {
        let process = {
            let mut inner = self.lock();
            inner.state = ServerState::Killed;
            inner.process.take()
        };
        if let Some(process) = process {
            process.kill();
        }
    }

    /// Freezes the process with SIGSTOP: connections are still accepted by
    /// the kernel but nothing is answered, like a hung or partitioned server.
    ///
    /// # Panics
    ///
    /// If the server is killed.
    pub fn stop(&self) {
        self.signal("STOP", ServerState::Stopped);
    }

    /// Resumes a process frozen by [`RedisServer::stop`] (SIGCONT).
    ///
    /// # Panics
    ///
    /// If the server is killed.
    pub fn cont(&self) {
        self.signal("CONT", ServerState::Running);
    }

    fn signal(&self, signal: &str, new_state: ServerState) {
        let mut inner = self.lock();
        let Some(process) = inner.process.as_ref() else {
            panic!(
                "cannot send SIG{signal} to redis-server on port {}: it is killed",
                self.port
            );
        };
        let pid = process.child.id();
        util::send_signal(pid, signal)
            .unwrap_or_else(|e| panic!("SIG{signal} to redis-server pid {pid} failed: {e}"));
        inner.state = new_state;
    }

    /// Starts the server again on the same port, with the same arguments and
    /// directory, and waits until it answers `PING`. A server that is still
    /// alive (running or stopped) is killed with SIGKILL first. Without
    /// persistence the dataset is empty afterwards; cluster nodes keep their
    /// identity (`nodes.conf` lives in the directory).
    ///
    /// # Panics
    ///
    /// If the server does not come back within [`STARTUP_TIMEOUT`], e.g.
    /// because another process took the port meanwhile.
    pub fn restart(&self) {
        self.kill9();
        // The port was just released by a process we killed; another test may
        // race for it, in which case there is nothing sensible to do but fail.
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match self.spawn_and_wait() {
                Ok(()) => return,
                Err(AttemptError::Exited {
                    port_in_use: true, ..
                }) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => self.startup_panic(&e),
            }
        }
    }
}

/// Polls until the child answers `PING` on `port` *and* reports our pid in
/// `INFO server` (so a server that some other test started on the same port
/// is never mistaken for ours), or until the child exits or time runs out.
fn wait_ready(
    server: &RedisServer,
    child: &mut Child,
    deadline: Instant,
) -> Result<(), AttemptError> {
    let pid = child.id();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                return Err(AttemptError::Exited {
                    status,
                    port_in_use: false,
                });
            }
            Ok(None) => {}
            Err(e) => panic!("waiting for redis-server pid {pid} failed: {e}"),
        }
        if is_ours_and_ready(server, pid) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(AttemptError::TimedOut);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn is_ours_and_ready(server: &RedisServer, pid: u32) -> bool {
    let Ok(mut conn) = server.conn(Duration::from_millis(250)) else {
        return false;
    };
    let Ok(info) = conn.text(&["INFO", "server"]) else {
        return false;
    };
    let ours = info
        .lines()
        .filter_map(|l| l.strip_prefix("process_id:"))
        .any(|p| p.trim() == pid.to_string());
    ours && conn
        .cmd(&["PING"])
        .is_ok_and(|r| r == Reply::Status("PONG".into()))
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::net::Ipv4Addr;

    use super::*;

    /// The port-race retry: the first candidate port is already served by
    /// another redis-server; startup must notice (pid mismatch, bind failure)
    /// and move on to a fresh port instead of adopting the foreign server.
    #[test]
    fn start_retries_when_port_is_taken_by_another_redis() {
        let other = RedisServer::start();
        let mut ports = VecDeque::from([other.port()]);
        let mine = RedisServer::launch("redis", Vec::new(), &mut || {
            (
                ports.pop_front().unwrap_or_else(util::free_port),
                Vec::new(),
            )
        });
        assert_ne!(mine.port(), other.port());
        assert_ne!(mine.pid(), other.pid());
        assert!(mine.ping(Duration::from_secs(1)));
        assert!(other.ping(Duration::from_secs(1)));
    }

    /// Same with a non-Redis listener squatting on the port.
    #[test]
    fn start_retries_when_port_is_taken_by_a_plain_listener() {
        let squatter = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let taken = squatter.local_addr().unwrap().port();
        let mut ports = VecDeque::from([taken]);
        let mine = RedisServer::launch("redis", Vec::new(), &mut || {
            (
                ports.pop_front().unwrap_or_else(util::free_port),
                Vec::new(),
            )
        });
        assert_ne!(mine.port(), taken);
        assert!(mine.ping(Duration::from_secs(1)));
    }
}

//! A running `tollgate serve` on an ephemeral port, spoken to over a real
//! socket (the dashboard and status page tests share it).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// A fresh directory of this test process's under the system's temp dir.
pub(crate) fn temp_dir() -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "tollgate-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A running `tollgate serve`; killed when dropped.
pub(crate) struct Service {
    child: Child,
    pub(crate) addr: String,
    /// Where gRPC listens, when it does.
    pub(crate) grpc: Option<String>,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Service {
    /// `tollgate serve --config CONFIG ARGS` on 127.0.0.1, port picked by
    /// the system.
    pub(crate) fn start(config: &Path, args: &[&str]) -> Service {
        let config = config.display().to_string();
        let mut all = vec!["serve", "--listen", "127.0.0.1:0", "--config", &config];
        all.extend_from_slice(args);
        Service::run(&all, &[])
    }

    /// `tollgate ARGS` with only the variables `env` (the first line it
    /// prints must be where it listens, as `serve` prints it).
    pub(crate) fn run(args: &[&str], env: &[(&str, &str)]) -> Service {
        Service::run_program(Path::new(env!("CARGO_BIN_EXE_tollgate")), args, env)
    }

    /// [`Service::run`] with the binary started as `program` (a link to
    /// it, whose name can change what it does).
    pub(crate) fn run_program(program: &Path, args: &[&str], env: &[(&str, &str)]) -> Service {
        let mut child = Command::new(program)
            .args(args)
            .env_clear()
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (mut first, mut second) = (String::new(), String::new());
        stdout.read_line(&mut first).unwrap();
        // `serve` prints the gRPC address next, or the store
        stdout.read_line(&mut second).unwrap();
        let grpc = second
            .trim()
            .strip_prefix("tollgate gRPC (Envoy rate limit service) on ")
            .map(str::to_string);
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let addr = first
            .trim()
            .strip_prefix("tollgate listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_string();
        Service { child, addr, grpc }
    }

    /// `tollgate serve` in ERL mode on the config at `config` (file or
    /// directory), with only the variables `env`; HTTP and gRPC on free
    /// ports (gRPC's is not known to the caller).
    pub(crate) fn erl(config: &Path, env: &[(&str, &str)]) -> Service {
        Service::erl_with(config, &[], env)
    }

    /// [`Service::erl`] with more flags.
    pub(crate) fn erl_with(config: &Path, flags: &[&str], env: &[(&str, &str)]) -> Service {
        let config = config.display().to_string();
        let mut args = vec!["serve", "--envoy-config", config.as_str()];
        args.extend(["--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0"]);
        args.extend_from_slice(flags);
        Service::run(&args, env)
    }

    /// One HTTP/1.1 request with extra header lines; the response's text.
    pub(crate) fn request_with(
        &self,
        method: &str,
        path: &str,
        body: &str,
        headers: &str,
    ) -> String {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{headers}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    }

    /// One HTTP/1.1 request; the response's text.
    pub(crate) fn request(&self, method: &str, path: &str, body: &str) -> String {
        self.request_with(method, path, body, "")
    }

    /// `POST /v1/check` for `user-KEY`; the response's text.
    pub(crate) fn check(&self, policy: &str, key: usize) -> String {
        self.request(
            "POST",
            "/v1/check",
            &format!("{{\"policy\":\"{policy}\",\"key\":\"user-{key}\"}}"),
        )
    }
}

//! A running `tollgate serve` on ephemeral ports, spoken to over real
//! sockets: the one service helper of every test file here (native and
//! ERL mode, its log kept, HTTP answered as text or as a [`Reply`]).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use serde_json::Value;
use tollgate_testkit::PATIENCE;
use tonic::transport::Channel;

use super::reply::Reply;
pub(crate) use super::temp_dir;

/// A running `tollgate serve`; killed when dropped.
pub(crate) struct Service {
    child: Child,
    /// Where HTTP listens.
    pub(crate) addr: String,
    /// Where gRPC listens, when it does.
    pub(crate) grpc: Option<String>,
    /// The config file given with `--config`, when [`Service::start`] or
    /// [`Service::with_config`] gave one.
    pub(crate) config: Option<PathBuf>,
    /// Its standard error so far.
    log: Arc<Mutex<String>>,
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
        Service::start_env(config, args, &[])
    }

    /// [`Service::start`] with only the variables `env`.
    pub(crate) fn start_env(config: &Path, args: &[&str], env: &[(&str, &str)]) -> Service {
        let path = config.display().to_string();
        let mut all = vec!["serve", "--listen", "127.0.0.1:0", "--config", &path];
        all.extend_from_slice(args);
        let mut service = Service::run(&all, env);
        service.config = Some(config.to_path_buf());
        service
    }

    /// [`Service::start`] on a config file of its own holding `text`.
    pub(crate) fn with_config(text: &str, args: &[&str]) -> Service {
        let path = temp_dir().join("tollgate.toml");
        std::fs::write(&path, text).unwrap();
        Service::start(&path, args)
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
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let kept = log.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            while stderr.read_line(&mut line).is_ok_and(|n| n > 0) {
                kept.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (mut first, mut second) = (String::new(), String::new());
        stdout.read_line(&mut first).unwrap();
        // `serve` prints the gRPC address next, or the store
        stdout.read_line(&mut second).unwrap();
        // Keep reading, so the service never writes into a closed pipe.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let grpc = second
            .trim()
            .strip_prefix("tollgate gRPC (Envoy rate limit service) on ")
            .map(str::to_string);
        let addr = first
            .trim()
            .strip_prefix("tollgate listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}: {}", log.lock().unwrap()))
            .to_string();
        Service {
            child,
            addr,
            grpc,
            config: None,
            log,
        }
    }

    /// `tollgate serve` in ERL mode on the config at `config` (file or
    /// directory), with only the variables `env`; HTTP and gRPC on free
    /// ports.
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

    /// Where gRPC listens (the service must have been asked to).
    pub(crate) fn grpc(&self) -> &str {
        self.grpc.as_deref().expect("a gRPC listener")
    }

    /// A client of Envoy's rate limit service on its gRPC listener.
    pub(crate) async fn client(&self) -> RateLimitServiceClient<Channel> {
        RateLimitServiceClient::connect(format!("http://{}", self.grpc()))
            .await
            .unwrap()
    }

    /// The config file it was started with.
    pub(crate) fn config(&self) -> &Path {
        self.config.as_deref().expect("a --config file")
    }

    /// What it has written to its standard error so far.
    pub(crate) fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits until its standard error holds `needle` (fails after
    /// [`PATIENCE`]).
    pub(crate) fn wait_for_log(&self, needle: &str) {
        let start = Instant::now();
        while !self.log.lock().unwrap().contains(needle) {
            assert!(
                start.elapsed() < PATIENCE,
                "no {needle:?} in the log: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends it the signal `name` (`HUP`, ...).
    pub(crate) fn signal(&self, name: &str) {
        Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap();
    }

    /// Waits until it exits (fails after [`PATIENCE`]); how it exited.
    pub(crate) fn wait_for_exit(&mut self) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(start.elapsed() < PATIENCE, "did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
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
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{headers}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        )
        .unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).unwrap();
        String::from_utf8_lossy(&response).into_owned()
    }

    /// One HTTP/1.1 request; the response's text.
    pub(crate) fn request(&self, method: &str, path: &str, body: &str) -> String {
        self.request_with(method, path, body, "")
    }

    /// One HTTP/1.1 request with headers; the response read.
    pub(crate) fn call(
        &self,
        method: &str,
        path: &str,
        body: &str,
        headers: &[(&str, &str)],
    ) -> Reply {
        let lines: String = headers
            .iter()
            .map(|(k, v)| format!("{k}: {v}\r\n"))
            .collect();
        Reply::parse(&self.request_with(method, path, body, &lines))
    }

    /// `POST PATH` with a JSON body; the response read.
    pub(crate) fn post(&self, path: &str, body: Value) -> Reply {
        self.call("POST", path, &body.to_string(), &[])
    }

    /// One HTTP/1.1 request: status and body.
    pub(crate) fn http(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let reply = self.call(method, path, body, &[]);
        (reply.status, reply.body)
    }

    /// `POST /v1/check` for `user-KEY`; the response's text.
    pub(crate) fn check(&self, policy: &str, key: usize) -> String {
        self.request(
            "POST",
            "/v1/check",
            &format!("{{\"policy\":\"{policy}\",\"key\":\"user-{key}\"}}"),
        )
    }

    /// Polls `/v1/stats` until its last reload matches `seen` (or
    /// `PATIENCE` passes, and the test fails on it); that reload.
    pub(crate) fn last_reload(&self, seen: impl Fn(&Value) -> bool) -> Value {
        let t = Instant::now();
        loop {
            let reload = self.call("GET", "/v1/stats", "", &[]).json()["reload"].clone();
            if seen(&reload) {
                return reload;
            }
            assert!(t.elapsed() < PATIENCE, "last reload: {reload}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

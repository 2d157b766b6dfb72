//! Connection hygiene on real sockets against the binary: an idle
//! connection is closed, a head or a body trickled a byte at a time is cut,
//! and over `max_connections` a connection is closed and a warning logged
//! while the connections within the cap are still answered, on the HTTP
//! listener and the gRPC ones (tollgate's own mode and ERL mode). The
//! timeouts are configured short; each event is waited for with a
//! generous bound, never timed.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use tollgate_testkit::PATIENCE;

mod common;

use common::service::{Service, temp_dir};

const POLICY: &str = r#"
[[policy]]
name = "books"
algorithm = "fixed_window"
limit = 3
window = "1h"
"#;

/// `tollgate serve ARGS` with `[server] SERVER` and one policy in its
/// config file.
fn start(server: &str, args: &[&str]) -> Service {
    Service::with_config(&format!("[server]\n{server}\n{POLICY}"), args)
}

fn connect(addr: &str) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    stream
}

/// Reads until the service closes the connection; what it sent. Fails if
/// it is still open after [`PATIENCE`].
fn until_closed(stream: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) => panic!(
                "still open ({e}) after {PATIENCE:?}: {:?}",
                String::from_utf8_lossy(&got)
            ),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Sends `bytes` one at a time, 100 ms apart, until the service closes
/// the connection (a write fails) or they are all sent.
fn trickle(stream: &mut TcpStream, bytes: &[u8]) {
    for b in bytes {
        if stream.write_all(&[*b]).is_err() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `GET /healthz` on a kept-alive connection: its status line.
fn healthz_on(stream: &mut TcpStream) -> String {
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0; 1024];
    while !String::from_utf8_lossy(&got).ends_with("ok\n") {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "closed: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got)
        .lines()
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn an_idle_connection_is_closed_on_both_listeners() {
    let svc = start(
        "idle_timeout = \"1s\"\nheader_timeout = \"1h\"",
        &["--grpc-listen", "127.0.0.1:0"],
    );
    let mut http = connect(&svc.addr);
    let mut grpc = connect(svc.grpc.as_ref().unwrap());
    assert_eq!(until_closed(&mut http), "");
    // (gRPC's server speaks first: its HTTP/2 settings.)
    until_closed(&mut grpc);
    // Idle after a request too.
    let mut used = connect(&svc.addr);
    assert_eq!(healthz_on(&mut used), "HTTP/1.1 200 OK");
    assert_eq!(until_closed(&mut used), "");
}

#[test]
fn a_trickled_head_is_cut() {
    let svc = start("header_timeout = \"1s\"\nidle_timeout = \"1h\"", &[]);
    let mut stream = connect(&svc.addr);
    let head = format!(
        "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: {}",
        "a".repeat(600)
    );
    trickle(&mut stream, head.as_bytes());
    assert_eq!(until_closed(&mut stream), "", "no answer to half a head");
}

#[test]
fn a_trickled_body_is_cut_with_a_json_408() {
    let svc = start("body_timeout = \"1s\"\nidle_timeout = \"1h\"", &[]);
    let mut stream = connect(&svc.addr);
    stream
        .write_all(b"POST /v1/check HTTP/1.1\r\nHost: t\r\nContent-Length: 600\r\n\r\n{")
        .unwrap();
    trickle(&mut stream, &[b' '; 599]);
    let answer = until_closed(&mut stream);
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer:?}");
    assert!(answer.contains(r#""code":"request_timeout""#), "{answer:?}");
}

#[test]
fn over_the_cap_a_connection_is_closed_and_logged_while_those_within_are_answered() {
    let svc = start("max_connections = 2", &["--grpc-listen", "127.0.0.1:0"]);
    let mut first = connect(&svc.addr);
    assert_eq!(healthz_on(&mut first), "HTTP/1.1 200 OK");
    let second = connect(&svc.addr);
    let mut third = connect(&svc.addr);
    assert_eq!(until_closed(&mut third), "");
    svc.wait_for_log("the HTTP listener holds its cap of 2 connections");
    assert_eq!(healthz_on(&mut first), "HTTP/1.1 200 OK");
    // A slot given back is taken again.
    drop(second);
    let start = Instant::now();
    loop {
        let mut again = connect(&svc.addr);
        if again
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .is_ok()
            && until_closed(&mut again).starts_with("HTTP/1.1 200 ")
        {
            break;
        }
        assert!(start.elapsed() < PATIENCE, "the slot never came back");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The gRPC listener has its own cap.
    let grpc = svc.grpc.as_ref().unwrap();
    let _held = [connect(grpc), connect(grpc)];
    let mut over = connect(grpc);
    assert_eq!(until_closed(&mut over), "");
    svc.wait_for_log("the gRPC listener holds its cap of 2 connections");
}

#[test]
fn erl_mode_takes_the_limits_of_its_config_and_the_flag() {
    let dir = temp_dir();
    std::fs::write(
        dir.join("config.yaml"),
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
    )
    .unwrap();
    let toml = dir.join("tollgate.toml");
    std::fs::write(&toml, format!("[server]\nidle_timeout = \"1s\"\n{POLICY}")).unwrap();
    let yaml = dir.join("config.yaml");
    let svc = Service::run(
        &[
            "serve",
            "--envoy-config",
            yaml.to_str().unwrap(),
            "--config",
            toml.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--grpc-listen",
            "127.0.0.1:0",
            "--max-connections",
            "1",
        ],
        &[],
    );
    let grpc = svc.grpc.as_ref().unwrap();
    let mut idle = connect(grpc);
    until_closed(&mut idle);
    let _held = connect(&svc.addr);
    let mut over = connect(&svc.addr);
    assert_eq!(until_closed(&mut over), "");
    svc.wait_for_log("the HTTP listener holds its cap of 1 connections");
}

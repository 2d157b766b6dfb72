//! `tollgate serve --erl` with `CONFIG_TYPE=GRPC_XDS_SOTW`: the binary
//! takes its config from the xDS server ERL's variables name, and refuses
//! to start on what it cannot do. The stream itself (pushes, ACK, NACK,
//! reconnects) is tested against a stand-in ADS server in
//! `src/erl/xds/tests.rs`.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `tollgate serve --erl` on free ports with only `env` set.
fn serve(env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tollgate"));
    cmd.args(SERVE.split(' '))
        .env_clear()
        .envs(env.iter().copied());
    cmd
}

/// Free ports for both front ends.
const SERVE: &str = "serve --erl --listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0";

#[test]
fn dials_the_xds_server_erls_variables_name() {
    let xds = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = xds.local_addr().unwrap().to_string();
    let mut child = serve(&[
        ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
        ("CONFIG_GRPC_XDS_SERVER_URL", &url),
        ("CONFIG_GRPC_XDS_NODE_ID", "eg-infra"),
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    for _ in 0..4 {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        lines.push(line);
    }
    assert_eq!(
        lines[3].trim(),
        format!("ERL mode: xDS from http://{url} (node eg-infra)"),
        "{lines:?}"
    );
    // it connects and opens HTTP/2, as a gRPC client does
    xds.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut conn = loop {
        match xds.accept() {
            Ok((conn, _)) => break conn,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("no connection to the xDS server: {e}"),
        }
    };
    conn.set_nonblocking(false).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut preface = [0u8; 14];
    conn.read_exact(&mut preface).unwrap();
    assert_eq!(&preface, b"PRI * HTTP/2.0");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn refuses_what_it_cannot_do() {
    for (env, args, says) in [
        (
            vec![("CONFIG_TYPE", "GRPC_XDS_DELTA")],
            vec![],
            "CONFIG_TYPE=GRPC_XDS_DELTA: not FILE or GRPC_XDS_SOTW",
        ),
        (
            vec![
                ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
                ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
            ],
            vec![],
            "CONFIG_GRPC_XDS_SERVER_USE_TLS=true needs CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
        ),
        (
            vec![("CONFIG_TYPE", "GRPC_XDS_SOTW")],
            vec!["--envoy-config", "/nonexistent"],
            "CONFIG_TYPE=GRPC_XDS_SOTW and --envoy-config both give the config",
        ),
    ] {
        let out = serve(&env).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{env:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{stderr}");
    }
}

//! TLS on `tollgate serve`'s own gRPC server: `--grpc-tls-cert`,
//! `--grpc-tls-key`, `--grpc-tls-client-ca` and their `[server]` fields,
//! with a CA and certificates made in the test. Under mutual TLS a client
//! without a certificate is refused; a file that is missing or is no PEM
//! stops the start (exit 2) with the flag or field and the path.

mod common;

use std::path::Path;
use std::process::Command;

use common::envoy::request;
use common::service::{Service, temp_dir};
use common::tls::certificates;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

const POLICIES: &str = r#"
[[policy]]
name = "per-ip"
algorithm = "fixed_window"
limit = 3
window = "1d"

[[descriptor]]
domain = "edge"
entries = [{ key = "remote_address" }]
policy = "per-ip"
"#;

/// One call over a TLS channel with `tls`: the descriptor's remaining, or
/// the error (at connect or at the call).
async fn call(grpc: &str, tls: ClientTlsConfig) -> Result<u32, String> {
    let channel = Channel::from_shared(format!("https://{grpc}"))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
        .map_err(|e| format!("connect: {e:?}"))?;
    let response = RateLimitServiceClient::new(channel)
        .should_rate_limit(request("edge", &[("remote_address", "10.0.0.9")]))
        .await
        .map_err(|e| format!("call: {e:?}"))?;
    Ok(response.into_inner().statuses[0].limit_remaining)
}

/// `tollgate serve` on free ports with no variables but `env`, then `args`.
fn tollgate(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tollgate"));
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .args(["--grpc-listen", "127.0.0.1:0"])
        .args(args)
        .env_clear()
        .envs(env.iter().copied());
    cmd
}

/// `tollgate serve --config` with `config` written to `dir`, then `args`.
fn serve(dir: &Path, config: &str, args: &[&str]) -> Command {
    let path = dir.join("tollgate.toml");
    std::fs::write(&path, config).unwrap();
    let path = path.display().to_string();
    tollgate(&[&["--config", path.as_str()], args].concat(), &[])
}

#[tokio::test]
async fn tls_from_flags_and_mutual_tls_from_the_config_file() {
    let dir = temp_dir();
    let (ca, client_cert, client_key) = certificates(&dir);
    let server_ca = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&ca))
        .domain_name("localhost");

    // TLS from the flags: any client that trusts the CA is served
    let path = dir.join("flags.toml");
    std::fs::write(&path, POLICIES).unwrap();
    let (cert, key) = (dir.join("server.pem"), dir.join("server.key"));
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let flags = Service::start(
        &path,
        &[
            "--grpc-listen",
            "127.0.0.1:0",
            "--grpc-tls-cert",
            cert,
            "--grpc-tls-key",
            key,
        ],
    );
    let grpc = flags.grpc.clone().unwrap();
    assert_eq!(call(&grpc, server_ca.clone()).await, Ok(2));
    // plaintext is not served
    let plain = async {
        let mut client = RateLimitServiceClient::connect(format!("http://{grpc}")).await?;
        client
            .should_rate_limit(request("edge", &[("remote_address", "10.0.0.9")]))
            .await?;
        Ok::<(), Box<dyn std::error::Error>>(())
    };
    assert!(plain.await.is_err(), "plaintext gRPC was served over TLS");
    drop(flags);

    // mutual TLS from [server], paths relative to the file
    let path = dir.join("mtls.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\ngrpc_listen = \"127.0.0.1:0\"\ngrpc_tls_cert = \"server.pem\"\ngrpc_tls_key = \"server.key\"\ngrpc_tls_client_ca = \"ca.pem\"\n{POLICIES}"
        ),
    )
    .unwrap();
    let mtls = Service::start(&path, &[]);
    let grpc = mtls.grpc.clone().unwrap();
    let with_cert = server_ca
        .clone()
        .identity(Identity::from_pem(&client_cert, &client_key));
    assert_eq!(call(&grpc, with_cert.clone()).await, Ok(2));
    let refused = call(&grpc, server_ca.clone()).await;
    assert!(
        refused.is_err(),
        "a client without a certificate was served"
    );
    // the refused client consumed nothing
    assert_eq!(call(&grpc, with_cert).await, Ok(1));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_missing_or_bad_file_names_the_flag_or_field_and_the_path() {
    let dir = temp_dir();
    certificates(&dir);
    std::fs::write(dir.join("not.pem"), "hello\n").unwrap();
    let path = |name: &str| dir.join(name).display().to_string();
    let (cert, key, missing, not_pem) = (
        path("server.pem"),
        path("server.key"),
        path("missing.pem"),
        path("not.pem"),
    );
    let with_files = format!(
        "[server]\ngrpc_tls_cert = \"server.pem\"\ngrpc_tls_key = \"missing.key\"\n{POLICIES}"
    );
    for (config, args, says) in [
        (
            POLICIES.to_string(),
            vec!["--grpc-tls-cert", &missing, "--grpc-tls-key", &key],
            format!("--grpc-tls-cert {missing}: No such file"),
        ),
        (
            POLICIES.to_string(),
            vec!["--grpc-tls-cert", &cert, "--grpc-tls-key", &not_pem],
            format!("--grpc-tls-key {not_pem}: no PEM private key"),
        ),
        (
            POLICIES.to_string(),
            vec!["--grpc-tls-cert", &not_pem, "--grpc-tls-key", &key],
            format!("--grpc-tls-cert {not_pem}: no PEM certificate"),
        ),
        (
            POLICIES.to_string(),
            vec![
                "--grpc-tls-cert",
                &cert,
                "--grpc-tls-key",
                &key,
                "--grpc-tls-client-ca",
                &key,
            ],
            format!("--grpc-tls-client-ca {key}: no PEM certificate"),
        ),
        (
            with_files.clone(),
            vec![],
            format!(
                "[server] `grpc_tls_key` {}: No such file",
                path("missing.key")
            ),
        ),
        (
            POLICIES.to_string(),
            vec!["--grpc-tls-cert", &cert],
            "--grpc-tls-cert needs --grpc-tls-key".to_string(),
        ),
        (
            POLICIES.to_string(),
            vec!["--grpc-tls-client-ca", &cert],
            "--grpc-tls-client-ca needs --grpc-tls-cert".to_string(),
        ),
    ] {
        let out = serve(&dir, &config, &args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&says),
            "{args:?}: wanted {says:?} in {stderr}"
        );
    }
    // a key that is not the certificate's
    let other = temp_dir();
    certificates(&other);
    let other_key = other.join("server.key").display().to_string();
    let out = serve(
        &dir,
        POLICIES,
        &["--grpc-tls-cert", &cert, "--grpc-tls-key", &other_key],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "--grpc-tls-cert {cert} with --grpc-tls-key {other_key}"
        )),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&other).unwrap();
}

#[test]
fn erl_mode_names_the_variable_and_the_path_before_it_listens() {
    let dir = temp_dir();
    certificates(&dir);
    std::fs::write(dir.join("d.yaml"), "domain: d\n").unwrap();
    let (cert, missing) = (
        dir.join("server.pem").display().to_string(),
        dir.join("missing.key").display().to_string(),
    );
    let config = dir.join("d.yaml").display().to_string();
    let out = tollgate(
        &["--envoy-config", &config],
        &[
            ("GRPC_SERVER_USE_TLS", "true"),
            ("GRPC_SERVER_TLS_CERT", cert.as_str()),
            ("GRPC_SERVER_TLS_KEY", missing.as_str()),
        ],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("GRPC_SERVER_TLS_KEY {missing}: No such file")),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "it said it listens: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn erl_mode_takes_the_tls_flags_and_refuses_its_own_modes_flags() {
    let dir = temp_dir();
    let (ca, _, _) = certificates(&dir);
    std::fs::write(
        dir.join("edge.yaml"),
        "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: day, requests_per_unit: 3}\n",
    )
    .unwrap();
    let path = |name: &str| dir.join(name).display().to_string();
    let (config, cert, key) = (path("edge.yaml"), path("server.pem"), path("server.key"));
    let svc = Service::erl_with(
        &dir.join("edge.yaml"),
        &["--grpc-tls-cert", &cert, "--grpc-tls-key", &key],
        &[],
    );
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&ca))
        .domain_name("localhost");
    assert_eq!(call(svc.grpc.as_deref().unwrap(), tls).await, Ok(2));
    for (args, says) in [
        (
            vec!["--envoy-config", &config, "--token", "t"],
            "--token (TOLLGATE_TOKEN) is for tollgate's own mode",
        ),
        (
            vec!["--envoy-config", &config, "--grpc-tls-key", &key],
            "--grpc-tls-key needs --grpc-tls-cert",
        ),
    ] {
        let out = tollgate(&args, &[]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

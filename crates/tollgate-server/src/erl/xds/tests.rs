//! The xDS source against a stand-in xDS server: a real tonic ADS server on
//! 127.0.0.1, written here, that serves one state-of-the-world snapshot
//! (resent whole on every change and to every new stream), records every
//! request it gets, and can go away and come back on the same port. The
//! decisions are checked by `ShouldRateLimit` calls through ERL mode's real
//! gRPC service.
//!
//! Kept whole on purpose: one stand-in server and the scenarios run against it, which share its snapshot and request log.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor as RequestDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::google::protobuf::Any;
use futures_util::Stream;
use prost::Message;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};
use tonic::{Request, Response, Status, Streaming};

use super::super::counter::MemoryCounter;
use super::super::settings::Settings;
use super::super::state::ErlState;
use super::proto::{RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, TYPE_URL};
use super::settings::XdsSettings;
use crate::erl::ErlConfig;

/// How long a test waits for what must happen; generous, the machine is busy.
const PATIENCE: Duration = Duration::from_secs(30);

type Responses = Pin<Box<dyn Stream<Item = Result<DiscoveryResponse, Status>> + Send>>;

/// The stand-in ADS server's shared parts.
#[derive(Clone)]
struct StandIn {
    snapshot: watch::Receiver<Option<DiscoveryResponse>>,
    requests: mpsc::UnboundedSender<DiscoveryRequest>,
    stop: watch::Receiver<bool>,
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for StandIn {
    type StreamAggregatedResourcesStream = Responses;
    type DeltaAggregatedResourcesStream =
        Pin<Box<dyn Stream<Item = Result<DeltaDiscoveryResponse, Status>> + Send>>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Responses>, Status> {
        // the client's additional header, as Envoy Gateway could require
        if request
            .metadata()
            .get("x-token")
            .is_none_or(|v| v != "secret")
        {
            return Err(Status::unauthenticated("no x-token"));
        }
        let mut inbound = request.into_inner();
        let requests = self.requests.clone();
        tokio::spawn(async move {
            while let Ok(Some(r)) = inbound.message().await {
                let _ = requests.send(r);
            }
        });
        let mut snapshot = self.snapshot.clone();
        snapshot.mark_changed();
        let state = (snapshot, self.stop.clone());
        let out = futures_util::stream::unfold(state, |(mut snap, mut stop)| async move {
            loop {
                tokio::select! {
                    changed = snap.changed() => if changed.is_err() { return None },
                    _ = stop.wait_for(|s| *s) => return None,
                }
                let current = snap.borrow_and_update().clone();
                if let Some(response) = current {
                    return Some((Ok(response), (snap, stop)));
                }
            }
        });
        Ok(Response::new(Box::pin(out)))
    }

    async fn delta_aggregated_resources(
        &self,
        _: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        Err(Status::unimplemented("state of the world only"))
    }
}

/// The stand-in running on `addr` until `stop`.
struct Running {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

struct Harness {
    addr: SocketAddr,
    push: watch::Sender<Option<DiscoveryResponse>>,
    requests: mpsc::UnboundedReceiver<DiscoveryRequest>,
    requests_tx: mpsc::UnboundedSender<DiscoveryRequest>,
    server: Option<Running>,
    tls: Option<ServerTlsConfig>,
    rls: RateLimitServiceClient<tonic::transport::Channel>,
}

impl Harness {
    /// The stand-in on a free port, with nothing to serve yet (over
    /// `tls` when given), and ERL mode's gRPC service following it with
    /// `settings`.
    async fn start(
        tls: Option<ServerTlsConfig>,
        settings: impl FnOnce(SocketAddr) -> XdsSettings,
    ) -> Harness {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (push, _) = watch::channel(None);
        let (requests_tx, requests) = mpsc::unbounded_channel();
        let mut harness = Harness {
            addr,
            push,
            requests,
            requests_tx,
            server: None,
            tls,
            rls: rls(xds_following(settings(addr))).await,
        };
        harness.serve(listener);
        harness
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let (stop, stopping) = watch::channel(false);
        let stand_in = StandIn {
            snapshot: self.push.subscribe(),
            requests: self.requests_tx.clone(),
            stop: stopping.clone(),
        };
        let mut until = stopping;
        let mut server = tonic::transport::Server::builder();
        if let Some(tls) = self.tls.clone() {
            server = server.tls_config(tls).unwrap();
        }
        let task = tokio::spawn(async move {
            server
                .add_service(AggregatedDiscoveryServiceServer::new(stand_in))
                .serve_with_incoming_shutdown(TcpIncoming::from(listener), async move {
                    let _ = until.wait_for(|s| *s).await;
                })
                .await
                .unwrap();
        });
        self.server = Some(Running { stop, task });
    }

    async fn go_away(&mut self) {
        let running = self.server.take().unwrap();
        running.stop.send(true).unwrap();
        tokio::time::timeout(PATIENCE, running.task)
            .await
            .unwrap()
            .unwrap();
    }

    async fn come_back(&mut self) {
        let listener = tokio::net::TcpListener::bind(self.addr).await.unwrap();
        self.serve(listener);
    }

    /// Serves `resources` as `version`, the nonce naming the version.
    fn push(&self, version: &str, resources: Vec<Any>) {
        self.push.send_replace(Some(DiscoveryResponse {
            version_info: version.to_string(),
            resources,
            type_url: TYPE_URL.to_string(),
            nonce: format!("nonce-{version}"),
            ..DiscoveryResponse::default()
        }));
    }

    /// The next request the stand-in gets.
    async fn next_request(&mut self) -> DiscoveryRequest {
        tokio::time::timeout(PATIENCE, self.requests.recv())
            .await
            .expect("no request from the xDS client in time")
            .unwrap()
    }

    /// The ACK or NACK of the response whose nonce is `nonce-<version>`.
    async fn reply_to(&mut self, version: &str) -> DiscoveryRequest {
        loop {
            let r = self.next_request().await;
            if r.response_nonce == format!("nonce-{version}") {
                return r;
            }
        }
    }

    /// One `ShouldRateLimit` call for `key` in domain `d`.
    async fn call(&mut self, key: &str) -> (Code, u32) {
        let request = RateLimitRequest {
            domain: "d".to_string(),
            descriptors: vec![RequestDescriptor {
                entries: vec![Entry {
                    key: key.to_string(),
                    value: String::new(),
                }],
                ..RequestDescriptor::default()
            }],
            ..RateLimitRequest::default()
        };
        let response = self
            .rls
            .should_rate_limit(request)
            .await
            .unwrap()
            .into_inner();
        (
            response.overall_code(),
            response.statuses[0].limit_remaining,
        )
    }
}

/// Settings for the stand-in at `addr`: its node id and header, short waits.
fn plain(addr: SocketAddr) -> XdsSettings {
    let mut settings = XdsSettings::new(&addr.to_string());
    settings.node_id = "eg-infra".to_string();
    settings
        .headers
        .push(("x-token".parse().unwrap(), "secret".parse().unwrap()));
    settings.connect_retry = Duration::from_millis(50);
    settings.backoff_initial = Duration::from_millis(50);
    settings.backoff_max = Duration::from_millis(200);
    settings
}

/// ERL mode's state with an empty config, following the xDS server.
fn xds_following(settings: XdsSettings) -> Arc<ErlState> {
    let state = Arc::new(ErlState::new(
        ErlConfig::default(),
        Settings::default(),
        Arc::new(MemoryCounter::default()),
        None,
    ));
    tokio::spawn(super::run(state.clone(), settings));
    state
}

/// ERL mode's gRPC service over `state` on a free port, and a client of it.
async fn rls(state: Arc<ErlState>) -> RateLimitServiceClient<tonic::transport::Channel> {
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = incoming.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(crate::erl::grpc::service(state))
            .serve_with_incoming(incoming),
    );
    RateLimitServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
}

/// A resource for domain `d` with one key-only rule on `key`.
fn resource(key: &str, policy: RateLimitPolicy) -> Any {
    Any {
        type_url: TYPE_URL.to_string(),
        value: RateLimitConfig {
            name: "eg/d".to_string(),
            domain: "d".to_string(),
            descriptors: vec![RateLimitDescriptor {
                key: key.to_string(),
                rate_limit: Some(policy),
                ..RateLimitDescriptor::default()
            }],
        }
        .encode_to_vec(),
    }
}

/// `requests_per_unit` per hour (0 refuses every call, whatever the window).
fn per_hour(requests_per_unit: u32) -> RateLimitPolicy {
    RateLimitPolicy {
        unit: 3,
        requests_per_unit,
        ..RateLimitPolicy::default()
    }
}

fn unlimited() -> RateLimitPolicy {
    RateLimitPolicy {
        unlimited: true,
        ..RateLimitPolicy::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushed_configs_updates_nacks_and_the_server_going_away() {
    let mut h = Harness::start(None, plain).await;

    // the first request names the node and the type, and holds no version
    let first = h.next_request().await;
    assert_eq!(first.node.unwrap().id, "eg-infra");
    assert_eq!(first.type_url, TYPE_URL);
    assert_eq!(first.version_info, "");
    assert_eq!(first.response_nonce, "");
    assert_eq!(h.call("k").await, (Code::Ok, 0), "nothing pushed yet");

    // a pushed config takes effect, and is ACKed
    h.push("1", vec![resource("k", per_hour(0))]);
    let ack = h.reply_to("1").await;
    assert_eq!(ack.version_info, "1");
    assert!(ack.error_detail.is_none());
    assert_eq!(h.call("k").await.0, Code::OverLimit);

    // an update takes effect
    h.push("2", vec![resource("k", unlimited())]);
    let ack = h.reply_to("2").await;
    assert_eq!(ack.version_info, "2");
    assert!(ack.error_detail.is_none());
    assert_eq!(h.call("k").await, (Code::Ok, u32::MAX));

    // a bad update is NACKed with the version in force and the error; the
    // old config stays
    let mut bad = per_hour(5);
    bad.unit = 0;
    h.push("3", vec![resource("k", bad)]);
    let nack = h.reply_to("3").await;
    assert_eq!(nack.version_info, "2");
    let detail = nack.error_detail.expect("a NACK carries the error");
    assert_eq!(detail.code, 3);
    assert_eq!(
        detail.message,
        "eg/d: invalid rate limit unit 'UNKNOWN' (in 'd.k')"
    );
    assert_eq!(h.call("k").await, (Code::Ok, u32::MAX));

    // the server goes away: the config in force stays
    h.go_away().await;
    for _ in 0..5 {
        assert_eq!(h.call("k").await, (Code::Ok, u32::MAX));
        tokio::time::sleep(Duration::from_millis(60)).await;
    }

    // it comes back with a new snapshot: the client reconnects, says what
    // it holds, and takes the new one
    h.push("4", vec![resource("k", per_hour(0))]);
    h.come_back().await;
    let hello = loop {
        let r = h.next_request().await;
        if r.response_nonce.is_empty() {
            break r;
        }
    };
    assert_eq!(
        hello.version_info, "2",
        "the reconnect names the version in force"
    );
    assert_eq!(hello.node.unwrap().id, "eg-infra");
    let ack = h.reply_to("4").await;
    assert_eq!(ack.version_info, "4");
    assert!(ack.error_detail.is_none());
    assert_eq!(h.call("k").await.0, Code::OverLimit);
}

/// A CA, and PEM certificate and key pairs it signs.
struct Pki {
    ca: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl Pki {
    fn new() -> Pki {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().unwrap();
        let ca = params.self_signed(&key).unwrap().pem();
        Pki {
            ca,
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// A certificate for `name` and its key.
    fn pair(&self, name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_mutual_tls_from_erls_variables() {
    let pki = Pki::new();
    let (server_cert, server_key) = pki.pair("xds.test");
    let (client_cert, client_key) = pki.pair("ratelimit");
    let dir = std::env::temp_dir().join(format!("tollgate-xds-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let (ca, cert, key) = (
        file("ca.pem", &pki.ca),
        file("client.pem", &client_cert),
        file("client.key", &client_key),
    );
    // the stand-in asks for a client certificate signed by the CA
    let server_tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(server_cert, server_key))
        .client_ca_root(Certificate::from_pem(&pki.ca));
    let mut h = Harness::start(Some(server_tls), |addr| {
        let url = addr.to_string();
        let vars = [
            ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
            ("CONFIG_GRPC_XDS_SERVER_URL", url.as_str()),
            (
                "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
                "x-token:secret",
            ),
            ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
            ("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", ca.as_str()),
            ("CONFIG_GRPC_XDS_SERVER_TLS_SAN", "xds.test"),
            ("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", cert.as_str()),
            ("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", key.as_str()),
            ("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "50ms"),
            ("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "50ms"),
        ];
        let vars = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let settings = super::read(&vars).unwrap().unwrap();
        assert!(settings.server.starts_with("https://"));
        settings
    })
    .await;
    h.push("1", vec![resource("k", per_hour(0))]);
    let ack = h.reply_to("1").await;
    assert!(ack.error_detail.is_none());
    assert_eq!(h.call("k").await.0, Code::OverLimit);
    std::fs::remove_dir_all(&dir).unwrap();
}

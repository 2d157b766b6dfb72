//! The middleware in front of a real tonic server, called by a real tonic
//! client over a socket: a denial is `RESOURCE_EXHAUSTED` with the delay in
//! the metadata.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::uri::PathAndQuery;
use tollgate::{MemoryStore, Policy};
use tollgate_tower::RateLimitLayer;
use tollgate_tower::extract::Global;
use tonic::server::{Grpc, UnaryService};
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tonic::{Code, Status};
use tonic_prost::ProstCodec;
use tower_service::Service;

/// The one message of the test service, declared without a `.proto` file.
#[derive(Clone, PartialEq, prost::Message)]
struct Ping {
    #[prost(string, tag = "1")]
    text: String,
}

/// `test.Echo/Ping`: answers the message it gets.
#[derive(Debug, Clone)]
struct Echo;

struct EchoPing;

impl UnaryService<Ping> for EchoPing {
    type Response = Ping;
    type Future = std::future::Ready<Result<tonic::Response<Ping>, Status>>;

    fn call(&mut self, request: tonic::Request<Ping>) -> Self::Future {
        std::future::ready(Ok(tonic::Response::new(request.into_inner())))
    }
}

type BoxedResponse =
    Pin<Box<dyn Future<Output = Result<http::Response<tonic::body::Body>, Infallible>> + Send>>;

impl Service<http::Request<tonic::body::Body>> for Echo {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxedResponse;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        Box::pin(async move {
            let mut grpc = Grpc::new(ProstCodec::<Ping, Ping>::default());
            Ok(grpc.unary(EchoPing, request).await)
        })
    }
}

async fn ping(channel: &Channel, text: &str) -> Result<tonic::Response<Ping>, Status> {
    let mut client = tonic::client::Grpc::new(channel.clone());
    client
        .ready()
        .await
        .map_err(|e| Status::unknown(e.to_string()))?;
    let request = tonic::Request::new(Ping { text: text.into() });
    let path = PathAndQuery::from_static("/test.Echo/Ping");
    client
        .unary(request, path, ProstCodec::<Ping, Ping>::default())
        .await
}

#[tokio::test]
async fn a_tonic_client_sees_resource_exhausted_with_the_retry_delay() {
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = incoming.local_addr().unwrap();
    // Two calls, then one more an hour later.
    let policy = Policy::token_bucket("rpc", 1, Duration::from_secs(3600), 2).unwrap();
    let layer = RateLimitLayer::new(MemoryStore::new(), policy, Global);
    let server = tokio::spawn(
        Server::builder()
            .layer(layer)
            .serve_with_incoming(Echo, incoming),
    );

    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    // `t` of an admitted call: until the bucket is full again.
    for (text, remaining, full_in) in [("one", 1, 3600), ("two", 0, 7200)] {
        let response = ping(&channel, text).await.unwrap();
        let ratelimit = response
            .metadata()
            .get("ratelimit")
            .unwrap()
            .to_str()
            .unwrap();
        assert_eq!(ratelimit, format!("\"rpc\";r={remaining};t={full_in}"));
        assert_eq!(response.into_inner().text, text);
    }
    let status = ping(&channel, "three").await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(status.message(), "rate limit exceeded");
    let metadata = status.metadata();
    assert_eq!(metadata.get("retry-after").unwrap(), "3600");
    let pushback: u64 = metadata
        .get("grpc-retry-pushback-ms")
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((3_599_000..=3_600_000).contains(&pushback), "{pushback}");
    // `t` of a denial: until the call would pass.
    assert_eq!(metadata.get("ratelimit").unwrap(), "\"rpc\";r=0;t=3600");
    server.abort();
}

/// With feature `tonic`, `PeerIp` reads tonic's `TcpConnectInfo` (without
/// it, the same server answers `INTERNAL`: no peer address).
#[tokio::test]
async fn peer_ip_reads_tonics_connect_info() {
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = incoming.local_addr().unwrap();
    let policy = Policy::token_bucket("per-ip", 1, Duration::from_secs(3600), 1).unwrap();
    let layer = RateLimitLayer::new(
        MemoryStore::new(),
        policy,
        tollgate_tower::extract::PeerIp::new(),
    );
    let server = tokio::spawn(
        Server::builder()
            .layer(layer)
            .serve_with_incoming(Echo, incoming),
    );
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let first = ping(&channel, "one").await;
    if cfg!(feature = "tonic") {
        assert!(first.is_ok(), "{first:?}");
        let status = ping(&channel, "two").await.unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted);
    } else {
        assert_eq!(first.unwrap_err().code(), Code::Internal);
    }
    server.abort();
}

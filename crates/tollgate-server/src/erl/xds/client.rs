//! The xDS client: one ADS stream (state of the world) for
//! `RateLimitConfig` resources, kept open for as long as the service runs.
//!
//! - The first request names the node and the type, and carries the
//!   version last accepted (empty at start), so that a server that comes
//!   back knows what we hold.
//! - Each response holds every resource. A set that decodes and passes
//!   the checks of the YAML path is put in force and ACKed (its
//!   `version_info` and `nonce`); one that does not is NACKed (the nonce,
//!   the version still in force, and the errors in `error_detail`), and
//!   the config in force stays.
//! - A failed connection is retried after `connect_retry`; a lost stream
//!   after a backoff that doubles up to `backoff_max` and starts again once
//!   the server answers. The config in force stays all the while.

use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use envoy_types::pb::google::rpc::Status;
use tokio::sync::mpsc;

use super::super::state::ErlState;
use super::convert;
use super::proto::TYPE_URL;
use super::settings::XdsSettings;

/// gRPC's INVALID_ARGUMENT, the code of a NACK's `error_detail`.
const INVALID_ARGUMENT: i32 = 3;

/// Why a session ended.
enum Ended {
    /// No connection was made.
    NotConnected(String),
    /// The stream was open and is lost; `answered` if the server sent
    /// anything on it.
    Lost { why: String, answered: bool },
}

/// Follows the xDS server for ever, putting each good config in force in
/// `state`.
pub(crate) async fn run(state: Arc<ErlState>, settings: XdsSettings) {
    let mut version = String::new();
    let mut backoff = settings.backoff_initial;
    loop {
        let wait = match session(&state, &settings, &mut version).await {
            Ended::NotConnected(why) => {
                tracing::warn!(
                    "xDS server {} unreachable ({why}); the config in force stays, retrying in {:?}",
                    settings.server,
                    settings.connect_retry
                );
                settings.connect_retry
            }
            Ended::Lost { why, answered } => {
                if answered {
                    backoff = settings.backoff_initial;
                }
                let wait = jittered(backoff);
                backoff = (backoff * 2).min(settings.backoff_max);
                tracing::warn!(
                    "xDS stream to {} lost ({why}); the config in force stays, reconnecting in {wait:?}",
                    settings.server
                );
                wait
            }
        };
        metrics::counter!("tollgate_erl_xds_reconnects_total").increment(1);
        tokio::time::sleep(wait).await;
    }
}

/// Half of `d` either way at random, as ERL's backoff has.
fn jittered(d: Duration) -> Duration {
    d.mul_f64(0.5 + fastrand::f64())
}

/// One connection and its stream, until it fails.
async fn session(state: &ErlState, settings: &XdsSettings, version: &mut String) -> Ended {
    let endpoint = tonic::transport::Endpoint::from_shared(settings.server.clone())
        .map(|e| e.connect_timeout(Duration::from_secs(10)))
        .and_then(|e| match &settings.tls {
            Some(tls) => e.tls_config(tls.clone()),
            None => Ok(e),
        });
    let endpoint = match endpoint {
        Ok(e) => e,
        Err(e) => return Ended::NotConnected(describe(&e)),
    };
    let channel = match endpoint.connect().await {
        Ok(c) => c,
        Err(e) => return Ended::NotConnected(describe(&e)),
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let first = DiscoveryRequest {
        version_info: version.clone(),
        node: Some(node(settings)),
        type_url: TYPE_URL.to_string(),
        ..DiscoveryRequest::default()
    };
    let _ = tx.send(first);
    let outbound = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|request| (request, rx))
    });
    let mut request = tonic::Request::new(outbound);
    for (k, v) in &settings.headers {
        request.metadata_mut().insert(k.clone(), v.clone());
    }
    let mut client = AggregatedDiscoveryServiceClient::new(channel);
    let mut inbound = match client.stream_aggregated_resources(request).await {
        Ok(r) => r.into_inner(),
        Err(e) => {
            return Ended::Lost {
                why: e.to_string(),
                answered: false,
            };
        }
    };
    tracing::info!("xDS stream open to {}", settings.server);
    let mut answered = false;
    loop {
        let response = match inbound.message().await {
            Ok(Some(r)) => r,
            Ok(None) => {
                return Ended::Lost {
                    why: "the server ended the stream".to_string(),
                    answered,
                };
            }
            Err(e) => {
                return Ended::Lost {
                    why: e.to_string(),
                    answered,
                };
            }
        };
        answered = true;
        let reply = apply(state, version, &response);
        if tx.send(reply).is_err() {
            return Ended::Lost {
                why: "the request stream closed".to_string(),
                answered,
            };
        }
    }
}

/// Checks a response, puts it in force when good, and says the ACK or
/// NACK to send.
fn apply(state: &ErlState, version: &mut String, response: &DiscoveryResponse) -> DiscoveryRequest {
    let checked = if response.type_url == TYPE_URL {
        convert::config(&response.resources).map_err(|errors| {
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        })
    } else {
        Err(format!(
            "type '{}' was not asked for (only {TYPE_URL})",
            response.type_url
        ))
    };
    let error_detail = match checked {
        Ok(config) => {
            tracing::info!(
                version = %response.version_info,
                domains = ?config.domains(),
                "xDS config in force"
            );
            state.replace(config);
            version.clone_from(&response.version_info);
            None
        }
        Err(message) => {
            metrics::counter!("tollgate_erl_config_load_errors_total").increment(1);
            tracing::error!(
                version = %response.version_info,
                "xDS config refused (NACK), the config in force stays: {message}"
            );
            Some(Status {
                code: INVALID_ARGUMENT,
                message,
                details: Vec::new(),
            })
        }
    };
    DiscoveryRequest {
        version_info: version.clone(),
        type_url: TYPE_URL.to_string(),
        response_nonce: response.nonce.clone(),
        error_detail,
        ..DiscoveryRequest::default()
    }
}

fn node(settings: &XdsSettings) -> Node {
    let fields = settings
        .node_metadata
        .iter()
        .map(|(k, v)| {
            let value = Value {
                kind: Some(Kind::StringValue(v.clone())),
            };
            (k.clone(), value)
        })
        .collect();
    Node {
        id: settings.node_id.clone(),
        metadata: (!settings.node_metadata.is_empty()).then_some(Struct { fields }),
        ..Node::default()
    }
}

/// An error with its causes, since tonic's own says only "transport error".
fn describe(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

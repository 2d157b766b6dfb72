//! An LLM gateway: an axum app in front of a model's API that limits each
//! API key to 10,000 tokens a minute and 1,000,000 tokens a calendar month
//! (UTC), as one atomic multi-limit.
//!
//! A request's tokens are known only once the model has answered, so the
//! gateway limits by an estimate and settles afterwards: the layer checks
//! the estimate (the request body's bytes / 4, plus an allowance for the
//! answer), the handler forwards the request, reads the answer's
//! `usage.total_tokens` and reports it as [`Usage`]; when the answer's body
//! has been sent, the layer charges the difference or refunds it.
//!
//! The model here is a stand-in served in the same process on
//! 127.0.0.1:0, answering OpenAI-shaped JSON: `prompt_tokens` is its
//! messages' characters / 4 (rounded up) and `completion_tokens` the
//! request's `max_tokens` (16 without one).
//!
//! ```text
//! cargo run -p tollgate-tower --example llm_gateway
//! cargo run -p tollgate-tower --example llm_gateway -- --redis redis://127.0.0.1:6379/
//! curl -si localhost:3000/v1/chat/completions -H 'authorization: Bearer key-1' \
//!     -d '{"max_tokens": 200, "messages": [{"role": "user", "content": "Hello!"}]}'
//! ```
//!
//! `tests/llm_gateway.rs` runs these functions against the memory store and
//! a `redis-server` it starts, and checks what each key holds.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::routing::post;
use bytes::Bytes;
use clap::Parser;
use http::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tollgate::algorithm::Period;
use tollgate::store::redis::RedisStore;
use tollgate::{MemoryStore, Policy, Store};
use tollgate_tower::extract::from_fn;
use tollgate_tower::{RateLimitLayer, Usage};

/// The one route, as OpenAI's API names it.
pub(crate) const COMPLETIONS: &str = "/v1/chat/completions";

/// Tokens allowed for the answer in the estimate, on top of the prompt's.
pub(crate) const ANSWER_ALLOWANCE: u64 = 256;

/// A gateway in front of a model, limiting each API key by tokens.
#[derive(Debug, Parser)]
struct Args {
    /// Keep the limits in this Redis (`redis://host:port/`) instead of in
    /// memory, so that every instance of the gateway shares them.
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
}

/// 10,000 tokens a minute and 1,000,000 tokens a calendar month (UTC).
pub(crate) fn policies() -> Result<[Policy; 2], tollgate::Error> {
    Ok([
        Policy::fixed_window("llm-tokens-minute", 10_000, Duration::from_secs(60))?,
        Policy::fixed_window_calendar("llm-tokens-month", 1_000_000, Period::Month, "UTC")?,
    ])
}

/// The caller's API key: `Authorization: Bearer KEY`, or `x-api-key: KEY`.
pub(crate) fn api_key(headers: &HeaderMap) -> Option<String> {
    let bearer = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let key = bearer.or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))?;
    let key = key.trim();
    (!key.is_empty()).then(|| key.to_owned())
}

/// What a request is expected to cost before the model answers: its body's
/// bytes / 4 (a token is about four characters of English), plus
/// [`ANSWER_ALLOWANCE`]. It reads only `Content-Length`; a request without
/// one is estimated at the allowance alone. Settling corrects it either way.
pub(crate) fn estimate(request: &Parts) -> u64 {
    let body_bytes = request
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .unwrap_or(0);
    body_bytes.div_ceil(4).saturating_add(ANSWER_ALLOWANCE)
}

/// The rate-limit layer: both policies per API key, checked together with
/// the estimate, settled with the [`Usage`] the handler reports.
pub(crate) fn limits(store: Arc<dyn Store>) -> Result<RateLimitLayer, tollgate::Error> {
    let [minute, month] = policies()?;
    let key = || from_fn(|request: &Parts| api_key(&request.headers));
    RateLimitLayer::builder_shared(store)
        .usage_limit(minute, key())
        .usage_limit(month, key())
        .estimate_with(estimate)
        .build()
}

/// The gateway: [`COMPLETIONS`] forwarded to the model at `upstream`,
/// limited by [`limits`].
pub(crate) fn gateway(
    store: Arc<dyn Store>,
    upstream: SocketAddr,
) -> Result<Router, tollgate::Error> {
    Ok(Router::new()
        .route(COMPLETIONS, post(forward))
        .with_state(upstream)
        .layer(limits(store)?))
}

/// Forwards a request to the model and reports the tokens its answer used.
/// A request without an API key is refused here (the limits, keyed by it,
/// do not apply to it).
async fn forward(
    State(upstream): State<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Body> {
    if api_key(&headers).is_none() {
        return error(
            StatusCode::UNAUTHORIZED,
            "an API key is required: `Authorization: Bearer KEY` or `x-api-key`",
        );
    }
    let answer = match post_json(upstream, body).await {
        Ok(answer) => answer,
        Err(e) => {
            eprintln!("llm_gateway: the model could not be reached: {e}");
            return error(StatusCode::BAD_GATEWAY, "the model could not be reached");
        }
    };
    let (status, body) = answer;
    let tokens = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v["usage"]["total_tokens"].as_u64());
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    match tokens {
        Some(tokens) => {
            response.extensions_mut().insert(Usage(tokens));
        }
        // No usage in the answer (an error from the model): the estimate
        // stands.
        None => eprintln!(
            "llm_gateway: the model's answer has no usage.total_tokens; the estimate stands"
        ),
    }
    response
}

/// POSTs `body` to the model's [`COMPLETIONS`] at `upstream`: its status
/// and body.
async fn post_json(
    upstream: SocketAddr,
    body: Bytes,
) -> Result<(StatusCode, Bytes), Box<dyn std::error::Error + Send + Sync>> {
    let stream = tokio::net::TcpStream::connect(upstream).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let request = Request::post(COMPLETIONS)
        .header("host", upstream.to_string())
        .header(CONTENT_TYPE, "application/json")
        .body(Full::new(body))?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    Ok((status, response.into_body().collect().await?.to_bytes()))
}

fn error(status: StatusCode, message: &str) -> Response<Body> {
    let body = json!({ "error": { "message": message } }).to_string();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// The stand-in model: answers [`COMPLETIONS`] with OpenAI-shaped JSON.
pub(crate) fn model() -> Router {
    Router::new().route(COMPLETIONS, post(complete))
}

/// `prompt_tokens`: the messages' characters / 4, rounded up;
/// `completion_tokens`: `max_tokens` (16 without it). A body that is not
/// such a request is a 400 naming what is wrong.
async fn complete(body: Bytes) -> Response<Body> {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "the body is not JSON");
    };
    let Some(messages) = request["messages"].as_array() else {
        return error(StatusCode::BAD_REQUEST, "`messages` must be an array");
    };
    let chars: usize = messages
        .iter()
        .filter_map(|m| m["content"].as_str())
        .map(|c| c.chars().count())
        .sum();
    let prompt_tokens = (chars as u64).div_ceil(4);
    let completion_tokens = match &request["max_tokens"] {
        Value::Null => 16,
        v => match v.as_u64() {
            Some(n) => n,
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "`max_tokens` must be a whole number",
                );
            }
        },
    };
    let answer = json!({
        "object": "chat.completion",
        "model": "stand-in",
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": "…" },
            "finish_reason": "length"
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens
        }
    });
    let mut response = Response::new(Body::from(answer.to_string()));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// Serves the stand-in model on 127.0.0.1:0, in this process; its address.
pub(crate) async fn start_model() -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, model()).await });
    Ok(addr)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let store: Arc<dyn Store> = match &args.redis {
        Some(url) => Arc::new(RedisStore::connect(url).await?),
        None => Arc::new(MemoryStore::new()),
    };
    let model = start_model().await?;
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let kept = if args.redis.is_some() {
        "Redis"
    } else {
        "memory"
    };
    println!(
        "gateway on http://{}{COMPLETIONS}, the stand-in model on {model}, limits in {kept}",
        listener.local_addr()?
    );
    axum::serve(listener, gateway(store, model)?).await?;
    Ok(())
}

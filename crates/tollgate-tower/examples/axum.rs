//! An axum app limited per client address: 5 requests a second with bursts
//! of 10, on the memory store, or on Redis (shared by every instance) with
//! `--redis URL`.
//!
//! ```text
//! cargo run -p tollgate-tower --example axum
//! cargo run -p tollgate-tower --example axum -- --redis redis://127.0.0.1:6379/
//! for i in $(seq 12); do curl -s -o /dev/null -w '%{http_code} ' localhost:3000/; done
//! curl -si localhost:3000/
//! ```

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use clap::Parser;
use tollgate::store::redis::RedisStore;
use tollgate::{MemoryStore, Policy};
use tollgate_tower::RateLimitLayer;
use tollgate_tower::extract::PeerIp;

/// Serves `GET /`, limited per client address.
#[derive(Debug, Parser)]
struct Args {
    /// Keep the limits in this Redis (`redis://host:port/`) instead of in
    /// memory, so that every instance of the app shares them.
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
}

/// The application, limited by `layer`.
fn app(layer: RateLimitLayer) -> Router {
    Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(layer)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let per_ip = Policy::gcra("per-ip", 5, Duration::from_secs(1), 10)?;
    let layer = match &args.redis {
        Some(url) => RateLimitLayer::new(RedisStore::connect(url).await?, per_ip, PeerIp::new()),
        None => RateLimitLayer::new(MemoryStore::new(), per_ip, PeerIp::new()),
    };
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let store = if args.redis.is_some() {
        "Redis"
    } else {
        "memory"
    };
    println!(
        "listening on http://{}, limits in {store}",
        listener.local_addr()?
    );
    // PeerIp reads the address recorded by `with_connect_info`.
    let service = app(layer).into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, service).await?;
    Ok(())
}

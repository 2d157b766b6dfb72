//! `tollgate check`: asks a running service, for shell scripts.

use clap::Args;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

/// Arguments of `tollgate check`.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The policy.
    #[arg(long)]
    policy: String,
    /// The limited key.
    #[arg(long)]
    key: String,
    /// The cost (0 peeks).
    #[arg(long, default_value_t = 1)]
    cost: u64,
    /// The service.
    #[arg(long, env = "TOLLGATE_URL", default_value = "http://127.0.0.1:8080")]
    url: String,
    /// The bearer token, if the service wants one.
    #[arg(long, env = "TOLLGATE_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

/// Prints the decision; exit 0 when allowed, 1 when denied, 2 on error.
pub(crate) fn run(args: CheckArgs) -> i32 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    match runtime.block_on(ask(&args)) {
        Ok((200, body)) => {
            println!("{body}");
            0
        }
        Ok((429, body)) => {
            println!("{body}");
            1
        }
        Ok((status, body)) => {
            eprintln!("error: the service answered {status}: {body}");
            2
        }
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}

async fn ask(args: &CheckArgs) -> Result<(u16, String), String> {
    let rest = args
        .url
        .strip_prefix("http://")
        .ok_or_else(|| format!("--url must start with http://, got {:?}", args.url))?;
    let authority = rest.split('/').next().unwrap_or(rest);
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .map_err(|e| format!("cannot connect to {authority}: {e}"))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let body =
        serde_json::json!({"policy": args.policy, "key": args.key, "cost": args.cost}).to_string();
    let mut request = http::Request::post("/v1/check")
        .header(http::header::HOST, authority)
        .header(http::header::CONTENT_TYPE, "application/json");
    if let Some(token) = &args.token {
        request = request.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let request = request
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&bytes).trim().to_string()))
}

//! `tollgate check`: asks a running service, for shell scripts.

use clap::Args;
use http_body_util::BodyExt;

use crate::client;

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
    let authority = client::authority(&args.url)?;
    let mut sender = client::connect(&authority).await?;
    let body =
        serde_json::json!({"policy": args.policy, "key": args.key, "cost": args.cost}).to_string();
    let request = client::check_request(&authority, args.token.as_deref(), body)?;
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

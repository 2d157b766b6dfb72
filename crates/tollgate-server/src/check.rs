//! `tollgate check`: asks a running service, for shell scripts.

use clap::Args;

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
    match client::block_on(ask(&args)) {
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
    let body =
        serde_json::json!({"policy": args.policy, "key": args.key, "cost": args.cost}).to_string();
    let token = args.token.as_deref();
    client::send(&args.url, http::Method::POST, "/v1/check", token, body).await
}

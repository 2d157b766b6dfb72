//! `tollgate override set|get|list|rm`: a running service's overrides
//! (`PUT`, `GET`, `DELETE /v1/overrides/...`), for operators and scripts.
//! The service checks everything (the policy's parameter names, ranges,
//! the selector, the ttl) and answers the error naming the field; this
//! only builds the request and prints the answer.

use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Map, Value};

use crate::client;

/// Arguments of `tollgate override`.
#[derive(Debug, Args)]
pub(crate) struct OverrideArgs {
    #[command(subcommand)]
    command: OverrideCommand,
    /// The service.
    #[arg(
        long,
        global = true,
        env = "TOLLGATE_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    url: String,
    /// The bearer token: the admin token, where the service has one.
    #[arg(long, global = true, env = "TOLLGATE_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

#[derive(Debug, Subcommand)]
enum OverrideCommand {
    /// Sets (or replaces) the override of a key or a prefix (`trial_*`):
    /// the policy's own parameters, an action, or a tier.
    Set(SetArgs),
    /// Prints one override; exit 1 when there is none.
    Get(Target),
    /// Prints every override of a policy.
    List {
        /// The policy.
        policy: String,
    },
    /// Removes an override; exit 1 when there was none.
    Rm(Target),
}

#[derive(Debug, Args)]
struct Target {
    /// The policy.
    policy: String,
    /// A key, or a prefix ending in `*`.
    selector: String,
}

#[derive(Debug, Args)]
struct SetArgs {
    #[command(flatten)]
    target: Target,
    /// Fixed and sliding windows, concurrency: the limit.
    #[arg(long)]
    limit: Option<u64>,
    /// Windows: the window ("1m").
    #[arg(long)]
    window: Option<String>,
    /// Token bucket, GCRA, leaky bucket: the rate, per `--per`.
    #[arg(long)]
    rate: Option<u64>,
    /// Buckets, GCRA: the rate's period ("1s").
    #[arg(long)]
    per: Option<String>,
    /// Token bucket, GCRA: the burst.
    #[arg(long)]
    burst: Option<u64>,
    /// Leaky bucket: the capacity.
    #[arg(long)]
    capacity: Option<u64>,
    /// Concurrency: how long a lease lives ("30s").
    #[arg(long)]
    lease: Option<String>,
    /// Always deny, or always admit consuming nothing.
    #[arg(long, value_enum)]
    action: Option<Action>,
    /// Decide the key in this tier of the policy.
    #[arg(long)]
    tier: Option<String>,
    /// Ends the override after this long ("24h"); absent: for ever.
    #[arg(long)]
    ttl: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Action {
    Block,
    Allow,
}

impl SetArgs {
    /// The body of `PUT /v1/overrides/{policy}/{selector}`: the fields
    /// given, by the API's names.
    fn body(&self) -> String {
        let mut body = Map::new();
        let mut put = |name: &str, value: Option<Value>| {
            if let Some(v) = value {
                body.insert(name.to_string(), v);
            }
        };
        put("limit", self.limit.map(Value::from));
        put("window", self.window.clone().map(Value::from));
        put("rate", self.rate.map(Value::from));
        put("per", self.per.clone().map(Value::from));
        put("burst", self.burst.map(Value::from));
        put("capacity", self.capacity.map(Value::from));
        put("lease", self.lease.clone().map(Value::from));
        put(
            "action",
            self.action.map(|a| {
                Value::from(match a {
                    Action::Block => "block",
                    Action::Allow => "allow",
                })
            }),
        );
        put("tier", self.tier.clone().map(Value::from));
        put("ttl", self.ttl.clone().map(Value::from));
        Value::Object(body).to_string()
    }
}

/// Prints the service's answer; exit 0 on success, 1 when `get` or `rm`
/// finds no override, 2 on an error (the service's, printed).
pub(crate) fn run(args: OverrideArgs) -> i32 {
    let (method, path, body, missing_is_1) = match &args.command {
        OverrideCommand::Set(set) => (http::Method::PUT, path(&set.target), set.body(), false),
        OverrideCommand::Get(t) => (http::Method::GET, path(t), String::new(), true),
        OverrideCommand::List { policy } => (
            http::Method::GET,
            format!("/v1/overrides/{}", encode(policy)),
            String::new(),
            false,
        ),
        OverrideCommand::Rm(t) => (http::Method::DELETE, path(t), String::new(), true),
    };
    let token = args.token.as_deref();
    match client::block_on(client::send(&args.url, method, &path, token, body)) {
        Ok((200, body)) => {
            println!("{body}");
            0
        }
        Ok((404, body)) if missing_is_1 && body.contains("\"not_found\"") => {
            eprintln!("{body}");
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

fn path(t: &Target) -> String {
    format!(
        "/v1/overrides/{}/{}",
        encode(&t.policy),
        encode(&t.selector)
    )
}

/// Percent-encodes every byte but the unreserved ones (RFC 3986), as the
/// API's paths take keys and selectors (`trial_*` is `trial_%2A`).
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_are_percent_encoded() {
        assert_eq!(encode("trial_*"), "trial_%2A");
        assert_eq!(encode("a/b c%é"), "a%2Fb%20c%25%C3%A9");
        assert_eq!(encode("Az09-._~"), "Az09-._~");
    }
}

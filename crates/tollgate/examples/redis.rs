//! Two instances of a service share one limit through Redis: at most 3 SMS
//! a minute per phone number, however many instances send them. Each
//! instance here is its own `RedisStore` (its own connection); both ask
//! three times.
//!
//! ```text
//! cargo run -p tollgate --features redis --example redis [-- redis://127.0.0.1:6379/]
//! ```

use std::time::Duration;

use tollgate::store::redis::RedisStore;
use tollgate::{Policy, Store};

/// The phone number limited here.
const PHONE: &[u8] = b"+15550100";

/// Sends as two instances against the Redis at `url`; how many SMS were
/// allowed in all (3: the limit holds across instances).
pub(crate) async fn run(url: &str) -> tollgate::Result<u32> {
    let sms = Policy::sliding_log("sms", 3, Duration::from_secs(60))?;
    let instances = [
        RedisStore::connect(url).await?,
        RedisStore::connect(url).await?,
    ];
    // Start from a fresh limit, so that the example can run again at once.
    instances[0].reset(&sms, PHONE).await?;

    let mut allowed = 0;
    for round in 0..3 {
        for (i, store) in instances.iter().enumerate() {
            let decision = store.check(&sms, PHONE, 1).await?;
            if decision.allowed {
                allowed += 1;
                println!(
                    "round {round}, instance {i}: sent, {} left",
                    decision.remaining
                );
            } else {
                println!(
                    "round {round}, instance {i}: limited, retry in {:?}",
                    decision.retry_after
                );
            }
        }
    }
    Ok(allowed)
}

#[tokio::main]
async fn main() -> tollgate::Result<()> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379/".to_string());
    let allowed = run(&url).await?;
    println!("{allowed} of 6 sent");
    Ok(())
}

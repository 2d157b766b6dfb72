//! ERL mode's stores: ERL's counters (memory, or ERL's Redis), and with
//! extensions the store of the policies `tollgate_policy` names.

use std::sync::Arc;

use super::counter::{Counter, MemoryCounter};
use super::env::ErlEnv;
use super::redis::RedisCounter;
use super::redis_env::RedisTarget;
use crate::config::Config;

/// ERL's counters (memory, or ERL's Redis) and how they are described,
/// and with extensions the policies' store: the TOML's `[store]`, on
/// ERL's Redis when one is given. The exit code when one cannot start.
pub(super) async fn stores(
    redis: &[String],
    env: &ErlEnv,
    policies: Option<&Config>,
) -> Result<(Arc<dyn Counter>, String, Option<crate::store::Backend>), i32> {
    let target = if redis.is_empty() {
        env.redis.clone()
    } else {
        Some(RedisTarget::Urls(redis.to_vec()))
    };
    let (counter, store): (Arc<dyn Counter>, String) = match &target {
        None => (Arc::new(MemoryCounter::default()), "memory".to_string()),
        Some(target) => match RedisCounter::connect(target).await {
            Ok(c) => (Arc::new(c), target.describe()),
            Err(e) => {
                eprintln!("error: cannot connect to {}: {e}", target.describe());
                return Err(1);
            }
        },
    };
    let policy_store = match policies {
        None => None,
        Some(toml) => {
            let mut settings = toml.store.clone();
            if let Some(target) = &target {
                on_erls_redis(&mut settings, target);
            }
            match crate::store::build(&settings).await {
                Ok(backend) => Some(backend),
                Err(e) => {
                    eprintln!("error: {e}");
                    return Err(1);
                }
            }
        }
    };
    Ok((counter, store, policy_store))
}

/// The policies' store settings on ERL's Redis: its servers (or sentinels
/// and master) in place of those of the TOML's `[store]`.
fn on_erls_redis(settings: &mut crate::config::StoreSettings, target: &RedisTarget) {
    match target {
        RedisTarget::Urls(urls) => {
            settings.urls = urls.clone();
            settings.master_name = None;
            settings.master_auth = None;
        }
        RedisTarget::Sentinel {
            master_name,
            sentinels,
            user,
            password,
        } => {
            settings.urls = sentinels.clone();
            settings.master_name = Some(master_name.clone());
            settings.master_auth = password.clone().map(|p| (user.clone(), p));
        }
    }
}

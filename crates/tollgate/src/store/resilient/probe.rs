//! The probe: while the breaker is open, it asks the primary store for
//! what decisions need, and closes the breaker once the store has given
//! it several times in a row.
//!
//! What decisions need is a write. A peek, or a `PING`, succeeds on a
//! server that fails every admission: out of memory under `noeviction`
//! (`OOM`), demoted to replica (`READONLY`), or reached as an ACL user whose
//! write permission was revoked (`NOPERM`); a probe that peeks would close
//! the breaker straight into the next failures. So each probe is a
//! consuming check (cost 1) on a key of its own, under a fixed window of a
//! huge limit and a 1 ms window: it is always admitted, so it always
//! writes, through the same script path as every decision, and the key
//! expires a millisecond later.

use std::sync::Weak;
use std::time::Duration;

use super::Inner;
use crate::{Policy, metrics};

/// The key the probe writes, under the probe policy `tollgate-probe`.
pub(crate) const PROBE_KEY: &[u8] = b"probe";

#[derive(Debug)]
pub(crate) struct Probe {
    interval: Duration,
    max_interval: Duration,
    successes: u32,
    policy: Policy,
}

impl Probe {
    pub(crate) fn new(interval: Duration, max_interval: Duration, successes: u32) -> Probe {
        Probe {
            interval,
            max_interval,
            successes,
            policy: Policy::fixed_window("tollgate-probe", 1 << 40, Duration::from_millis(1))
                .expect("a valid probe policy"),
        }
    }
}

/// Probes the primary store while the breaker is open: after each wait
/// (±20 % jitter), one consuming check within the deadline. A failure
/// doubles the wait, up to the maximum; a success sets it back to the first
/// interval, and `successes` in a row close the breaker.
pub(crate) async fn run(inner: Weak<Inner>) {
    let Some(first) = inner.upgrade().map(|i| i.probe.interval) else {
        return;
    };
    let mut interval = first;
    let mut healthy = 0;
    loop {
        let jitter = 0.8 + 0.4 * fastrand::f64();
        tokio::time::sleep(interval.mul_f64(jitter)).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let probe = &inner.probe;
        let call = inner.primary.check(&probe.policy, PROBE_KEY, 1);
        if let Ok(Ok(_)) = tokio::time::timeout(inner.deadline, call).await {
            healthy += 1;
            if healthy >= probe.successes {
                // The fallback keeps its state: see the module docs.
                inner.breaker.close();
                metrics::record_breaker(false);
                tracing::info!("store available again: decisions go to it");
                return;
            }
            interval = first;
        } else {
            healthy = 0;
            interval = (interval * 2).min(probe.max_interval);
        }
    }
}

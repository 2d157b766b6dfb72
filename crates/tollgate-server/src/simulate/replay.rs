//! Replaying requests on a manual clock: in memory, as several regions
//! (`regions.rs`), or on Redis in client-time mode.

use std::collections::HashSet;
use std::sync::Arc;

use indicatif::ProgressBar;
use tollgate::{ManualClock, MemoryStore, Policy};

use super::regions::Mesh;
use super::report::Outcome;
use super::trace::Request;

/// How many requests between two moves of the progress bar.
const PROGRESS_STEP: usize = 16_384;

/// Replays `requests` on a fresh memory store, handing each decision to
/// `each` as it is made.
pub(crate) fn memory(
    policies: &[Policy],
    requests: &[Request],
    progress: &ProgressBar,
    mut each: impl FnMut(&Request, &Outcome),
) {
    let clock = ManualClock::new(0);
    let store = MemoryStore::with_clock(clock.clone());
    for (i, request) in requests.iter().enumerate() {
        clock.set(request.t_us);
        let outcome = store.check_sync(
            &policies[request.policy],
            request.key.as_bytes(),
            request.cost,
        );
        each(request, &outcome);
        if i % PROGRESS_STEP == 0 {
            progress.set_position(i as u64);
        }
    }
    progress.set_position(requests.len() as u64);
}

/// Replays `requests` on `mesh`'s regions, handing each decision to
/// `each` as it is made.
pub(crate) fn regions(
    mesh: &mut Mesh<'_>,
    requests: &[Request],
    progress: &ProgressBar,
    mut each: impl FnMut(&Request, &Outcome),
) {
    for (i, request) in requests.iter().enumerate() {
        each(request, &mesh.decide(request));
        if i % PROGRESS_STEP == 0 {
            progress.set_position(i as u64);
        }
    }
    progress.set_position(requests.len() as u64);
}

/// Replays `requests` on Redis in client-time mode, under a fresh key
/// prefix whose keys are deleted afterwards (every key also carries its own
/// TTL). A store error stops the replay.
pub(crate) async fn redis(
    urls: &[String],
    policies: &[Policy],
    requests: &[Request],
    progress: &ProgressBar,
    mut each: impl FnMut(&Request, &Outcome),
) -> Result<(), tollgate::Error> {
    use tollgate::Store;
    use tollgate::store::redis::{RedisStore, TimeSource};

    let clock = ManualClock::new(0);
    let prefix = format!("tollgate-sim:{:016x}:", fastrand::u64(..));
    let store = RedisStore::builder(urls.iter().cloned())
        .prefix(prefix)
        .time_source(TimeSource::Client(Arc::new(clock.clone())))
        .connect()
        .await?;
    for (i, request) in requests.iter().enumerate() {
        clock.set(request.t_us);
        let policy = &policies[request.policy];
        let outcome = store
            .check(policy, request.key.as_bytes(), request.cost)
            .await;
        if let Err(e @ tollgate::Error::Store { .. }) = &outcome {
            return Err(e.clone());
        }
        each(request, &outcome);
        if i % PROGRESS_STEP == 0 {
            progress.set_position(i as u64);
        }
    }
    progress.set_position(requests.len() as u64);
    let used: HashSet<(usize, &str)> = requests.iter().map(|r| (r.policy, &*r.key)).collect();
    for (policy, key) in used {
        store.reset(&policies[policy], key.as_bytes()).await?;
    }
    Ok(())
}

//! What the status page reports, kept in the service core: uptime, the
//! outcome of the last config reload, and each policy's allowed and denied
//! decisions per second (`ring.rs`, counted by `meters.rs` on the decision
//! path). Types only: the page and `GET /v1/stats` that show them are the
//! HTTP front end's (`http/status.rs`).

mod ring;

use std::sync::Mutex;
use std::time::{Instant, SystemTime};

pub(crate) use ring::{Ring, SECONDS, Stats};

/// The outcome of the last config reload.
#[derive(Debug, Clone)]
pub(crate) struct Reload {
    pub(crate) at: SystemTime,
    pub(crate) ok: bool,
    pub(crate) message: String,
    /// Reloads refused since the service started.
    pub(crate) refused: u64,
}

/// What the status page reports beyond the policies and the store.
#[derive(Debug)]
pub(crate) struct Status {
    pub(crate) started: Instant,
    pub(crate) stats: Stats,
    reload: Mutex<Option<Reload>>,
}

impl Default for Status {
    fn default() -> Status {
        let started = Instant::now();
        Status {
            started,
            stats: Stats::new(started),
            reload: Mutex::new(None),
        }
    }
}

impl Status {
    /// Notes a config reload: applied (`ok`) or refused, and why.
    pub(crate) fn reloaded(&self, ok: bool, message: String) {
        let mut last = self.reload.lock().expect("reload lock");
        let refused = last.as_ref().map_or(0, |r| r.refused) + u64::from(!ok);
        *last = Some(Reload {
            at: SystemTime::now(),
            ok,
            message,
            refused,
        });
    }

    /// The last config reload, if any.
    pub(crate) fn last_reload(&self) -> Option<Reload> {
        self.reload.lock().expect("reload lock").clone()
    }
}

//! ERL mode's config files, and reloading them: on SIGHUP, and when an
//! ERL file or (extensions on) the TOML file whose policies they name
//! changes, is added or goes (checked every second). The two are read
//! together and put in force whole; a bad pair keeps the running config
//! and logs why.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

use super::config::PolicyLookup;
use super::files::{self, Fingerprint};
use super::state::ErlState;
use crate::config::{Config, PolicySet};

/// Where the config comes from, and how its directory is read.
#[derive(Debug, Clone)]
pub(super) struct Source {
    pub(super) path: PathBuf,
    pub(super) ignore_dotfiles: bool,
    /// With extensions, the TOML file whose policies rules may name.
    pub(super) policies: Option<PathBuf>,
}

/// What a change of either file reloads: the ERL files' fingerprint and
/// the TOML file's modification time.
pub(super) type Seen = (Fingerprint, Option<std::time::SystemTime>);

impl Source {
    /// The ERL config, its `tollgate_policy` names resolved in `set`
    /// (`None`: extensions off).
    pub(super) fn load(&self, set: Option<&PolicySet>) -> Result<super::ErlConfig, Vec<String>> {
        let lookup = |name: &str| set.and_then(|s| s.get(name).cloned());
        let policies: Option<PolicyLookup<'_>> = set.map(|_| &lookup as PolicyLookup<'_>);
        files::load(&self.path, self.ignore_dotfiles, policies)
            .map_err(|errors| errors.iter().map(ToString::to_string).collect())
    }

    /// Both files read again: the TOML's policies, then the ERL files.
    pub(super) fn reload(&self) -> Result<super::ErlConfig, Vec<String>> {
        let set = match &self.policies {
            None => None,
            Some(path) => Some(
                Config::load(path)
                    .map_err(|errors| errors.iter().map(ToString::to_string).collect::<Vec<_>>())?
                    .policies,
            ),
        };
        self.load(set.as_ref())
    }

    pub(super) fn seen(&self) -> Seen {
        let modified = self
            .policies
            .as_ref()
            .and_then(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
        (
            files::fingerprint(&self.path, self.ignore_dotfiles),
            modified,
        )
    }
}

/// Reloads on SIGHUP and when a file changes, is added or goes (checked
/// every second).
pub(super) async fn reload_on_change(state: Arc<ErlState>, source: Source, mut seen: Seen) {
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return;
    };
    loop {
        tokio::select! {
            _ = hup.recv() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                if source.seen() == seen {
                    continue;
                }
            }
        }
        seen = source.seen();
        match source.reload() {
            Ok(config) => {
                tracing::info!(domains = ?config.domains(), "reloaded {}", source.path.display());
                state.replace(config);
            }
            Err(errors) => {
                metrics::counter!("tollgate_erl_config_load_errors_total").increment(1);
                for e in errors {
                    tracing::error!("reload refused, the running config stays: {e}");
                }
            }
        }
    }
}

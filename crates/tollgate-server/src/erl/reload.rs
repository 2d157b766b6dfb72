//! ERL mode's config files, and reloading them: on SIGHUP, and when an
//! ERL file or (extensions on) the TOML file whose policies they name
//! changes, is added or goes (checked every second). The two are read
//! together, once they have stopped changing (`config::settled`), and put
//! in force whole; a bad pair keeps the running config and logs why at
//! WARN (and counts in `tollgate_erl_config_load_errors_total`), as does a
//! set of files that defines no domain where domains are in force (every
//! file deleted, or emptied): a reload never drops every limit.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

use super::config::PolicyLookup;
use super::files::{self, Fingerprint};
use super::state::ErlState;
use crate::config::{self, Config, PolicySet};

/// Where the config comes from, and how its directory is read.
#[derive(Debug, Clone)]
pub(super) struct Source {
    pub(super) path: PathBuf,
    pub(super) ignore_dotfiles: bool,
    /// With extensions, the TOML file whose policies rules may name.
    pub(super) policies: Option<PathBuf>,
}

/// What a reload reads: the TOML file's text (extensions on), and the ERL
/// files' names and texts.
type Texts = (
    Option<Result<String, String>>,
    Result<Vec<(String, String)>, Vec<super::error::ConfigError>>,
);

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

    /// Both files read again: the TOML's text, then the ERL files'.
    fn read(&self) -> Texts {
        let toml = self.policies.as_ref().map(|path| {
            config::read_text(path, config::MAX_CONFIG_BYTES, "config files").map_err(|e| {
                let at = config::ConfigError {
                    file: path.display().to_string(),
                    line: e.line,
                    message: e.message,
                };
                at.to_string()
            })
        });
        (toml, files::read(&self.path, self.ignore_dotfiles))
    }

    /// The config the texts make: the TOML's policies, then the ERL files.
    fn build(&self, (toml, erl): Texts) -> Result<super::ErlConfig, Vec<String>> {
        fn to_strings<E: ToString>(errors: Vec<E>) -> Vec<String> {
            errors.iter().map(ToString::to_string).collect()
        }
        let set = match (&self.policies, toml) {
            (Some(path), Some(text)) => Some(
                Config::parse(&path.display().to_string(), &text.map_err(|e| vec![e])?)
                    .map_err(to_strings)?
                    .policies,
            ),
            _ => None,
        };
        let lookup = |name: &str| set.as_ref().and_then(|s| s.get(name).cloned());
        let policies: Option<PolicyLookup<'_>> = set.as_ref().map(|_| &lookup as PolicyLookup<'_>);
        files::parse(&erl.map_err(to_strings)?, policies).map_err(to_strings)
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
        let Some(texts) = config::settled(|| source.read()).await else {
            // Still being written: the next check tries again.
            tracing::warn!(
                "{} is still changing; the reload waits until it stays the same for {:?}",
                source.path.display(),
                config::SETTLE
            );
            continue;
        };
        seen = source.seen();
        let in_force = state.config().domains().len();
        match source.build(texts) {
            Ok(config) if config.domains().is_empty() && in_force > 0 => {
                refused(&[format!(
                    "{}: no domain is defined where {in_force} are in force (every file gone or empty?); a reload never removes every limit",
                    source.path.display()
                )]);
            }
            Ok(config) => {
                tracing::info!(domains = ?config.domains(), "reloaded {}", source.path.display());
                state.replace(config);
            }
            Err(errors) => refused(&errors),
        }
    }
}

/// A refused reload: counted, and each reason logged.
fn refused(errors: &[String]) {
    metrics::counter!("tollgate_erl_config_load_errors_total").increment(1);
    for e in errors {
        tracing::warn!("reload refused, the running config stays: {e}");
    }
}

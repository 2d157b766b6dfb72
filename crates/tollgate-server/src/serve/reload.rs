//! Reloading the policies on SIGHUP and when the config file changes.
//!
//! A reload reads the file once it has stopped changing (`config::settled`)
//! and is refused, the running config kept, when the file is invalid, empty
//! (a truncated save, a link to `/dev/null`), or defines no policies while
//! policies are in force: a reload never drops every limit. A refusal is
//! logged at WARN and shown by `/v1/stats` (`reload`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::signal::unix::{SignalKind, signal};

use super::overrides::Overrides;
use crate::config::{self, Config};
use crate::state::AppState;

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Reloads the policies on SIGHUP and when the file changes (checked every
/// second). A config that fails validation leaves the running one in place.
pub(super) async fn reload_on_change(
    state: Arc<AppState>,
    path: PathBuf,
    overrides: Overrides,
    running: Config,
) {
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return;
    };
    let mut seen = modified(&path);
    loop {
        tokio::select! {
            _ = hup.recv() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                let now = modified(&path);
                if now == seen {
                    continue;
                }
            }
        }
        let read = || config::read_text(&path, config::MAX_CONFIG_BYTES, "config files");
        let Some(text) = config::settled(read).await else {
            // Still being written: the next check tries again.
            tracing::warn!(
                "{} is still changing; the reload waits until it stays the same for {:?}",
                path.display(),
                config::SETTLE
            );
            continue;
        };
        seen = modified(&path);
        let file = path.display().to_string();
        let in_force = state.policies().policies.len();
        match checked(&file, text, in_force) {
            Ok(new) if new.store.regions != running.store.regions => {
                // The running store decides the global policies it
                // started with; a file checked against other ones could
                // make one of them a policy it cannot decide.
                let message =
                    "refused, the running config stays: [regions] changed (a restart applies it)";
                tracing::warn!("{message}");
                state.status.reloaded(false, message.to_string());
            }
            Ok(mut new) => {
                // The running store keeps its servers whatever the file
                // now says (a store change waits for a restart).
                let _ = overrides.apply(&mut new);
                if new.store != running.store || new.server != running.server {
                    tracing::warn!(
                        "[server], [store] and on_failure changes take effect after a restart"
                    );
                }
                let names: Vec<&str> = new.policies.policies.iter().map(|p| p.name()).collect();
                tracing::info!(policies = ?names, "reloaded {}", path.display());
                let message = format!("applied, policies: {}", names.join(", "));
                state.overrides.set_base(&new.policies);
                state.replace_policies(new.policies);
                state.status.reloaded(true, message);
            }
            Err(errors) => {
                let first = errors.first().cloned().unwrap_or_default();
                let message = format!("refused, the running config stays: {first}");
                state.status.reloaded(false, message);
                for e in errors {
                    tracing::warn!("reload refused, the running config stays: {e}");
                }
            }
        }
    }
}

/// The config a reload of `file` applies, or why it is refused: the
/// parser's errors, an empty file, or no policies where `in_force` were.
fn checked(
    file: &str,
    text: Result<String, config::ReadError>,
    in_force: usize,
) -> Result<Config, Vec<String>> {
    let text = text.map_err(|e| {
        let at = config::ConfigError {
            file: file.to_string(),
            line: e.line,
            message: e.message,
        };
        vec![at.to_string()]
    })?;
    if text.trim().is_empty() {
        return Err(vec![format!(
            "{file}: the file is empty (a truncated save?); a reload never removes every policy"
        )]);
    }
    let new = Config::parse(file, &text)
        .map_err(|errors| errors.iter().map(ToString::to_string).collect::<Vec<_>>())?;
    if new.policies.policies.is_empty() && in_force > 0 {
        return Err(vec![format!(
            "{file}: the file defines no policies where {in_force} are in force; a reload never removes every policy (restart to run without any)"
        )]);
    }
    Ok(new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reload_never_drops_every_policy() {
        let one =
            "[[policy]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1s\"\n";
        assert!(checked("c.toml", Ok(one.into()), 3).is_ok());
        for empty in ["", "\n  \n"] {
            let e = checked("c.toml", Ok(empty.into()), 3).unwrap_err();
            assert!(e[0].contains("the file is empty"), "{e:?}");
            // even when none are in force: an empty file is a mistake
            assert!(checked("c.toml", Ok(empty.into()), 0).is_err());
        }
        let e = checked("c.toml", Ok("# all gone\n[store]\n".into()), 3).unwrap_err();
        assert!(
            e[0].contains("defines no policies where 3 are in force"),
            "{e:?}"
        );
        assert!(checked("c.toml", Ok("# none\n".into()), 0).is_ok());
    }
}

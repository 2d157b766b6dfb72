//! Reloading the policies on SIGHUP and when the config file changes.

use super::*;

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
        seen = modified(&path);
        match Config::load(&path) {
            Ok(new) if new.store.regions != running.store.regions => {
                // The running store decides the global policies it
                // started with; a file checked against other ones could
                // make one of them a policy it cannot decide.
                let message =
                    "refused, the running config stays: [regions] changed (a restart applies it)";
                tracing::error!("{message}");
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
                let first = errors.first().map(ToString::to_string).unwrap_or_default();
                let message = format!("refused, the running config stays: {first}");
                state.status.reloaded(false, message);
                for e in errors {
                    tracing::error!("reload refused, the running config stays: {e}");
                }
            }
        }
    }
}

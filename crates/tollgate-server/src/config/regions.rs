//! The `[regions]` table: one limit across regions (docs/regions.md).
//!
//! ```toml
//! [regions]
//! name = "eu"                 # this region
//! sync_interval = "100ms"     # how often components go to the others
//! partition_after = "1s"      # staleness after which this region caps itself
//! global = ["api-per-key"]    # the policies decided across regions
//!
//! [[regions.remote]]
//! name = "us"
//! urls = ["rediss://:secret@redis.us.example:6380"]
//! ```

use std::time::Duration;

use serde::Deserialize;
use tollgate::parse_duration;
use tollgate::store::redis::regions::Regions;
use toml::Spanned;

use super::span::SpannedError;
use tollgate::Policy;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRegions {
    name: Spanned<String>,
    sync_interval: Option<Spanned<String>>,
    partition_after: Option<Spanned<String>>,
    max_pending: Option<Spanned<i64>>,
    global: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    remote: Vec<Spanned<RawRemote>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRemote {
    name: Spanned<String>,
    urls: Spanned<Vec<String>>,
}

/// `[regions]`, checked: the regions' settings, each remote region's Redis
/// URLs (in the order of [`Regions::remotes`]) and the global policies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RegionSettings {
    pub(crate) regions: Regions,
    pub(crate) remote_urls: Vec<Vec<String>>,
    pub(crate) global: Vec<String>,
}

/// Checks `[regions]` against the file's policies; `has_redis` says
/// whether `[store]` names a Redis (the mode needs one).
pub(super) fn region_settings(
    raw: RawRegions,
    policies: &[Policy],
    has_redis: bool,
) -> Result<RegionSettings, SpannedError> {
    let table = raw.name.span();
    if !has_redis {
        return Err((
            table,
            "[regions] needs this region's Redis in [store] `urls` (or `sentinels`)".into(),
        ));
    }
    if raw.remote.is_empty() {
        return Err((
            table,
            "[regions] needs at least one [[regions.remote]] (name, urls)".into(),
        ));
    }
    let mut remote_urls = Vec::new();
    let mut names = Vec::new();
    for remote in &raw.remote {
        let remote = remote.get_ref();
        if remote.urls.get_ref().is_empty() {
            return Err((
                remote.urls.span(),
                format!(
                    "[[regions.remote]] `{}`: `urls` must name at least one server",
                    remote.name.get_ref()
                ),
            ));
        }
        names.push(remote.name.get_ref().clone());
        remote_urls.push(remote.urls.get_ref().clone());
    }
    let mut regions = Regions::new(raw.name.get_ref(), names.iter().cloned()).map_err(|e| {
        let span = raw
            .remote
            .iter()
            .find(|r| {
                e.to_string()
                    .contains(&format!("{:?}", r.get_ref().name.get_ref()))
            })
            .map_or(table.clone(), |r| r.get_ref().name.span());
        (span, format!("[regions] {e}"))
    })?;
    if let Some(d) = &raw.sync_interval {
        regions = parse_duration(d.get_ref())
            .and_then(|every| regions.sync_interval(every).map_err(|e| e.to_string()))
            .map_err(|e| (d.span(), format!("[regions] `sync_interval`: {e}")))?;
    }
    // Unless given: ten intervals, at least a second.
    let after = (regions.interval() * 10).max(Duration::from_secs(1));
    regions = match &raw.partition_after {
        Some(d) => parse_duration(d.get_ref())
            .and_then(|after| regions.partition_after(after).map_err(|e| e.to_string()))
            .map_err(|e| (d.span(), format!("[regions] `partition_after`: {e}")))?,
        None => regions
            .partition_after(after)
            .map_err(|e| (table.clone(), format!("[regions] {e}")))?,
    };
    if let Some(n) = &raw.max_pending {
        regions = usize::try_from(*n.get_ref())
            .map_err(|_| format!("must be positive, got {}", n.get_ref()))
            .and_then(|n| regions.max_pending(n).map_err(|e| e.to_string()))
            .map_err(|e| (n.span(), format!("[regions] `max_pending`: {e}")))?;
    }
    let mut global: Vec<String> = Vec::new();
    for name in raw.global.get_ref() {
        let at = name.span();
        let name = name.get_ref();
        if global.contains(name) {
            return Err((
                at,
                format!("[regions] `global`: policy `{name}` is named twice"),
            ));
        }
        let Some(policy) = policies.iter().find(|p| p.name() == name) else {
            return Err((
                at,
                format!("[regions] `global`: no policy is named `{name}`"),
            ));
        };
        if let Some(why) = Regions::unsupported_reason(policy) {
            return Err((
                at,
                format!(
                    "[regions] `global`: policy `{name}` ({}) cannot be global: {why}",
                    policy.algorithm().name()
                ),
            ));
        }
        global.push(name.clone());
    }
    Ok(RegionSettings {
        regions,
        remote_urls,
        global,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{Config, ConfigError};

    const POLICIES: &str = r#"
[[policy]]
name = "api"
algorithm = "fixed_window"
limit = 100
window = "1m"

[[policy]]
name = "bucket"
algorithm = "token_bucket"
rate = 10
per = "1s"
burst = 10
"#;

    fn parse(regions: &str) -> Result<Config, Vec<ConfigError>> {
        Config::parse(
            "r.toml",
            &format!("[store]\nurls = [\"redis://127.0.0.1:1\"]\n{regions}{POLICIES}"),
        )
    }

    fn error(regions: &str) -> ConfigError {
        let mut errors = parse(regions).unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        errors.remove(0)
    }

    const REMOTE: &str = "[[regions.remote]]\nname = \"us\"\nurls = [\"redis://127.0.0.1:2\"]\n";

    #[test]
    fn a_region_table_is_read_whole() {
        let c = parse(&format!(
            "[regions]\nname = \"eu\"\nsync_interval = \"250ms\"\nglobal = [\"api\"]\n{REMOTE}"
        ))
        .unwrap();
        let r = c.store.regions.unwrap();
        assert_eq!(r.regions.name(), "eu");
        assert_eq!(r.regions.remotes(), ["us"]);
        assert_eq!(r.regions.interval().as_millis(), 250);
        assert_eq!(r.regions.partition_threshold().as_millis(), 2500);
        assert_eq!(r.remote_urls, [vec!["redis://127.0.0.1:2".to_string()]]);
        assert_eq!(r.global, ["api"]);
    }

    #[test]
    fn what_cannot_be_global_is_refused_at_its_line() {
        let e = error(&format!(
            "[regions]\nname = \"eu\"\nglobal = [\n  \"api\",\n  \"bucket\",\n]\n{REMOTE}"
        ));
        assert_eq!(e.line, 7, "{e}");
        assert!(
            e.message
                .contains("`bucket` (token_bucket) cannot be global"),
            "{e}"
        );
        let e = error(&format!(
            "[regions]\nname = \"eu\"\nglobal = [\"nope\"]\n{REMOTE}"
        ));
        assert!(e.message.contains("no policy is named `nope`"), "{e}");
        assert_eq!(e.line, 5);
    }

    #[test]
    fn bad_settings_name_their_field() {
        let e = error(&format!(
            "[regions]\nname = \"eu\"\nsync_interval = \"0ms\"\nglobal = []\n{REMOTE}"
        ));
        assert!(e.message.contains("`sync_interval`") && e.line == 5, "{e}");
        let e = error(&format!(
            "[regions]\nname = \"eu\"\npartition_after = \"150ms\"\nglobal = []\n{REMOTE}"
        ));
        assert!(e.message.contains("`partition_after`"), "{e}");
        let e = error("[regions]\nname = \"eu\"\nglobal = []\n");
        assert!(e.message.contains("[[regions.remote]]"), "{e}");
        let e = error(&format!(
            "[regions]\nname = \"eu\"\nglobal = []\ncolour = 1\n{REMOTE}"
        ));
        assert!(e.message.contains("unknown field `colour`"), "{e}");
        let e = error(&format!(
            "[regions]\nname = \"eu\"\nglobal = []\n{REMOTE}{}",
            REMOTE.replace("us", "eu")
        ));
        assert!(e.message.contains("named twice"), "{e}");
        let memory = Config::parse(
            "r.toml",
            &format!("[regions]\nname = \"eu\"\nglobal = []\n{REMOTE}{POLICIES}"),
        )
        .unwrap_err();
        assert!(
            memory[0].message.contains("needs this region's Redis"),
            "{memory:?}"
        );
    }
}

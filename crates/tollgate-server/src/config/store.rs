//! The `[store]` table: which store the service decides on, and how it
//! behaves when Redis fails.

use std::time::Duration;

use serde::Deserialize;
use tollgate::parse_duration;
use tollgate::store::resilient::OnFailure;
use toml::Spanned;

use super::span::SpannedError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStore {
    kind: Option<Spanned<String>>,
    urls: Option<Spanned<Vec<String>>>,
    sentinels: Option<Spanned<Vec<String>>>,
    master_name: Option<Spanned<String>>,
    prefix: Option<Spanned<String>>,
    deadline: Option<Spanned<String>>,
    on_failure: Option<Spanned<String>>,
    expected_instances: Option<Spanned<i64>>,
    max_keys: Option<Spanned<i64>>,
    bucket_expiry_form: Option<bool>,
    pipelining: Option<bool>,
    require_at_startup: Option<bool>,
}

/// Which store the service decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoreSettings {
    /// Empty for the memory store; with `master_name`, Redis Sentinel's
    /// sentinels.
    pub(crate) urls: Vec<String>,
    /// The master the sentinels in `urls` watch (`[store] sentinels` and
    /// `master_name`).
    pub(crate) master_name: Option<String>,
    pub(crate) prefix: Option<String>,
    pub(crate) deadline: Duration,
    pub(crate) on_failure: OnFailure,
    pub(crate) expected_instances: u32,
    pub(crate) max_keys: Option<usize>,
    /// Redis: buckets on the server's clock keep their TAT as the key's
    /// expiry (`RedisStoreBuilder::bucket_expiry_form`).
    pub(crate) bucket_expiry_form: bool,
    /// Redis: concurrent decisions on a standalone server leave together
    /// as pipelines (`RedisStoreBuilder::pipelining`).
    pub(crate) pipelining: bool,
    /// Per-policy failure policies (`on_failure` in a `[[policy]]`).
    pub(crate) policy_on_failure: Vec<(String, OnFailure)>,
    /// Redis: refuse to start when it does not answer at startup, instead
    /// of starting under the failure policy and connecting when it answers.
    pub(crate) require_at_startup: bool,
    /// Redis Sentinel: the master's user and password, when the sentinels'
    /// URLs do not say them (ERL mode's `REDIS_AUTH` behind
    /// `REDIS_TYPE=sentinel`; the TOML file gives them in a
    /// `redis+sentinel://` URL).
    pub(crate) master_auth: Option<(Option<String>, String)>,
    /// `[regions]`: this Redis is one region's, and the global policies
    /// are decided across regions.
    pub(crate) regions: Option<super::regions::RegionSettings>,
}

impl Default for StoreSettings {
    fn default() -> Self {
        StoreSettings {
            urls: Vec::new(),
            master_name: None,
            prefix: None,
            deadline: Duration::from_millis(50),
            on_failure: OnFailure::Local,
            expected_instances: 1,
            max_keys: None,
            bucket_expiry_form: true,
            pipelining: true,
            policy_on_failure: Vec::new(),
            require_at_startup: false,
            master_auth: None,
            regions: None,
        }
    }
}

/// `sentinels` and `master_name`: both or neither, and not beside `urls`
/// (a `redis+sentinel://` URL in `urls` names its sentinels and master
/// itself).
fn sentinel_settings(
    sentinels: &Option<Spanned<Vec<String>>>,
    master_name: &Option<Spanned<String>>,
    settings: &mut StoreSettings,
) -> Result<(), SpannedError> {
    match (sentinels, master_name) {
        (None, None) => Ok(()),
        (Some(s), None) => Err((
            s.span(),
            "[store] `sentinels` needs `master_name`, the name the sentinels know the master by".into(),
        )),
        (None, Some(m)) => Err((
            m.span(),
            "[store] `master_name` needs `sentinels` (or put both in one redis+sentinel:// URL in `urls`)".into(),
        )),
        (Some(s), Some(m)) => {
            if !settings.urls.is_empty() {
                return Err((
                    s.span(),
                    "[store] `sentinels` and `urls` exclude each other: give one of them".into(),
                ));
            }
            if s.get_ref().is_empty() {
                return Err((s.span(), "[store] `sentinels` must name at least one sentinel".into()));
            }
            if m.get_ref().is_empty() {
                return Err((m.span(), "[store] `master_name` must not be empty".into()));
            }
            settings.urls = s.get_ref().clone();
            settings.master_name = Some(m.get_ref().clone());
            Ok(())
        }
    }
}

pub(super) fn store_settings(raw: RawStore) -> Result<StoreSettings, SpannedError> {
    let mut settings = StoreSettings::default();
    let kind = raw.kind.as_ref().map(|k| (k.get_ref().as_str(), k.span()));
    match kind {
        None | Some(("memory", _)) | Some(("redis", _)) => {}
        Some((other, span)) => {
            return Err((
                span,
                format!("[store] `kind`: expected `memory` or `redis`, got {other:?}"),
            ));
        }
    }
    if let Some(urls) = raw.urls {
        if urls.get_ref().is_empty() {
            return Err((
                urls.span(),
                "[store] `urls` must name at least one server".into(),
            ));
        }
        settings.urls = urls.into_inner();
    }
    sentinel_settings(&raw.sentinels, &raw.master_name, &mut settings)?;
    match kind {
        Some(("redis", span)) if settings.urls.is_empty() => {
            return Err((
                span,
                "[store] `kind = \"redis\"` needs `urls` or `sentinels`".into(),
            ));
        }
        Some(("memory", span)) if !settings.urls.is_empty() => {
            return Err((
                span,
                "[store] `kind = \"memory\"` takes no `urls` or `sentinels`".into(),
            ));
        }
        _ => {}
    }
    settings.prefix = raw.prefix.map(Spanned::into_inner);
    if let Some(on) = raw.bucket_expiry_form {
        settings.bucket_expiry_form = on;
    }
    if let Some(on) = raw.pipelining {
        settings.pipelining = on;
    }
    if let Some(on) = raw.require_at_startup {
        settings.require_at_startup = on;
    }
    if let Some(d) = raw.deadline {
        settings.deadline = parse_duration(d.get_ref())
            .map_err(|e| (d.span(), format!("[store] `deadline`: {e}")))?;
        // The store's builder refuses it too, but only when Redis is
        // built: `validate` must refuse what `serve` would.
        if settings.deadline.is_zero() {
            return Err((
                d.span(),
                format!(
                    "[store] `deadline` must be more than 0, got {:?}",
                    d.get_ref()
                ),
            ));
        }
    }
    if let Some(f) = raw.on_failure {
        settings.on_failure = f
            .get_ref()
            .parse()
            .map_err(|e| (f.span(), format!("[store] {e}")))?;
    }
    if let Some(n) = raw.expected_instances {
        settings.expected_instances = u32::try_from(*n.get_ref())
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| {
                (
                    n.span(),
                    format!(
                        "[store] `expected_instances` must be a positive integer, got {}",
                        n.get_ref()
                    ),
                )
            })?;
    }
    if let Some(n) = raw.max_keys {
        settings.max_keys = Some(
            usize::try_from(*n.get_ref())
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| {
                    (
                        n.span(),
                        format!(
                            "[store] `max_keys` must be a positive integer, got {}",
                            n.get_ref()
                        ),
                    )
                })?,
        );
    }
    Ok(settings)
}

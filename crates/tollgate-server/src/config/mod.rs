//! Config files: the `[[policy]]` tables shared by `simulate` and `serve`
//! (`policy.rs`), the `[[descriptor]]` tables (`descriptor.rs`), the
//! service's `[server]` (`server.rs`) and `[store]` (`store.rs`) tables,
//! `[regions]` (`regions.rs`, one limit across regions), ERL mode's
//! `[erl]` (`erl.rs`), the `[[override]]` tables (`overrides.rs`) and the
//! parameters a tier or an override gives (`limits.rs`). `bounded.rs`
//! reads a file under a size cap and shortens values quoted back;
//! `settle.rs` waits for a file being written to stay the same; `span.rs`
//! says where an error is (the leaf every table's reader takes its error
//! types from); `tests.rs` parses whole files.
//!
//! Every error names the file, the line and the field; parsing collects all
//! of them, so `tollgate validate` can print every problem at once.

mod bounded;
mod descriptor;
mod erl;
mod limits;
mod overrides;
mod policy;
mod regions;
mod server;
mod settle;
mod span;
mod store;

use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::sync::OnceLock;

use serde::Deserialize;
use tollgate::Policy;
use tollgate::store::resilient::OnFailure;
use toml::Spanned;

pub(crate) use self::bounded::{
    MAX_CONFIG_BYTES, ReadError, clip_message, excerpt, read_text, text,
};
use self::descriptor::RawDescriptor;
pub(crate) use self::erl::{ErlSettings, HeaderStyle};
use self::erl::{RawErl, erl_settings};
pub(crate) use self::overrides::ConfigOverride;
use self::overrides::RawOverride;
use self::policy::RawPolicy;
pub(crate) use self::regions::RegionSettings;
use self::regions::{RawRegions, region_settings};
pub(crate) use self::server::{ConnectionLimits, ServerSettings};
use self::server::{RawServer, server_settings};
pub(crate) use self::settle::{SETTLE, settled};
use self::span::{field_at, line_of};
pub(crate) use self::store::StoreSettings;
use self::store::{RawStore, store_settings};
use crate::descriptor::Descriptor;
use crate::meters::PolicyMeters;
use crate::status::Stats;

/// One problem in a policy file (or, in `Config::warnings`, one thing it
/// should no longer say).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigError {
    pub(crate) file: String,
    pub(crate) line: usize,
    pub(crate) message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Line 0: about the whole file (it cannot be read, or is too big).
        match self.line {
            0 => write!(f, "{}: {}", self.file, self.message),
            line => write!(f, "{}:{line}: {}", self.file, self.message),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    policy: Vec<Spanned<RawPolicy>>,
    server: Option<RawServer>,
    store: Option<RawStore>,
    #[serde(default)]
    descriptor: Vec<RawDescriptor>,
    erl: Option<RawErl>,
    regions: Option<RawRegions>,
    #[serde(default, rename = "override")]
    overrides: Vec<Spanned<RawOverride>>,
}

/// A whole config file: the policies, and the service's settings.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) policies: PolicySet,
    pub(crate) server: ServerSettings,
    pub(crate) store: StoreSettings,
    /// `[erl]`: read in ERL mode only.
    pub(crate) erl: ErlSettings,
    /// What the file may still say but should not (an old name), each
    /// with its line: logged at WARN when parsed, printed by `validate`.
    pub(crate) warnings: Vec<ConfigError>,
}

/// The policies of a file, in order, and the descriptors that map Envoy's
/// requests to them: what a reload swaps.
#[derive(Debug, Clone)]
pub(crate) struct PolicySet {
    pub(crate) policies: Vec<Policy>,
    /// `[[descriptor]]` tables: Envoy descriptors mapped to policies.
    pub(crate) descriptors: Vec<Descriptor>,
    /// `[[override]]` tables: the base set of overrides (those set at
    /// runtime win on the same selector, see `crate::overrides`).
    pub(crate) overrides: Vec<ConfigOverride>,
    /// What deciding on each policy counts, in `policies`' order: resolved
    /// once per set, on its first decision (`crate::meters`).
    pub(crate) meters: OnceLock<std::sync::Arc<[PolicyMeters]>>,
    /// Each policy's `RateLimit-Policy` value, in `policies`' order: made
    /// once per set, on its first use (the answer of `http/fast.rs`).
    pub(crate) policy_fields: OnceLock<std::sync::Arc<[Option<http::HeaderValue>]>>,
}

impl PolicySet {
    /// The policy named `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Policy> {
        self.policies.iter().find(|p| p.name() == name)
    }

    /// The meters of `policy` when it is one of this set's (not a policy
    /// made for one request, such as a gRPC limit override).
    pub(crate) fn meters(&self, stats: &Stats, policy: &Policy) -> Option<&PolicyMeters> {
        let i = self.policies.iter().position(|p| std::ptr::eq(p, policy))?;
        self.meters_at(stats, i)
    }

    /// The meters of this set's policy named `name` (a decision under an
    /// override counts in its policy's).
    pub(crate) fn meters_named(&self, stats: &Stats, name: &str) -> Option<&PolicyMeters> {
        let i = self.policies.iter().position(|p| p.name() == name)?;
        self.meters_at(stats, i)
    }

    /// The meters of the `i`th policy, made for every policy on first use.
    fn meters_at(&self, stats: &Stats, i: usize) -> Option<&PolicyMeters> {
        let meters = self.meters.get_or_init(|| {
            self.policies
                .iter()
                .map(|p| PolicyMeters::new(p.name(), stats))
                .collect()
        });
        meters.get(i)
    }

    /// The `RateLimit-Policy` value of `policy` alone, when it is one of
    /// this set's.
    pub(crate) fn policy_field(&self, policy: &Policy) -> Option<&http::HeaderValue> {
        let i = self.policies.iter().position(|p| std::ptr::eq(p, policy))?;
        let fields = self.policy_fields.get_or_init(|| {
            self.policies
                .iter()
                .map(|p| {
                    // The policy's part does not read the decision.
                    let any = tollgate::Decision::from_micros(true, p.limit(), 0, 0, 0, 0);
                    let item = tollgate_tower::headers::QuotaItem::of(p, &any);
                    tollgate_tower::headers::RateLimitHeaders::from_items([item])
                        .map(|h| h.policy().clone())
                })
                .collect()
        });
        fields.get(i)?.as_ref()
    }
}

/// Reads and parses a policy file: its policies (the whole file checked).
pub(crate) fn load(path: &Path) -> Result<PolicySet, Vec<ConfigError>> {
    Config::load(path).map(|c| c.policies)
}

impl Config {
    /// Reads and parses a config file.
    pub(crate) fn load(path: &Path) -> Result<Config, Vec<ConfigError>> {
        let file = path.display().to_string();
        let text = read_text(path, MAX_CONFIG_BYTES, "config files").map_err(|e| {
            vec![ConfigError {
                file: file.clone(),
                line: e.line,
                message: e.message,
            }]
        })?;
        Config::parse(&file, &text)
    }

    /// Parses the text of a config file named `file` (for messages).
    pub(crate) fn parse(file: &str, text: &str) -> Result<Config, Vec<ConfigError>> {
        parse(file, text)
    }
}

/// Parses the text of a policy file named `file` (for messages).
fn parse(file: &str, text: &str) -> Result<Config, Vec<ConfigError>> {
    let at = |span: Range<usize>, message: String| ConfigError {
        file: file.to_string(),
        line: line_of(text, span.start),
        message: clip_message(&message).into_owned(),
    };
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let message = e.message().trim();
        let message = match field_at(text, span.start) {
            Some(field) => format!("{field}: {message}"),
            None => message.to_string(),
        };
        vec![at(span, message)]
    })?;
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let mut policies: Vec<Policy> = Vec::new();
    let server = raw
        .server
        .map(|s| server_settings(s, file))
        .transpose()
        .unwrap_or_else(|(span, message)| {
            errors.push(at(span, message));
            None
        })
        .unwrap_or_default();
    let mut store = raw
        .store
        .map(store_settings)
        .transpose()
        .unwrap_or_else(|(span, message)| {
            errors.push(at(span, message));
            None
        })
        .unwrap_or_default();
    let erl = raw
        .erl
        .map(erl_settings)
        .transpose()
        .unwrap_or_else(|(span, message)| {
            errors.push(at(span, message));
            None
        })
        .unwrap_or_default();
    for table in raw.policy {
        let span = table.span();
        let raw = table.into_inner();
        let name = raw.name.get_ref().clone();
        if policies.iter().any(|p| p.name() == name) {
            errors.push(at(
                raw.name.span(),
                format!("policy `{name}` is defined twice"),
            ));
            continue;
        }
        if let Some(value) = &raw.on_failure {
            match value.get_ref().parse::<OnFailure>() {
                Ok(mode) => store.policy_on_failure.push((name.clone(), mode)),
                Err(e) => errors.push(at(value.span(), format!("policy `{name}`: {e}"))),
            }
        }
        if let Some((span, message)) = policy::deprecation(&raw) {
            warnings.push(at(span, format!("policy `{name}`: {message}")));
        }
        match policy::build(&raw) {
            Ok(policy) => policies.push(policy),
            Err((field_span, message)) => errors.push(at(
                field_span.unwrap_or(span.clone()),
                format!("policy `{name}`: {message}"),
            )),
        }
    }
    if let Some(raw) = raw.regions {
        match region_settings(raw, &policies, !store.urls.is_empty()) {
            Ok(settings) => store.regions = Some(settings),
            Err((span, message)) => errors.push(at(span, message)),
        }
    }
    let mut descriptors = Vec::new();
    for raw in raw.descriptor {
        match descriptor::build(raw, &policies, &descriptors) {
            Ok(d) => descriptors.push(d),
            Err((span, message)) => errors.push(at(span, message)),
        }
    }
    let mut overrides: Vec<ConfigOverride> = Vec::new();
    for table in raw.overrides {
        match overrides::build(table, &policies, &overrides) {
            Ok(o) => overrides.push(o),
            Err((span, message)) => errors.push(at(span, message)),
        }
    }
    if errors.is_empty() {
        for warning in &warnings {
            tracing::warn!("{warning}");
        }
        Ok(Config {
            policies: PolicySet {
                policies,
                descriptors,
                overrides,
                meters: OnceLock::new(),
                policy_fields: OnceLock::new(),
            },
            server,
            store,
            erl,
            warnings,
        })
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests;

//! A loaded ERL config: each domain's descriptor tree, checked as ERL's
//! `loadDescriptors`/`loadConfig` (in its `src/config/config_impl.go`)
//! check it.
//!
//! A node's children are found by their composite key, `key` or
//! `key_value` (so `{key: a_b, value: c}` and `{key: a, value: b_c}` are
//! the same key, and a duplicate); the children whose composite key holds
//! a `*` are also kept, in file order, as wildcard patterns.

use std::collections::HashMap;
use std::sync::Arc;

use envoy_types::pb::google::protobuf::Struct;
use tollgate::{Algorithm, Policy};

use super::decode::{DescriptorDoc, RateLimitDoc, RootDoc};
use super::error::ConfigError;
use super::window::Unit;

/// What a matched rule does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Limit {
    /// `requests_per_unit` per `unit`, in ERL's fixed window.
    Fixed {
        /// The window's limit (0 refuses everything).
        requests_per_unit: u32,
        /// The window.
        unit: Unit,
    },
    /// `unlimited: true`: allowed, never counted.
    Unlimited,
    /// tollgate's extension (`tollgate_policy: NAME`): this policy of the
    /// TOML file decides, on tollgate's store. Resolved when the config is
    /// built, so a reload of either file swaps the pair whole.
    Policy(Policy),
}

/// One descriptor's `rate_limit` with the descriptor's flags.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rule {
    /// What it does.
    pub(crate) limit: Limit,
    /// `rate_limit.name`: what other rules' `replaces` name.
    pub(crate) name: String,
    /// The names of the rules this one replaces.
    pub(crate) replaces: Vec<String>,
    /// Decided and counted, never refused.
    pub(crate) shadow_mode: bool,
    /// Refuses only when every quota descriptor of the call is over.
    pub(crate) quota_mode: bool,
    /// Stats per request value.
    pub(crate) detailed_metric: bool,
    /// The rule's place: `domain.key_value.key2`, as ERL names its stats.
    pub(crate) path: String,
    /// The descriptor's `metadata`, for the response's dynamic metadata.
    pub(crate) metadata: Option<Struct>,
}

/// A descriptor of the config: its rule and its children.
#[derive(Debug, Default)]
pub(crate) struct Node {
    pub(crate) rule: Option<Arc<Rule>>,
    pub(crate) children: Children,
    /// `share_threshold: true`: every value its wildcard matches shares one
    /// counter.
    pub(crate) share_threshold: bool,
    /// `value_to_metric: true`: the request's value, not the config's,
    /// names this level in the stats (see `matcher::metric_path`).
    pub(crate) value_to_metric: bool,
}

/// A node's children by composite key, and its wildcard patterns.
#[derive(Debug, Default)]
pub(crate) struct Children {
    pub(crate) by_key: HashMap<String, Node>,
    /// Composite keys holding `*`, in file order, each split on `*`.
    pub(crate) wildcards: Vec<(String, Vec<String>)>,
}

/// Every domain of an ERL config.
#[derive(Debug, Default)]
pub(crate) struct ErlConfig {
    pub(crate) domains: HashMap<String, Children>,
}

/// The TOML policy a `tollgate_policy` name stands for, if any.
pub(crate) type PolicyLookup<'a> = &'a dyn Fn(&str) -> Option<Policy>;

impl ErlConfig {
    /// Builds the config from decoded files, in order; every error found
    /// is returned. `policies` is how `tollgate_policy` names are resolved
    /// (`None`: the extension is off, and the first pass refused the key).
    pub(crate) fn build(
        files: &[(String, RootDoc)],
        policies: Option<PolicyLookup<'_>>,
    ) -> Result<ErlConfig, Vec<ConfigError>> {
        let mut config = ErlConfig::default();
        let mut errors = Vec::new();
        for (file, root) in files {
            if root.domain.is_empty() {
                errors.push(ConfigError::file(
                    file,
                    "config file cannot have empty domain",
                ));
                continue;
            }
            if config.domains.contains_key(&root.domain) {
                errors.push(ConfigError::file(
                    file,
                    format!("duplicate domain '{}' in config file", root.domain),
                ));
                continue;
            }
            let mut loader = Loader {
                file,
                policies,
                errors: &mut errors,
            };
            let children = loader.level(&format!("{}.", root.domain), &root.descriptors);
            config.domains.insert(root.domain.clone(), children);
        }
        if errors.is_empty() {
            Ok(config)
        } else {
            Err(errors)
        }
    }

    /// Whether `domain` has a config (a limit override applies only then).
    pub(crate) fn knows(&self, domain: &str) -> bool {
        self.domains.contains_key(domain)
    }

    /// The domains, sorted.
    pub(crate) fn domains(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.domains.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    /// Every rule, with its path (for listing and for policy checks).
    pub(crate) fn rules(&self) -> Vec<Arc<Rule>> {
        fn walk(children: &Children, out: &mut Vec<Arc<Rule>>) {
            for node in children.by_key.values() {
                out.extend(node.rule.clone());
                walk(&node.children, out);
            }
        }
        let mut out = Vec::new();
        for children in self.domains.values() {
            walk(children, &mut out);
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }
}

struct Loader<'a, 'p> {
    file: &'a str,
    policies: Option<PolicyLookup<'p>>,
    errors: &'a mut Vec<ConfigError>,
}

impl Loader<'_, '_> {
    fn error(&mut self, line: usize, message: String) {
        self.errors.push(ConfigError::at(self.file, line, message));
    }

    fn level(&mut self, parent: &str, docs: &[DescriptorDoc]) -> Children {
        let mut children = Children::default();
        for doc in docs {
            if doc.key.is_empty() {
                self.error(
                    doc.line,
                    format!(
                        "descriptor has empty key (under '{}')",
                        parent.trim_end_matches('.')
                    ),
                );
                continue;
            }
            let composite = if doc.value.is_empty() {
                doc.key.clone()
            } else {
                format!("{}_{}", doc.key, doc.value)
            };
            let path = format!("{parent}{composite}");
            if children.by_key.contains_key(&composite) {
                self.error(
                    doc.line,
                    format!("duplicate descriptor composite key '{path}'"),
                );
                continue;
            }
            let rule = doc
                .rate_limit
                .as_ref()
                .and_then(|rl| self.rule(doc, rl, &path));
            let wildcard = composite.contains('*');
            if doc.share_threshold && !wildcard {
                self.error(
                    doc.line,
                    format!(
                        "share_threshold can only be used with wildcard values (containing '*'), but found key '{composite}'"
                    ),
                );
            }
            if wildcard {
                let parts = composite.split('*').map(str::to_string).collect();
                children.wildcards.push((composite.clone(), parts));
            }
            let node = Node {
                rule: rule.map(Arc::new),
                children: self.level(&format!("{path}."), &doc.descriptors),
                share_threshold: doc.share_threshold && wildcard,
                value_to_metric: doc.value_to_metric,
            };
            children.by_key.insert(composite, node);
        }
        children
    }

    /// The policy `tollgate_policy: NAME` names, when the rule gives it
    /// alone and it can decide an ERL call (a concurrency policy cannot:
    /// Envoy never gives a lease back; nor a leaky bucket: Envoy cannot
    /// wait the delay it admits with).
    fn policy(&mut self, rl: &RateLimitDoc, name: &str, path: &str) -> Option<Policy> {
        if rl.unlimited || !rl.unit.is_empty() || rl.has_requests_per_unit {
            self.error(
                rl.line,
                format!("'{path}': tollgate_policy takes the place of unit, requests_per_unit and unlimited; give it alone"),
            );
            return None;
        }
        let Some(policy) = self.policies.and_then(|lookup| lookup(name)) else {
            self.error(
                rl.line,
                format!("'{path}': tollgate_policy '{name}' is no policy of the TOML config"),
            );
            return None;
        };
        let why = match policy.algorithm() {
            Algorithm::Concurrency(_) => {
                Some("a concurrency policy, which takes leases that Envoy never gives back")
            }
            Algorithm::LeakyBucket(_) => Some(
                "a leaky bucket, which admits with a delay that Envoy cannot wait (gcra or token_bucket limit the same rate by refusing)",
            ),
            _ => None,
        };
        if let Some(why) = why {
            self.error(
                rl.line,
                format!("'{path}': tollgate_policy '{name}' is {why}"),
            );
            return None;
        }
        Some(policy)
    }

    fn rule(&mut self, doc: &DescriptorDoc, rl: &RateLimitDoc, path: &str) -> Option<Rule> {
        let unit = Unit::from_name(&rl.unit);
        let limit = match (&rl.policy, rl.unlimited, unit) {
            (Some(name), _, _) => Limit::Policy(self.policy(rl, name, path)?),
            (None, true, Some(_)) => {
                self.error(
                    rl.line,
                    format!(
                        "should not specify rate limit unit when unlimited ('{path}' has unit '{}')",
                        rl.unit
                    ),
                );
                return None;
            }
            (None, true, None) => Limit::Unlimited,
            (None, false, Some(unit)) => Limit::Fixed {
                requests_per_unit: rl.requests_per_unit,
                unit,
            },
            (None, false, None) => {
                self.error(
                    rl.line,
                    format!("invalid rate limit unit '{}' (in '{path}')", rl.unit),
                );
                return None;
            }
        };
        let mut ok = true;
        for (name, line) in &rl.replaces {
            if name.is_empty() {
                self.error(
                    *line,
                    format!("should not have an empty replaces entry (in '{path}')"),
                );
                ok = false;
            } else if *name == rl.name {
                self.error(
                    *line,
                    format!(
                        "replaces should not contain name of same descriptor ('{name}' in '{path}')"
                    ),
                );
                ok = false;
            }
        }
        ok.then(|| Rule {
            limit,
            name: rl.name.clone(),
            replaces: rl.replaces.iter().map(|(n, _)| n.clone()).collect(),
            shadow_mode: doc.shadow_mode,
            quota_mode: doc.quota_mode,
            detailed_metric: doc.detailed_metric,
            path: path.to_string(),
            metadata: doc.metadata.clone(),
        })
    }
}

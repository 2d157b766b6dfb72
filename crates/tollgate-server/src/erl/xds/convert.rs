//! A pushed set of `RateLimitConfig` resources into the checked
//! [`ErlConfig`], through the records the YAML path decodes into, so that
//! both sources are checked by the same code with the same messages. This
//! is what ERL does too: it turns each resource into its YAML structs and
//! loads those.
//!
//! Each resource's `name` stands where the file name stands in an error
//! (there are no lines). The unit number becomes the enum's name, and an
//! unknown number its digits, so that `invalid rate limit unit 'UNKNOWN'`
//! reads as ERL's does.

use envoy_types::pb::google::protobuf::Any;
use prost::Message;

use super::super::config::ErlConfig;
use super::super::decode::{DescriptorDoc, RateLimitDoc, RootDoc};
use super::super::error::ConfigError;
use super::super::window::Unit;
use super::proto::{RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, TYPE_URL};

/// Decodes and checks a whole state-of-the-world push; every error found
/// is returned.
pub(crate) fn config(resources: &[Any]) -> Result<ErlConfig, Vec<ConfigError>> {
    let mut docs = Vec::with_capacity(resources.len());
    let mut errors = Vec::new();
    for (i, any) in resources.iter().enumerate() {
        let place = format!("resource {i}");
        if any.type_url != TYPE_URL {
            errors.push(ConfigError::file(
                &place,
                format!("type '{}' is not {TYPE_URL}", any.type_url),
            ));
            continue;
        }
        match RateLimitConfig::decode(any.value.as_slice()) {
            Ok(resource) => docs.push(root(resource)),
            Err(e) => errors.push(ConfigError::file(&place, format!("cannot decode: {e}"))),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    ErlConfig::build(&docs, None)
}

/// One resource as the file name and top level the YAML path builds.
fn root(resource: RateLimitConfig) -> (String, RootDoc) {
    let doc = RootDoc {
        domain: resource.domain,
        descriptors: resource.descriptors.into_iter().map(descriptor).collect(),
    };
    (resource.name, doc)
}

fn descriptor(d: RateLimitDescriptor) -> DescriptorDoc {
    DescriptorDoc {
        line: 0,
        key: d.key,
        value: d.value,
        rate_limit: d.rate_limit.map(rate_limit),
        descriptors: d.descriptors.into_iter().map(descriptor).collect(),
        shadow_mode: d.shadow_mode,
        quota_mode: d.quota_mode,
        detailed_metric: d.detailed_metric,
        // not in the resource, as share_threshold
        value_to_metric: false,
        metadata: d.metadata.filter(|m| !m.fields.is_empty()),
        // not in the resource: ERL's xDS configs cannot share a wildcard's counter
        share_threshold: false,
    }
}

fn rate_limit(p: RateLimitPolicy) -> RateLimitDoc {
    let unit = match Unit::from_proto(p.unit) {
        Some(unit) => unit.name().to_string(),
        None if p.unit == 0 => "UNKNOWN".to_string(),
        None => p.unit.to_string(),
    };
    RateLimitDoc {
        line: 0,
        requests_per_unit: p.requests_per_unit,
        has_requests_per_unit: true,
        unit,
        unlimited: p.unlimited,
        name: p.name,
        replaces: p.replaces.into_iter().map(|r| (r.name, 0)).collect(),
        policy: None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::proto::{RateLimitReplace, TYPE_URL};
    use super::*;
    use crate::erl::{Limit, Unit as U};

    pub(crate) fn any(config: &RateLimitConfig) -> Any {
        Any {
            type_url: TYPE_URL.to_string(),
            value: config.encode_to_vec(),
        }
    }

    fn limited(key: &str, unit: i32, rpu: u32) -> RateLimitDescriptor {
        RateLimitDescriptor {
            key: key.to_string(),
            rate_limit: Some(RateLimitPolicy {
                unit,
                requests_per_unit: rpu,
                ..RateLimitPolicy::default()
            }),
            ..RateLimitDescriptor::default()
        }
    }

    fn resource(name: &str, domain: &str, descriptors: Vec<RateLimitDescriptor>) -> Any {
        any(&RateLimitConfig {
            name: name.to_string(),
            domain: domain.to_string(),
            descriptors,
        })
    }

    fn messages(resources: &[Any]) -> Vec<String> {
        config(resources)
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_tree_converts_with_units_by_number() {
        let mut parent = limited("a", 7, 3);
        parent.descriptors.push(limited("b", 2, 5));
        let built = config(&[resource("r", "d", vec![parent])]).unwrap();
        let a = &built.domains["d"].by_key["a"];
        let rule = a.rule.as_ref().unwrap();
        assert_eq!(
            rule.limit,
            Limit::Fixed {
                requests_per_unit: 3,
                unit: U::Week
            }
        );
        assert_eq!(rule.path, "d.a");
        let b = a.children.by_key["b"].rule.as_ref().unwrap();
        assert_eq!(
            b.limit,
            Limit::Fixed {
                requests_per_unit: 5,
                unit: U::Minute
            }
        );
    }

    #[test]
    fn unlimited_without_unit_is_unlimited() {
        let mut d = limited("free", 0, 0);
        d.rate_limit.as_mut().unwrap().unlimited = true;
        let built = config(&[resource("r", "d", vec![d])]).unwrap();
        let rule = built.domains["d"].by_key["free"].rule.clone().unwrap();
        assert_eq!(rule.limit, Limit::Unlimited);
    }

    #[test]
    fn errors_are_the_yaml_paths_naming_the_resource() {
        let mut replacing = limited("c", 1, 1);
        let policy = replacing.rate_limit.as_mut().unwrap();
        policy.name = "self".to_string();
        policy.replaces = vec![RateLimitReplace {
            name: "self".to_string(),
        }];
        let mut both = limited("u", 1, 1);
        both.rate_limit.as_mut().unwrap().unlimited = true;
        let got = messages(&[
            resource("first", "d", vec![limited("a", 0, 1), limited("b", 9, 1)]),
            resource("second", "d", vec![]),
            resource("third", "", vec![]),
            resource("fourth", "e", vec![limited("", 1, 1), replacing, both]),
        ]);
        assert_eq!(
            got,
            [
                "first: invalid rate limit unit 'UNKNOWN' (in 'd.a')",
                "first: invalid rate limit unit '9' (in 'd.b')",
                "second: duplicate domain 'd' in config file",
                "third: config file cannot have empty domain",
                "fourth: descriptor has empty key (under 'e')",
                "fourth: replaces should not contain name of same descriptor ('self' in 'e.c')",
                "fourth: should not specify rate limit unit when unlimited ('e.u' has unit 'SECOND')",
            ]
        );
    }

    #[test]
    fn a_resource_of_another_type_or_undecodable_is_refused() {
        let other = Any {
            type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".to_string(),
            value: Vec::new(),
        };
        let garbage = Any {
            type_url: TYPE_URL.to_string(),
            value: vec![0x0a, 0xff],
        };
        let got = messages(&[other, garbage]);
        assert_eq!(got.len(), 2);
        assert!(got[0].starts_with(
            "resource 0: type 'type.googleapis.com/envoy.config.cluster.v3.Cluster' is not"
        ));
        assert!(
            got[1].starts_with("resource 1: cannot decode"),
            "{}",
            got[1]
        );
    }
}

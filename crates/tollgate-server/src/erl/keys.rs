//! ERL's first pass over a file (`validateYamlKeys` in its
//! `src/config/config_impl.go`): every map key anywhere but under
//! `metadata` is a string from one flat set, every list holds maps, and
//! every leaf is a string, an integer, a boolean or null. A float leaf
//! (`requests_per_unit: 1.5`, and `value: 1e3`) is refused.
//!
//! The set is flat, so a known key in the wrong place passes here and the
//! typed pass ignores it (`shadow_mode` written inside `rate_limit` has no
//! effect in ERL); tollgate keeps that.

use super::error::ConfigError;
use super::yaml::{Kind, Node, Value};

/// ERL's keys, valid at any depth.
const VALID_KEYS: &[&str] = &[
    "domain",
    "key",
    "value",
    "descriptors",
    "rate_limit",
    "unit",
    "requests_per_unit",
    "unlimited",
    "shadow_mode",
    "quota_mode",
    "name",
    "replaces",
    "detailed_metric",
    "value_to_metric",
    "share_threshold",
    "metadata",
];

/// tollgate's extension: `rate_limit: {tollgate_policy: NAME}` counts the
/// descriptor with a policy of the TOML file instead of a fixed window.
pub(crate) const POLICY_KEY: &str = "tollgate_policy";

/// Checks the document's keys and leaves; every error found is pushed.
pub(crate) fn check(file: &str, root: &Node, extensions: bool, errors: &mut Vec<ConfigError>) {
    match &root.kind {
        Kind::Map(entries) => check_map(file, entries, extensions, errors),
        Kind::Scalar {
            value: Value::Null, ..
        } => {}
        _ => errors.push(ConfigError::at(
            file,
            root.line,
            format!(
                "error loading config file: cannot unmarshal {} into a map (a config file is a map with `domain` and `descriptors`)",
                root.tag()
            ),
        )),
    }
}

fn check_map(
    file: &str,
    entries: &[(Node, Node)],
    extensions: bool,
    errors: &mut Vec<ConfigError>,
) {
    for (key, value) in entries {
        let name = match &key.kind {
            Kind::Scalar {
                text,
                value: Value::Str,
            } => text.as_str(),
            _ => {
                errors.push(ConfigError::at(
                    file,
                    key.line,
                    format!("config error, key is not of type string: {}", key.display()),
                ));
                continue;
            }
        };
        let known = VALID_KEYS.contains(&name) || (extensions && name == POLICY_KEY);
        if !known {
            let hint = if name == POLICY_KEY {
                " (a tollgate extension: turn extensions on to use it)"
            } else {
                ""
            };
            errors.push(ConfigError::at(
                file,
                key.line,
                format!("config error, unknown key '{name}'{hint}"),
            ));
            continue;
        }
        if name == "metadata" {
            continue;
        }
        match &value.kind {
            Kind::Seq(items) => {
                for item in items {
                    match &item.kind {
                        Kind::Map(inner) => check_map(file, inner, extensions, errors),
                        _ => errors.push(ConfigError::at(
                            file,
                            item.line,
                            format!(
                                "config error, yaml file contains list of type other than map: {}",
                                item.display()
                            ),
                        )),
                    }
                }
            }
            Kind::Map(inner) => check_map(file, inner, extensions, errors),
            Kind::Scalar {
                value: Value::Str | Value::Int(_) | Value::Bool(_) | Value::Null,
                ..
            } => {}
            Kind::Scalar { text, value: leaf } => errors.push(ConfigError::at(
                file,
                value.line,
                format!(
                    "error checking config: `{name}: {text}` is a {}, not a string, integer or boolean",
                    match leaf {
                        Value::Float => "float",
                        _ => "number too large for an integer",
                    }
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::erl::yaml::parse;

    fn errors(text: &str, extensions: bool) -> Vec<String> {
        let root = parse(text).unwrap().unwrap();
        let mut errors = Vec::new();
        check("f.yaml", &root, extensions, &mut errors);
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_good_file_passes() {
        let text = "domain: d\ndescriptors:\n  - key: k\n    value: 8080\n    rate_limit: {unit: second, requests_per_unit: 5}\n    metadata: {anything: [1.5, {2: x}]}\n";
        assert_eq!(errors(text, false), Vec::<String>::new());
    }

    #[test]
    fn refuses_what_erl_refuses() {
        assert_eq!(
            errors("domain: d\nratelimit: 5\n", false),
            ["f.yaml:2: config error, unknown key 'ratelimit'"]
        );
        assert_eq!(
            errors("domain: d\n0.25: x\n", false),
            ["f.yaml:2: config error, key is not of type string: 0.25"]
        );
        assert_eq!(
            errors("domain: d\ndescriptors: [a]\n", false),
            ["f.yaml:2: config error, yaml file contains list of type other than map: a"]
        );
        let float = errors(
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      requests_per_unit: 1.5\n",
            false,
        );
        assert_eq!(float.len(), 1);
        assert!(
            float[0].starts_with("f.yaml:5: error checking config"),
            "{float:?}"
        );
        assert!(float[0].contains("requests_per_unit: 1.5"), "{float:?}");
        assert_eq!(
            errors("- domain: d\n", false),
            [
                "f.yaml:1: error loading config file: cannot unmarshal !!seq into a map (a config file is a map with `domain` and `descriptors`)"
            ]
        );
    }

    #[test]
    fn a_known_key_in_the_wrong_place_passes() {
        assert!(errors("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, shadow_mode: true}\n", false).is_empty());
    }

    #[test]
    fn the_policy_key_needs_extensions() {
        let text = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {tollgate_policy: p}\n";
        let refused = errors(text, false);
        assert_eq!(refused.len(), 1);
        assert!(
            refused[0].contains("unknown key 'tollgate_policy' (a tollgate extension"),
            "{refused:?}"
        );
        assert!(errors(text, true).is_empty());
    }
}

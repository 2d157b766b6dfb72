//! ERL's second pass over a file: the document read into typed records, as
//! yaml.v2's non-strict decoder fills ERL's `YamlRoot`/`YamlDescriptor`/
//! `YamlRateLimit` structs.
//!
//! - A string field takes any scalar's raw text (`key: 123` is `"123"`),
//!   null is `""`.
//! - `requests_per_unit` takes an integer from 0 to 2^32-1; absent or null
//!   is 0 (which blocks everything); a quoted number is refused, as in ERL.
//! - A boolean field takes a YAML 1.1 boolean (`yes`, `on`, `true`, ...);
//!   null is false; a quoted `"true"` is refused.
//! - A key this record does not have is ignored (the first pass already
//!   refused keys outside ERL's set).
//!
//! Every type error is collected, each naming its line, key and value.

use super::error::ConfigError;
use super::keys::POLICY_KEY;
use super::yaml::{Kind, Node, Value};
use envoy_types::pb::google::protobuf::Struct;

/// A file's top level.
#[derive(Debug, Default)]
pub(crate) struct RootDoc {
    pub(crate) domain: String,
    pub(crate) descriptors: Vec<DescriptorDoc>,
}

/// One `descriptors` entry.
#[derive(Debug, Default)]
pub(crate) struct DescriptorDoc {
    pub(crate) line: usize,
    pub(crate) key: String,
    pub(crate) value: String,
    pub(crate) rate_limit: Option<RateLimitDoc>,
    pub(crate) descriptors: Vec<DescriptorDoc>,
    pub(crate) shadow_mode: bool,
    pub(crate) quota_mode: bool,
    pub(crate) detailed_metric: bool,
    pub(crate) value_to_metric: bool,
    pub(crate) share_threshold: bool,
    /// Returned as dynamic metadata when the descriptor passes.
    pub(crate) metadata: Option<Struct>,
}

/// A descriptor's `rate_limit`.
#[derive(Debug, Default)]
pub(crate) struct RateLimitDoc {
    pub(crate) line: usize,
    pub(crate) requests_per_unit: u32,
    /// Whether `requests_per_unit` is written (0 and absent are alike for
    /// ERL; beside `tollgate_policy` it is refused).
    pub(crate) has_requests_per_unit: bool,
    pub(crate) unit: String,
    pub(crate) unlimited: bool,
    pub(crate) name: String,
    /// Each `replaces` entry's name and line.
    pub(crate) replaces: Vec<(String, usize)>,
    /// tollgate's extension: the name of a TOML policy.
    pub(crate) policy: Option<String>,
}

struct Decoder<'a> {
    file: &'a str,
    errors: Vec<ConfigError>,
}

/// Decodes a document that passed the first pass.
pub(crate) fn decode(file: &str, root: &Node) -> Result<RootDoc, Vec<ConfigError>> {
    let mut d = Decoder {
        file,
        errors: Vec::new(),
    };
    let mut doc = RootDoc::default();
    if let Kind::Map(entries) = &root.kind {
        for (key, value) in entries {
            match key.text().unwrap_or_default() {
                "domain" => doc.domain = d.string(key, value),
                "descriptors" => doc.descriptors = d.descriptors(key, value),
                _ => {}
            }
        }
    }
    if d.errors.is_empty() {
        Ok(doc)
    } else {
        Err(d.errors)
    }
}

impl Decoder<'_> {
    fn refuse(&mut self, key: &Node, value: &Node, into: &str) {
        let what = match value.text() {
            Some(text) => format!("{} `{text}`", value.tag()),
            None => value.tag().to_string(),
        };
        self.errors.push(ConfigError::at(
            self.file,
            value.line,
            format!(
                "error loading config file: cannot unmarshal {what} into {into} (`{}`)",
                key.text().unwrap_or_default()
            ),
        ));
    }

    fn string(&mut self, key: &Node, value: &Node) -> String {
        match &value.kind {
            Kind::Scalar {
                value: Value::Null, ..
            } => String::new(),
            Kind::Scalar { text, .. } => text.clone(),
            _ => {
                self.refuse(key, value, "string");
                String::new()
            }
        }
    }

    fn boolean(&mut self, key: &Node, value: &Node) -> bool {
        match &value.kind {
            Kind::Scalar {
                value: Value::Bool(b),
                ..
            } => *b,
            Kind::Scalar {
                value: Value::Null, ..
            } => false,
            _ => {
                self.refuse(key, value, "bool");
                false
            }
        }
    }

    fn uint32(&mut self, key: &Node, value: &Node) -> u32 {
        match &value.kind {
            Kind::Scalar {
                value: Value::Int(n),
                ..
            } if u32::try_from(*n).is_ok() => *n as u32,
            Kind::Scalar {
                value: Value::Null, ..
            } => 0,
            _ => {
                self.refuse(key, value, "uint32");
                0
            }
        }
    }

    /// The maps of a list (the first pass made sure they are maps).
    fn maps<'n>(&mut self, key: &Node, value: &'n Node, into: &str) -> Vec<&'n Node> {
        match &value.kind {
            Kind::Seq(items) => items.iter().collect(),
            Kind::Scalar {
                value: Value::Null, ..
            } => Vec::new(),
            _ => {
                self.refuse(key, value, into);
                Vec::new()
            }
        }
    }

    fn descriptors(&mut self, key: &Node, value: &Node) -> Vec<DescriptorDoc> {
        let items = self.maps(key, value, "a list of descriptors");
        items
            .into_iter()
            .map(|item| self.descriptor(item))
            .collect()
    }

    fn descriptor(&mut self, node: &Node) -> DescriptorDoc {
        let mut doc = DescriptorDoc {
            line: node.line,
            ..Default::default()
        };
        let Kind::Map(entries) = &node.kind else {
            return doc;
        };
        for (key, value) in entries {
            match key.text().unwrap_or_default() {
                "key" => doc.key = self.string(key, value),
                "value" => doc.value = self.string(key, value),
                "rate_limit" => doc.rate_limit = self.rate_limit(key, value),
                "descriptors" => doc.descriptors = self.descriptors(key, value),
                "shadow_mode" => doc.shadow_mode = self.boolean(key, value),
                "quota_mode" => doc.quota_mode = self.boolean(key, value),
                "detailed_metric" => doc.detailed_metric = self.boolean(key, value),
                "value_to_metric" => doc.value_to_metric = self.boolean(key, value),
                "share_threshold" => doc.share_threshold = self.boolean(key, value),
                "metadata" => doc.metadata = self.metadata(key, value),
                _ => {}
            }
        }
        doc
    }

    fn rate_limit(&mut self, key: &Node, value: &Node) -> Option<RateLimitDoc> {
        let entries = match &value.kind {
            Kind::Map(entries) => entries,
            Kind::Scalar {
                value: Value::Null, ..
            } => return None,
            _ => {
                self.refuse(key, value, "a rate_limit map");
                return None;
            }
        };
        let mut doc = RateLimitDoc {
            line: value.line,
            ..Default::default()
        };
        for (key, value) in entries {
            match key.text().unwrap_or_default() {
                "requests_per_unit" => {
                    doc.requests_per_unit = self.uint32(key, value);
                    doc.has_requests_per_unit = true;
                }
                "unit" => doc.unit = self.string(key, value),
                "unlimited" => doc.unlimited = self.boolean(key, value),
                "name" => doc.name = self.string(key, value),
                "replaces" => {
                    for item in self.maps(key, value, "a list of replaces") {
                        let mut name = String::new();
                        if let Kind::Map(inner) = &item.kind {
                            for (k, v) in inner {
                                if k.text() == Some("name") {
                                    name = self.string(k, v);
                                }
                            }
                        }
                        doc.replaces.push((name, item.line));
                    }
                }
                POLICY_KEY => doc.policy = Some(self.string(key, value)),
                _ => {}
            }
        }
        Some(doc)
    }

    fn metadata(&mut self, key: &Node, value: &Node) -> Option<Struct> {
        match &value.kind {
            Kind::Map(entries) if entries.is_empty() => None,
            Kind::Map(_) => super::metadata::from_yaml(value),
            Kind::Scalar {
                value: Value::Null, ..
            } => None,
            _ => {
                self.refuse(key, value, "a metadata map");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::erl::yaml::parse;

    fn decoded(text: &str) -> Result<RootDoc, Vec<String>> {
        let root = parse(text).unwrap().unwrap();
        decode("f.yaml", &root).map_err(|e| e.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn scalars_keep_their_raw_text() {
        let doc = decoded(
            "domain: 123\ndescriptors:\n  - key: yes\n    value: 0x10\n    shadow_mode: on\n    rate_limit:\n      unit: Minute\n      requests_per_unit: 4294967295\n      name: ~\n",
        )
        .unwrap();
        assert_eq!(doc.domain, "123");
        let d = &doc.descriptors[0];
        assert_eq!((d.key.as_str(), d.value.as_str()), ("yes", "0x10"));
        assert!(d.shadow_mode);
        let rl = d.rate_limit.as_ref().unwrap();
        assert_eq!(
            (rl.unit.as_str(), rl.requests_per_unit),
            ("Minute", u32::MAX)
        );
        assert_eq!(rl.name, "");
        assert_eq!(d.line, 3);
    }

    #[test]
    fn absent_and_null_fields() {
        let doc = decoded("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n  - key: b\n    rate_limit: {unit: day}\n").unwrap();
        assert!(doc.descriptors[0].rate_limit.is_none());
        let rl = doc.descriptors[1].rate_limit.as_ref().unwrap();
        assert_eq!(rl.requests_per_unit, 0);
        assert!(
            decoded("domain: d\ndescriptors:\n")
                .unwrap()
                .descriptors
                .is_empty()
        );
    }

    #[test]
    fn type_errors_name_line_key_and_value() {
        for (rpu, want) in [
            ("-1", "!!int `-1` into uint32"),
            ("4294967296", "!!int `4294967296` into uint32"),
            ("\"5\"", "!!str `5` into uint32"),
            ("abc", "!!str `abc` into uint32"),
        ] {
            let errors = decoded(&format!(
                "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: {rpu}\n"
            ))
            .unwrap_err();
            assert_eq!(
                errors,
                [format!(
                    "f.yaml:6: error loading config file: cannot unmarshal {want} (`requests_per_unit`)"
                )]
            );
        }
        let errors = decoded(
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: 5\n    shadow_mode: \"true\"\n",
        )
        .unwrap_err();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors[0].contains("!!int `5` into a rate_limit map"),
            "{errors:?}"
        );
        assert!(
            errors[1].contains("!!str `true` into bool (`shadow_mode`)"),
            "{errors:?}"
        );
        let errors = decoded("domain: [a]\n").unwrap_err();
        assert!(
            errors[0].contains("!!seq into string (`domain`)"),
            "{errors:?}"
        );
    }

    #[test]
    fn replaces_and_metadata() {
        let doc = decoded("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      replaces:\n        - name: a\n        - {}\n    metadata: {team: x, n: 2, f: 1.5}\n").unwrap();
        let rl = doc.descriptors[0].rate_limit.as_ref().unwrap();
        assert_eq!(rl.replaces, [("a".to_string(), 7), (String::new(), 8)]);
        let errors = decoded("domain: d\ndescriptors:\n  - key: k\n    metadata: 5\n").unwrap_err();
        assert!(
            errors[0].contains("!!int `5` into a metadata map (`metadata`)"),
            "{errors:?}"
        );
    }
}

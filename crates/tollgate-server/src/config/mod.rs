//! Config files: the `[[policy]]` tables shared by `simulate` and `serve`
//! (`policy.rs`), the `[[descriptor]]` tables (`descriptor.rs`), and the
//! service's `[server]` (`server.rs`) and `[store]` (`store.rs`) tables.
//!
//! Every error names the file, the line and the field; parsing collects all
//! of them, so `tollgate validate` can print every problem at once.

mod descriptor;
mod policy;
mod server;
mod store;

use std::fmt;
use std::ops::Range;
use std::path::Path;

use serde::Deserialize;
use tollgate::Policy;
use tollgate::store::resilient::OnFailure;
use toml::Spanned;

use self::descriptor::RawDescriptor;
use self::policy::RawPolicy;
pub(crate) use self::server::ServerSettings;
use self::server::{RawServer, server_settings};
pub(crate) use self::store::StoreSettings;
use self::store::{RawStore, store_settings};
use crate::descriptor::Descriptor;

/// One problem in a policy file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigError {
    pub(crate) file: String,
    pub(crate) line: usize,
    pub(crate) message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
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
}

/// A whole config file: the policies, and the service's settings.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) policies: PolicySet,
    pub(crate) server: ServerSettings,
    pub(crate) store: StoreSettings,
}

/// The policies of a file, in order, and the descriptors that map Envoy's
/// requests to them: what a reload swaps.
#[derive(Debug, Clone)]
pub(crate) struct PolicySet {
    pub(crate) policies: Vec<Policy>,
    /// `[[descriptor]]` tables: Envoy descriptors mapped to policies.
    pub(crate) descriptors: Vec<Descriptor>,
}

impl PolicySet {
    /// The policy named `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Policy> {
        self.policies.iter().find(|p| p.name() == name)
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
        let text = std::fs::read_to_string(path).map_err(|e| {
            vec![ConfigError {
                file: file.clone(),
                line: 0,
                message: format!("cannot read the file: {e}"),
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
        message,
    };
    let raw: RawFile = toml::from_str(text)
        .map_err(|e| vec![at(e.span().unwrap_or(0..0), e.message().trim().to_string())])?;
    let mut errors = Vec::new();
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
        match policy::build(&raw) {
            Ok(policy) => policies.push(policy),
            Err((field_span, message)) => errors.push(at(
                field_span.unwrap_or(span.clone()),
                format!("policy `{name}`: {message}"),
            )),
        }
    }
    let mut descriptors = Vec::new();
    for raw in raw.descriptor {
        match descriptor::build(raw, &policies, &descriptors) {
            Ok(d) => descriptors.push(d),
            Err((span, message)) => errors.push(at(span, message)),
        }
    }
    if errors.is_empty() {
        Ok(Config {
            policies: PolicySet {
                policies,
                descriptors,
            },
            server,
            store,
        })
    } else {
        Err(errors)
    }
}

pub(crate) type FieldError = (Option<Range<usize>>, String);
pub(crate) type SpannedError = (Range<usize>, String);

/// The 1-based line of byte `offset` in `text`.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(file: &str, text: &str) -> Result<Config, Vec<ConfigError>> {
        Config::parse(file, text)
    }

    #[test]
    fn parses_every_algorithm() {
        let set = Config::parse(
            "t.toml",
            r#"
[[policy]]
name = "a"
algorithm = "fixed_window"
limit = 120
window = "60s"

[[policy]]
name = "b"
algorithm = "gcra"
rate = 10
per = "1s"
burst = 20

[[policy]]
name = "c"
algorithm = "leaky_bucket"
rate = 10
per = "1s"
capacity = 5

[[policy]]
name = "d"
algorithm = "concurrency"
limit = 3
lease = "30s"
"#,
        )
        .unwrap()
        .policies;
        assert_eq!(set.policies.len(), 4);
        assert_eq!(set.get("b").unwrap().limit(), 20);
    }

    #[test]
    fn a_window_opts_in_to_leases_and_other_values_are_named() {
        let window = |algorithm: &str, lease: &str| {
            format!(
                "[[policy]]\nname = \"a\"\nalgorithm = \"{algorithm}\"\nlimit = 10\nwindow = \"1s\"\nlease = \"{lease}\"\n"
            )
        };
        for algorithm in ["fixed_window", "sliding_window"] {
            let set = parse("l.toml", &window(algorithm, "auto"))
                .unwrap()
                .policies;
            assert!(set.get("a").unwrap().leased());
            let set = parse("l.toml", &window(algorithm, "off")).unwrap().policies;
            assert!(!set.get("a").unwrap().leased());
            let e = parse("l.toml", &window(algorithm, "sometimes")).unwrap_err();
            assert_eq!(e[0].line, 6, "{}", e[0]);
            assert!(e[0].to_string().contains("lease"), "{}", e[0]);
        }
        let e = parse("l.toml", &window("sliding_log", "auto")).unwrap_err();
        assert!(e[0].to_string().contains("lease"), "{}", e[0]);
    }

    #[test]
    fn every_error_has_its_line_and_field() {
        let errors = parse(
            "bad.toml",
            r#"[[policy]]
name = "a"
algorithm = "fixed_window"
limit = 0
window = "60s"

[[policy]]
name = "b"
algorithm = "sliding_log"
limit = 5
window = "forever"

[[policy]]
name = "c"
algorithm = "token_bucket"
rate = 1
per = "1s"

[[policy]]
name = "d"
algorithm = "bogus"
"#,
        )
        .unwrap_err();
        let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(text.len(), 4, "{text:#?}");
        assert!(
            text[0].starts_with("bad.toml:4: policy `a`:") && text[0].contains("`limit`"),
            "{}",
            text[0]
        );
        assert!(
            text[1].starts_with("bad.toml:11: policy `b`: `window`"),
            "{}",
            text[1]
        );
        assert!(text[2].contains("missing field `burst`"), "{}", text[2]);
        assert!(
            text[3].starts_with("bad.toml:21:") && text[3].contains("unknown algorithm `bogus`"),
            "{}",
            text[3]
        );
    }

    #[test]
    fn type_errors_and_unknown_fields_name_the_line() {
        let e = parse("x.toml", "[[policy]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = 1.5\nwindow = \"1s\"\n").unwrap_err();
        assert_eq!(e[0].line, 4, "{}", e[0]);
        let e = parse("x.toml", "[[policy]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1s\"\nwindo = \"2s\"\n").unwrap_err();
        assert!(e[0].message.contains("windo"), "{}", e[0]);
        let e = parse(
            "x.toml",
            "[[policy]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = -3\nwindow = \"1s\"\n",
        )
        .unwrap_err();
        assert_eq!(e[0].line, 4);
        assert!(e[0].message.contains("-3"), "{}", e[0]);
        let e = parse("x.toml", "[[policy]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1s\"\nburst = 4\n").unwrap_err();
        assert!(e[0].message.contains("does not apply"), "{}", e[0]);
    }

    #[test]
    fn the_bucket_expiry_form_can_be_switched_off() {
        let policy =
            "[[policy]]\nname = \"a\"\nalgorithm = \"gcra\"\nrate = 1\nper = \"1s\"\nburst = 1\n";
        let on = Config::parse("x.toml", policy).unwrap();
        assert!(on.store.bucket_expiry_form, "on by default");
        let off = Config::parse(
            "x.toml",
            &format!("[store]\nbucket_expiry_form = false\n{policy}"),
        )
        .unwrap();
        assert!(!off.store.bucket_expiry_form);
        let e = parse(
            "x.toml",
            &format!("[store]\nbucket_expiry_form = \"no\"\n{policy}"),
        )
        .unwrap_err();
        assert_eq!(e[0].line, 2, "{}", e[0]);
    }

    #[test]
    fn pipelining_can_be_switched_off() {
        let policy =
            "[[policy]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1s\"\n";
        assert!(
            Config::parse("x.toml", policy).unwrap().store.pipelining,
            "on by default"
        );
        let off =
            Config::parse("x.toml", &format!("[store]\npipelining = false\n{policy}")).unwrap();
        assert!(!off.store.pipelining);
        let e = parse("x.toml", &format!("[store]\npipelining = 1\n{policy}")).unwrap_err();
        assert_eq!(e[0].line, 2, "{}", e[0]);
    }

    #[test]
    fn sentinels_need_a_master_name_and_exclude_urls() {
        let policy =
            "[[policy]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1s\"\n";
        let ok = Config::parse(
            "x.toml",
            &format!("[store]\nsentinels = [\"redis://10.0.0.1:26379\", \"redis://10.0.0.2:26379\"]\nmaster_name = \"mymaster\"\n{policy}"),
        )
        .unwrap();
        assert_eq!(ok.store.urls.len(), 2);
        assert_eq!(ok.store.master_name.as_deref(), Some("mymaster"));
        for (store, line, says) in [
            (
                "sentinels = [\"redis://h:26379\"]\n",
                2,
                "needs `master_name`",
            ),
            ("master_name = \"m\"\n", 2, "needs `sentinels`"),
            (
                "urls = [\"redis://h/\"]\nsentinels = [\"redis://h:26379\"]\nmaster_name = \"m\"\n",
                3,
                "exclude each other",
            ),
            (
                "sentinels = []\nmaster_name = \"m\"\n",
                2,
                "at least one sentinel",
            ),
            (
                "kind = \"memory\"\nsentinels = [\"redis://h\"]\nmaster_name = \"m\"\n",
                2,
                "takes no",
            ),
        ] {
            let e = parse("x.toml", &format!("[store]\n{store}{policy}")).unwrap_err();
            assert_eq!(e[0].line, line, "{}", e[0]);
            assert!(e[0].message.contains(says), "{}", e[0]);
        }
    }

    #[test]
    fn a_policy_takes_a_group() {
        let text = "[[policy]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1s\"\ngroup = \"user\"\n";
        let config = Config::parse("x.toml", text).unwrap();
        assert_eq!(config.policies.get("a").unwrap().group(), Some("user"));
        let e = parse("x.toml", &text.replace("\"user\"", "\"us/er\"")).unwrap_err();
        assert_eq!(e[0].line, 6, "{}", e[0]);
        assert!(e[0].message.contains("group"), "{}", e[0]);
    }
}

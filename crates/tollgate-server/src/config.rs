//! Policy files: the `[[policy]]` tables shared by `simulate` and `serve`,
//! and the service's `[server]` and `[store]` tables.
//!
//! Every error names the file, the line and the field; parsing collects all
//! of them, so `tollgate validate` can print every problem at once.

use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use crate::descriptor::{self, Descriptor, RawDescriptor};
use serde::Deserialize;
use tollgate::store::resilient::OnFailure;
use tollgate::{Policy, parse_duration};
use toml::Spanned;

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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    listen: Option<Spanned<String>>,
    grpc_listen: Option<Spanned<String>>,
    token: Option<Spanned<String>>,
    token_file: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStore {
    kind: Option<Spanned<String>>,
    urls: Option<Spanned<Vec<String>>>,
    prefix: Option<Spanned<String>>,
    deadline: Option<Spanned<String>>,
    on_failure: Option<Spanned<String>>,
    expected_instances: Option<Spanned<i64>>,
    max_keys: Option<Spanned<i64>>,
    bucket_expiry_form: Option<bool>,
    pipelining: Option<bool>,
}

/// Where the service listens and who may ask it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ServerSettings {
    pub(crate) listen: Option<SocketAddr>,
    pub(crate) grpc_listen: Option<SocketAddr>,
    pub(crate) token: Option<String>,
}

/// Which store the service decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoreSettings {
    /// Empty for the memory store.
    pub(crate) urls: Vec<String>,
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
}

impl Default for StoreSettings {
    fn default() -> Self {
        StoreSettings {
            urls: Vec::new(),
            prefix: None,
            deadline: Duration::from_millis(50),
            on_failure: OnFailure::Local,
            expected_instances: 1,
            max_keys: None,
            bucket_expiry_form: true,
            pipelining: true,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    name: Spanned<String>,
    algorithm: Spanned<String>,
    limit: Option<Spanned<i64>>,
    window: Option<Spanned<String>>,
    rate: Option<Spanned<i64>>,
    per: Option<Spanned<String>>,
    burst: Option<Spanned<i64>>,
    capacity: Option<Spanned<i64>>,
    lease: Option<Spanned<String>>,
    on_failure: Option<Spanned<String>>,
}

/// The policies of a file, in order, and the service's settings.
#[derive(Debug, Clone)]
pub(crate) struct PolicySet {
    pub(crate) policies: Vec<Policy>,
    /// Per-policy failure policies (`on_failure` in a `[[policy]]`).
    pub(crate) on_failure: Vec<(String, OnFailure)>,
    pub(crate) server: ServerSettings,
    pub(crate) store: StoreSettings,
    /// `[[descriptor]]` tables: Envoy descriptors mapped to policies.
    pub(crate) descriptors: Vec<Descriptor>,
}

impl PolicySet {
    /// The policy named `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Policy> {
        self.policies.iter().find(|p| p.name() == name)
    }
}

/// Reads and parses a policy file.
pub(crate) fn load(path: &Path) -> Result<PolicySet, Vec<ConfigError>> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        vec![ConfigError {
            file: file.clone(),
            line: 0,
            message: format!("cannot read the file: {e}"),
        }]
    })?;
    parse(&file, &text)
}

/// Parses the text of a policy file named `file` (for messages).
pub(crate) fn parse(file: &str, text: &str) -> Result<PolicySet, Vec<ConfigError>> {
    let at = |span: Range<usize>, message: String| ConfigError {
        file: file.to_string(),
        line: line_of(text, span.start),
        message,
    };
    let raw: RawFile = toml::from_str(text)
        .map_err(|e| vec![at(e.span().unwrap_or(0..0), e.message().trim().to_string())])?;
    let mut errors = Vec::new();
    let mut policies: Vec<Policy> = Vec::new();
    let mut on_failure = Vec::new();
    let server = raw
        .server
        .map(|s| server_settings(s, file))
        .transpose()
        .unwrap_or_else(|(span, message)| {
            errors.push(at(span, message));
            None
        })
        .unwrap_or_default();
    let store = raw
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
                Ok(mode) => on_failure.push((name.clone(), mode)),
                Err(e) => errors.push(at(value.span(), format!("policy `{name}`: {e}"))),
            }
        }
        match build(&raw) {
            Ok(policy) => policies.push(policy),
            Err((field_span, message)) => errors.push(at(
                field_span.unwrap_or(span.clone()),
                format!("policy `{name}`: {message}"),
            )),
        }
    }
    let mut descriptors = Vec::new();
    for raw in raw.descriptor {
        match descriptor::check(raw, &policies, &descriptors) {
            Ok(d) => descriptors.push(d),
            Err((span, message)) => errors.push(at(span, message)),
        }
    }
    if errors.is_empty() {
        Ok(PolicySet {
            policies,
            on_failure,
            server,
            store,
            descriptors,
        })
    } else {
        Err(errors)
    }
}

type FieldError = (Option<Range<usize>>, String);
type SpannedError = (Range<usize>, String);

fn address(
    value: Option<Spanned<String>>,
    field: &str,
) -> Result<Option<SocketAddr>, SpannedError> {
    match value {
        Some(v) => Ok(Some(v.get_ref().parse::<SocketAddr>().map_err(|e| {
            (
                v.span(),
                format!("[server] `{field}`: {e}: {:?} (expected an address such as \"127.0.0.1:8080\")", v.get_ref()),
            )
        })?)),
        None => Ok(None),
    }
}

fn server_settings(raw: RawServer, file: &str) -> Result<ServerSettings, SpannedError> {
    let grpc_listen = address(raw.grpc_listen, "grpc_listen")?;
    let listen = address(raw.listen, "listen")?;
    let token = match (raw.token, raw.token_file) {
        (Some(t), Some(f)) => {
            let span = t.span().start.min(f.span().start)..f.span().end;
            return Err((
                span,
                "[server] `token` and `token_file` exclude each other".into(),
            ));
        }
        (Some(t), None) if t.get_ref().is_empty() => {
            return Err((t.span(), "[server] `token` must not be empty".into()));
        }
        (Some(t), None) => Some(t.into_inner()),
        (None, Some(f)) => {
            // A relative token file is relative to the config file.
            let path = Path::new(file)
                .parent()
                .unwrap_or(Path::new("."))
                .join(f.get_ref());
            let token = std::fs::read_to_string(&path)
                .map_err(|e| {
                    (
                        f.span(),
                        format!("[server] `token_file` {}: {e}", path.display()),
                    )
                })?
                .trim()
                .to_string();
            if token.is_empty() {
                return Err((
                    f.span(),
                    format!("[server] `token_file` {} is empty", path.display()),
                ));
            }
            Some(token)
        }
        (None, None) => None,
    };
    Ok(ServerSettings {
        listen,
        grpc_listen,
        token,
    })
}

fn store_settings(raw: RawStore) -> Result<StoreSettings, SpannedError> {
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
    match kind {
        Some(("redis", span)) if settings.urls.is_empty() => {
            return Err((span, "[store] `kind = \"redis\"` needs `urls`".into()));
        }
        Some(("memory", span)) if !settings.urls.is_empty() => {
            return Err((span, "[store] `kind = \"memory\"` takes no `urls`".into()));
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
    if let Some(d) = raw.deadline {
        settings.deadline = parse_duration(d.get_ref())
            .map_err(|e| (d.span(), format!("[store] `deadline`: {e}")))?;
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

fn build(raw: &RawPolicy) -> Result<Policy, FieldError> {
    let name = raw.name.get_ref();
    let algorithm = raw.algorithm.get_ref().as_str();
    let (allowed, policy): (&[&str], _) = match algorithm {
        "fixed_window" => (
            &["limit", "window"],
            Policy::fixed_window(name, count(raw, "limit")?, duration(raw, "window")?),
        ),
        "sliding_window" => (
            &["limit", "window"],
            Policy::sliding_window(name, count(raw, "limit")?, duration(raw, "window")?),
        ),
        "sliding_log" => (
            &["limit", "window"],
            Policy::sliding_log(name, count(raw, "limit")?, duration(raw, "window")?),
        ),
        "token_bucket" => (
            &["rate", "per", "burst"],
            Policy::token_bucket(
                name,
                count(raw, "rate")?,
                duration(raw, "per")?,
                count(raw, "burst")?,
            ),
        ),
        "gcra" => (
            &["rate", "per", "burst"],
            Policy::gcra(
                name,
                count(raw, "rate")?,
                duration(raw, "per")?,
                count(raw, "burst")?,
            ),
        ),
        "leaky_bucket" => (
            &["rate", "per", "capacity"],
            Policy::leaky_bucket(
                name,
                count(raw, "rate")?,
                duration(raw, "per")?,
                count(raw, "capacity")?,
            ),
        ),
        "concurrency" => (
            &["limit", "lease"],
            Policy::concurrency(name, count(raw, "limit")?, duration(raw, "lease")?),
        ),
        other => {
            return Err((
                Some(raw.algorithm.span()),
                format!(
                    "unknown algorithm `{other}` (expected fixed_window, sliding_window, sliding_log, token_bucket, gcra, leaky_bucket or concurrency)"
                ),
            ));
        }
    };
    for (field, span) in raw.present() {
        if !allowed.contains(&field) {
            return Err((
                Some(span),
                format!(
                    "field `{field}` does not apply to {algorithm} (it takes {})",
                    allowed.join(", ")
                ),
            ));
        }
    }
    policy.map_err(|e| {
        let span = match &e {
            tollgate::Error::InvalidPolicy { field, .. } => raw.span_of(field),
            _ => None,
        };
        (span, e.to_string())
    })
}

impl RawPolicy {
    fn present(&self) -> Vec<(&'static str, Range<usize>)> {
        let mut out = Vec::new();
        for (name, span) in [
            ("limit", self.limit.as_ref().map(|v| v.span())),
            ("rate", self.rate.as_ref().map(|v| v.span())),
            ("burst", self.burst.as_ref().map(|v| v.span())),
            ("capacity", self.capacity.as_ref().map(|v| v.span())),
            ("window", self.window.as_ref().map(|v| v.span())),
            ("per", self.per.as_ref().map(|v| v.span())),
            ("lease", self.lease.as_ref().map(|v| v.span())),
        ] {
            if let Some(span) = span {
                out.push((name, span));
            }
        }
        out
    }

    fn span_of(&self, field: &str) -> Option<Range<usize>> {
        match field {
            "name" => Some(self.name.span()),
            _ => self
                .present()
                .into_iter()
                .find(|(f, _)| *f == field)
                .map(|(_, s)| s),
        }
    }
}

fn count(raw: &RawPolicy, field: &'static str) -> Result<u64, FieldError> {
    let value = match field {
        "limit" => &raw.limit,
        "rate" => &raw.rate,
        "burst" => &raw.burst,
        _ => &raw.capacity,
    };
    let value = value
        .as_ref()
        .ok_or_else(|| (None, format!("missing field `{field}`")))?;
    u64::try_from(*value.get_ref())
        .ok()
        .filter(|&v| v > 0)
        .ok_or_else(|| {
            (
                Some(value.span()),
                format!(
                    "`{field}` must be a positive integer, got {}",
                    value.get_ref()
                ),
            )
        })
}

fn duration(raw: &RawPolicy, field: &'static str) -> Result<std::time::Duration, FieldError> {
    let value = match field {
        "window" => &raw.window,
        "per" => &raw.per,
        _ => &raw.lease,
    };
    let value = value
        .as_ref()
        .ok_or_else(|| (None, format!("missing field `{field}`")))?;
    parse_duration(value.get_ref()).map_err(|e| (Some(value.span()), format!("`{field}`: {e}")))
}

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

    #[test]
    fn parses_every_algorithm() {
        let set = parse(
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
        .unwrap();
        assert_eq!(set.policies.len(), 4);
        assert_eq!(set.get("b").unwrap().limit(), 20);
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
        let on = parse("x.toml", policy).unwrap();
        assert!(on.store.bucket_expiry_form, "on by default");
        let off = parse(
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
            parse("x.toml", policy).unwrap().store.pipelining,
            "on by default"
        );
        let off = parse("x.toml", &format!("[store]\npipelining = false\n{policy}")).unwrap();
        assert!(!off.store.pipelining);
        let e = parse("x.toml", &format!("[store]\npipelining = 1\n{policy}")).unwrap_err();
        assert_eq!(e[0].line, 2, "{}", e[0]);
    }
}

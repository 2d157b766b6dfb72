//! ERL's stats key for a matched descriptor, when the config asks for
//! request values in it (`GetLimit` in ERL's `src/config/config_impl.go`).
//!
//! Without either flag the key is the rule's path (`domain.key_value.key2`,
//! the config's values), so the stats of a config are bounded by its
//! rules. `detailed_metric: true` on the rule's descriptor makes it
//! `domain.key_value.key2_value2` from the request's entries (a
//! `share_threshold` wildcard's entry keeps the pattern; without one, an
//! empty value still gets its `_`, as in ERL). `value_to_metric: true` on
//! a descriptor of the way shows the request's value at that level where
//! the config has none (a key-only descriptor) or a wildcard; an exact
//! value is the request's anyway, and a `share_threshold` wildcard keeps
//! its pattern.

use super::config::ErlConfig;
use super::matcher::{Matched, Via};

impl ErlConfig {
    /// ERL's stats key of `entries`, matched as `m`, when the config asks
    /// for request values in it; `None` otherwise (the key is then the
    /// rule's path).
    pub(crate) fn metric_path(
        &self,
        domain: &str,
        entries: &[(&str, &str)],
        m: &Matched<'_>,
    ) -> Option<String> {
        if m.rule.detailed_metric {
            return Some(detailed(domain, entries, &m.shared));
        }
        if !m.value_to_metric {
            return None;
        }
        let mut path = domain.to_string();
        self.walk(domain, entries, |i, node, via| {
            let (key, value) = entries[i];
            let shown = match via {
                Via::Exact => value,
                Via::Wildcard(pattern) if node.share_threshold || !node.value_to_metric => pattern,
                Via::Wildcard(_) => value,
                Via::Key if node.value_to_metric => value,
                Via::Key => "",
            };
            push(&mut path, key, shown);
        });
        Some(path)
    }
}

fn detailed(domain: &str, entries: &[(&str, &str)], shared: &[(usize, &str)]) -> String {
    let mut path = domain.to_string();
    for (i, &(key, value)) in entries.iter().enumerate() {
        match shared.iter().find(|(j, _)| *j == i) {
            Some((_, pattern)) => push(&mut path, key, pattern),
            None if shared.is_empty() => {
                path.push('.');
                path.push_str(key);
                path.push('_');
                path.push_str(value);
            }
            None => push(&mut path, key, value),
        }
    }
    path
}

/// `.key_value`, or `.key` when `value` is empty.
fn push(path: &mut String, key: &str, value: &str) {
    path.push('.');
    path.push_str(key);
    if !value.is_empty() {
        path.push('_');
        path.push_str(value);
    }
}

#[cfg(test)]
mod tests {
    use crate::erl::files::parse;

    const CONFIG: &str = "
domain: d
descriptors:
  - key: user
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: tenant
    value_to_metric: true
    descriptors:
      - key: path
        value: /api/*
        value_to_metric: true
        rate_limit: {unit: minute, requests_per_unit: 10}
      - key: path
        value: /files/*
        share_threshold: true
        value_to_metric: true
        rate_limit: {unit: minute, requests_per_unit: 10}
      - key: method
        rate_limit: {unit: minute, requests_per_unit: 10}
  - key: plain
    descriptors:
      - key: path
        value: /x/*
        rate_limit: {unit: minute, requests_per_unit: 10}
  - key: shared
    value: a*
    share_threshold: true
    descriptors:
      - key: sub
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 10}
";

    fn path(entries: &[(&str, &str)]) -> (String, Option<String>) {
        let c = parse(&[("t.yaml".to_string(), CONFIG.to_string())], None).unwrap();
        let m = c.find("d", entries).unwrap();
        (m.rule.path.clone(), c.metric_path("d", entries, &m))
    }

    #[test]
    fn request_values_only_where_the_config_asks() {
        // neither flag: the rule's path, the config's own values
        assert_eq!(
            path(&[("plain", "p"), ("path", "/x/1")]),
            ("d.plain.path_/x/*".into(), None)
        );
        // detailed_metric: every entry's value
        assert_eq!(
            path(&[("user", "alice")]).1.as_deref(),
            Some("d.user_alice")
        );
        assert_eq!(path(&[("user", "")]).1.as_deref(), Some("d.user_"));
        // value_to_metric: the key-only level and the wildcard show the value
        assert_eq!(
            path(&[("tenant", "acme"), ("path", "/api/v1")]),
            (
                "d.tenant.path_/api/*".into(),
                Some("d.tenant_acme.path_/api/v1".into())
            )
        );
        // a share_threshold wildcard keeps its pattern; a level without the
        // flag keeps the config's
        assert_eq!(
            path(&[("tenant", "acme"), ("path", "/files/a")])
                .1
                .as_deref(),
            Some("d.tenant_acme.path_/files/*")
        );
        assert_eq!(
            path(&[("tenant", "acme"), ("method", "GET")]).1.as_deref(),
            Some("d.tenant_acme.method")
        );
        // detailed_metric under a share_threshold wildcard
        assert_eq!(
            path(&[("shared", "abc"), ("sub", "s1")]).1.as_deref(),
            Some("d.shared_a*.sub_s1")
        );
    }
}

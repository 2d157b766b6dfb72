//! Finding a request descriptor's rule, as ERL's `GetLimit` does.
//!
//! Level by level, each entry `(key, value)` is looked up as `key_value`
//! among the children; failing that, the children's wildcard patterns are
//! tried in file order and the first that matches wins; failing that, the
//! key alone. There is no backtracking: once an entry matched one child,
//! the next entry is looked up only among that child's children. A rule
//! applies only when it sits on the node of the request's last entry (the
//! depths are equal); a node without `rate_limit` has no limit.

use std::sync::Arc;

use super::config::{Children, ErlConfig, Node, Rule};

/// What a request descriptor matched.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Matched<'c> {
    /// The rule on the node of the last entry.
    pub(crate) rule: &'c Arc<Rule>,
    /// Entries matched by a `share_threshold` wildcard: the entry's index
    /// and the pattern's value part, which takes the place of the request's
    /// value in the counter's key (so all those values share one counter).
    pub(crate) shared: Vec<(usize, &'c str)>,
    /// Whether a node on the way has `value_to_metric`.
    pub(crate) value_to_metric: bool,
}

/// How one entry found its node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via<'c> {
    /// `key_value` itself.
    Exact,
    /// A wildcard pattern: its value part (`/files/*` of `path_/files/*`).
    Wildcard(&'c str),
    /// The key alone.
    Key,
}

impl ErlConfig {
    /// The rule of `entries` (`(key, value)` pairs) in `domain`, if any.
    pub(crate) fn find<'c>(
        &'c self,
        domain: &str,
        entries: &[(&str, &str)],
    ) -> Option<Matched<'c>> {
        let mut shared = Vec::new();
        let mut value_to_metric = false;
        let last = self.walk(domain, entries, |i, node, via| {
            if let Via::Wildcard(p) = via
                && node.share_threshold
            {
                shared.push((i, p));
            }
            value_to_metric |= node.value_to_metric;
        })?;
        last.rule.as_ref().map(|rule| Matched {
            rule,
            shared,
            value_to_metric,
        })
    }

    /// Walks `entries` down `domain`'s tree, `visit`ing each entry's node
    /// and how it was found; the last entry's node, if every entry found
    /// one.
    pub(crate) fn walk<'c>(
        &'c self,
        domain: &str,
        entries: &[(&str, &str)],
        mut visit: impl FnMut(usize, &'c Node, Via<'c>),
    ) -> Option<&'c Node> {
        let mut level: &Children = self.domains.get(domain)?;
        let mut composite = String::new();
        for (i, &(key, value)) in entries.iter().enumerate() {
            composite.clear();
            composite.push_str(key);
            composite.push('_');
            composite.push_str(value);
            let (next, via) = if let Some(node) = level.by_key.get(&composite) {
                (node, Via::Exact)
            } else if let Some((p, node)) = level
                .wildcards
                .iter()
                .find(|(_, parts)| wildcard_match(parts, &composite))
                .and_then(|(p, _)| Some((p, level.by_key.get(p)?)))
            {
                let value_part = p
                    .strip_prefix(key)
                    .and_then(|rest| rest.strip_prefix('_'))
                    .unwrap_or(p);
                (node, Via::Wildcard(value_part))
            } else {
                (level.by_key.get(key)?, Via::Key)
            };
            visit(i, next, via);
            if i + 1 == entries.len() {
                return Some(next);
            }
            if next.children.by_key.is_empty() {
                return None;
            }
            level = &next.children;
        }
        None
    }
}

/// Whether `text` matches a pattern split on `*`: each `*` stands for any
/// run of characters, possibly empty, and the fixed parts appear in order.
pub(crate) fn wildcard_match(parts: &[String], text: &str) -> bool {
    let (first, last) = match parts {
        [] => return text.is_empty(),
        [only] => return only == text,
        [first, .., last] => (first, last),
    };
    let fixed: usize = parts.iter().map(String::len).sum();
    if text.len() < fixed || !text.starts_with(first.as_str()) || !text.ends_with(last.as_str()) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part.as_str()) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::erl::config::Limit;
    use crate::erl::files::parse;
    use crate::erl::window::Unit;

    fn config(text: &str) -> ErlConfig {
        parse(&[("t.yaml".to_string(), text.to_string())], None).unwrap()
    }

    fn limit(config: &ErlConfig, entries: &[(&str, &str)]) -> Option<(u32, Unit)> {
        match &config.find("d", entries)?.rule.limit {
            Limit::Fixed {
                requests_per_unit,
                unit,
            } => Some((*requests_per_unit, *unit)),
            other => panic!("{other:?}"),
        }
    }

    fn parts(p: &str) -> Vec<String> {
        p.split('*').map(str::to_string).collect()
    }

    #[test]
    fn wildcards_anywhere() {
        assert!(wildcard_match(&parts("k_foo*"), "k_foo"));
        assert!(wildcard_match(&parts("k_foo*"), "k_foobar"));
        assert!(wildcard_match(&parts("k_bar*b"), "k_barb"));
        assert!(!wildcard_match(&parts("k_bar*b"), "k_bara"));
        assert!(!wildcard_match(&parts("k_bar*b"), "k_xbarb"));
        assert!(wildcard_match(&parts("k_foo*bar*baz"), "k_foo1bar2baz"));
        assert!(wildcard_match(&parts("k_foo*bar*baz"), "k_foobarbaz"));
        assert!(!wildcard_match(&parts("k_foo*bar*baz"), "k_foobaz"));
        // the fixed parts may not overlap
        assert!(!wildcard_match(&parts("k_ab*ba"), "k_aba"));
        assert!(wildcard_match(&parts("k_*"), "k_"));
    }

    const BASIC: &str = "
domain: d
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit: {unit: second, requests_per_unit: 5}
      - key: subkey1
        value: subvalue1
        rate_limit: {unit: second, requests_per_unit: 10}
  - key: key2
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: key2
    value: value2
    rate_limit: {unit: minute, requests_per_unit: 30}
  - key: key2
    value: value3
  - key: key5
    value: value5
    rate_limit: {unit: day, requests_per_unit: 15}
    descriptors:
      - key: subkey5
        rate_limit: {unit: day, requests_per_unit: 25}
  - key: key6
    rate_limit: {unlimited: true}
";

    #[test]
    fn exact_then_key_only_and_depth_must_equal() {
        let c = config(BASIC);
        assert_eq!(
            limit(&c, &[("key1", "value1"), ("subkey1", "x")]),
            Some((5, Unit::Second))
        );
        assert_eq!(
            limit(&c, &[("key1", "value1"), ("subkey1", "subvalue1")]),
            Some((10, Unit::Second))
        );
        assert_eq!(limit(&c, &[("key2", "anything")]), Some((20, Unit::Minute)));
        assert_eq!(limit(&c, &[("key2", "value2")]), Some((30, Unit::Minute)));
        // an exact node without rate_limit: no limit, the key-only rule is not tried
        assert_eq!(limit(&c, &[("key2", "value3")]), None);
        assert_eq!(limit(&c, &[("key5", "value5")]), Some((15, Unit::Day)));
        assert_eq!(
            limit(&c, &[("key5", "value5"), ("subkey5", "v")]),
            Some((25, Unit::Day))
        );
        assert_eq!(limit(&c, &[("key1", "value1")]), None);
        assert_eq!(limit(&c, &[("key2", "value2"), ("extra", "x")]), None);
        assert_eq!(
            limit(&c, &[("key1", "value1"), ("subkey1", "x"), ("deeper", "y")]),
            None
        );
        assert_eq!(limit(&c, &[("KEY2", "value2")]), None);
        assert!(c.find("other", &[("key2", "x")]).is_none());
        assert_eq!(
            c.find("d", &[("key6", "x")]).unwrap().rule.limit,
            Limit::Unlimited
        );
    }

    #[test]
    fn no_backtracking() {
        let c = config(
            "domain: d
descriptors:
  - key: a
    value: x
    descriptors:
      - key: b
        value: other
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: a
    descriptors:
      - key: b
        value: z
        rate_limit: {unit: second, requests_per_unit: 2}
",
        );
        assert_eq!(limit(&c, &[("a", "x"), ("b", "z")]), None);
        assert_eq!(
            limit(&c, &[("a", "w"), ("b", "z")]),
            Some((2, Unit::Second))
        );
    }

    #[test]
    fn wildcards_in_file_order_first_wins() {
        let c = config(
            "domain: d
descriptors:
  - key: path
    value: /api/*
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: path
    value: /api/v1*
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: path
    value: /api/v1/x
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: path
    value: /files/*.pdf
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 4}
  - key: path
    value: noWild
    rate_limit: {unit: second, requests_per_unit: 5}
",
        );
        assert_eq!(limit(&c, &[("path", "/api/v1/y")]), Some((1, Unit::Second)));
        assert_eq!(limit(&c, &[("path", "/api/v1/x")]), Some((3, Unit::Second)));
        assert_eq!(
            limit(&c, &[("path", "/files/a.pdf")]),
            Some((4, Unit::Hour))
        );
        assert_eq!(limit(&c, &[("path", "/files/a.csv")]), None);
        assert_eq!(limit(&c, &[("path", "noWild1")]), None);
        let shared = c.find("d", &[("path", "/files/b.pdf")]).unwrap();
        assert_eq!(shared.shared, [(0, "/files/*.pdf")]);
        assert!(
            c.find("d", &[("path", "/api/z")])
                .unwrap()
                .shared
                .is_empty()
        );
    }
}

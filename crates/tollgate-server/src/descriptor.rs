//! `[[descriptor]]` tables: which policy limits an Envoy rate-limit
//! descriptor, and under which key.
//!
//! ```toml
//! [[descriptor]]
//! domain = "edge"
//! entries = [{ key = "remote_address" }, { key = "path", value = "/api/books" }]
//! policy = "books"
//! ```
//!
//! A request's descriptor matches a table when the domain is the same and
//! its entries have the same keys in the same order; an entry with a
//! `value` matches only that value. The limited key is built from the
//! domain and every entry's key and value, length-prefixed, so two
//! different descriptors never share a key. The tables are read in
//! `config/descriptor.rs`.
//!
//! A table with `tier_from = "<entry key>"` takes the request's tier from
//! that entry's value (Envoy's `x-plan` header, say), and leaves that
//! entry out of the key, so a customer moved to another plan keeps its
//! count.

use std::io::Write;

/// One `[[descriptor]]` table, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Descriptor {
    pub(crate) domain: String,
    /// Entry keys, each with the value it requires, if any.
    pub(crate) entries: Vec<(String, Option<String>)>,
    pub(crate) policy: String,
    /// The entry whose value names the tier (`tier_from`), if any.
    pub(crate) tier_from: Option<String>,
}

/// A descriptor matched to its table: the policy, the key it is limited
/// under and, with `tier_from`, the tier it names.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Found<'a, 'e> {
    pub(crate) policy: &'a str,
    pub(crate) key: Vec<u8>,
    pub(crate) tier: Option<&'e str>,
}

impl Descriptor {
    fn matches(&self, domain: &str, entries: &[(&str, &str)]) -> bool {
        self.domain == domain
            && self.entries.len() == entries.len()
            && self
                .entries
                .iter()
                .zip(entries)
                .all(|((k, v), (key, value))| k == key && v.as_deref().is_none_or(|v| v == *value))
    }
}

/// The policy for a request's descriptor, the key it is limited under
/// and its tier.
pub(crate) fn find<'a, 'e>(
    descriptors: &'a [Descriptor],
    domain: &str,
    entries: &[(&str, &'e str)],
) -> Option<Found<'a, 'e>> {
    let d = descriptors.iter().find(|d| d.matches(domain, entries))?;
    let Some(from) = &d.tier_from else {
        return Some(Found {
            policy: &d.policy,
            key: key(domain, entries),
            tier: None,
        });
    };
    let (keyed, tier): (Vec<_>, Vec<_>) = entries.iter().partition(|(k, _)| k != from);
    Some(Found {
        policy: &d.policy,
        key: key(domain, &keyed),
        tier: tier.first().map(|(_, v)| *v),
    })
}

/// Whether any table names `domain` (Envoy's service ignores a limit
/// override in a domain it does not know, as it ignores the rest).
pub(crate) fn knows(descriptors: &[Descriptor], domain: &str) -> bool {
    descriptors.iter().any(|d| d.domain == domain)
}

/// The key a descriptor is limited under: the domain and every entry, each
/// prefixed by its length, so that no two descriptors share one.
/// Made in one allocation: its length is known before it is written.
pub(crate) fn key(domain: &str, entries: &[(&str, &str)]) -> Vec<u8> {
    // A length's digits and its `:`: 21 bytes at most.
    let parts = std::iter::once(domain).chain(entries.iter().flat_map(|(k, v)| [*k, *v]));
    let mut key = Vec::with_capacity(parts.map(|s| s.len() + 21).sum());
    let mut part = |s: &str| {
        // Writing to a `Vec` cannot fail.
        let _ = write!(key, "{}:", s.len());
        key.extend_from_slice(s.as_bytes());
    };
    part(domain);
    for (k, v) in entries {
        part(k);
        part(v);
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Vec<Descriptor> {
        vec![
            Descriptor {
                domain: "edge".into(),
                entries: vec![("remote_address".into(), None)],
                policy: "per-ip".into(),
                tier_from: None,
            },
            Descriptor {
                domain: "edge".into(),
                entries: vec![
                    ("remote_address".into(), None),
                    ("path".into(), Some("/api/books".into())),
                ],
                policy: "books".into(),
                tier_from: None,
            },
            Descriptor {
                domain: "plans".into(),
                entries: vec![("user".into(), None), ("plan".into(), None)],
                policy: "api".into(),
                tier_from: Some("plan".into()),
            },
        ]
    }

    #[test]
    fn matching_and_keys() {
        let t = table();
        let Found {
            policy: p, key: k1, ..
        } = find(&t, "edge", &[("remote_address", "10.0.0.1")]).unwrap();
        assert_eq!(p, "per-ip");
        let Found {
            policy: p, key: k2, ..
        } = find(
            &t,
            "edge",
            &[("remote_address", "10.0.0.1"), ("path", "/api/books")],
        )
        .unwrap();
        assert_eq!(p, "books");
        assert_ne!(k1, k2);
        assert!(
            find(
                &t,
                "edge",
                &[("remote_address", "10.0.0.1"), ("path", "/other")]
            )
            .is_none()
        );
        assert!(find(&t, "other", &[("remote_address", "10.0.0.1")]).is_none());
        // Values that would collide if simply joined do not.
        let a = find(&t, "edge", &[("remote_address", "a:b")]).unwrap();
        let b = find(&t, "edge", &[("remote_address", "a")]).unwrap();
        assert_ne!(a.key, b.key);
        assert_eq!(a.tier, None);
    }

    #[test]
    fn the_tier_entry_names_the_tier_and_stays_out_of_the_key() {
        let t = table();
        let free = find(&t, "plans", &[("user", "acme"), ("plan", "free")]).unwrap();
        let pro = find(&t, "plans", &[("user", "acme"), ("plan", "pro")]).unwrap();
        assert_eq!((free.policy, free.tier), ("api", Some("free")));
        assert_eq!(pro.tier, Some("pro"));
        assert_eq!(free.key, pro.key, "a plan change keeps the count");
        assert_eq!(free.key, key("plans", &[("user", "acme")]));
        let other = find(&t, "plans", &[("user", "bob"), ("plan", "pro")]).unwrap();
        assert_ne!(other.key, pro.key);
    }
}

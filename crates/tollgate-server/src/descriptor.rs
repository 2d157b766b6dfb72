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

/// One `[[descriptor]]` table, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Descriptor {
    pub(crate) domain: String,
    /// Entry keys, each with the value it requires, if any.
    pub(crate) entries: Vec<(String, Option<String>)>,
    pub(crate) policy: String,
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

/// The policy for a request's descriptor, and the key it is limited under.
pub(crate) fn find<'a>(
    descriptors: &'a [Descriptor],
    domain: &str,
    entries: &[(&str, &str)],
) -> Option<(&'a str, Vec<u8>)> {
    let d = descriptors.iter().find(|d| d.matches(domain, entries))?;
    Some((&d.policy, key(domain, entries)))
}

/// Whether any table names `domain` (Envoy's service ignores a limit
/// override in a domain it does not know, as it ignores the rest).
pub(crate) fn knows(descriptors: &[Descriptor], domain: &str) -> bool {
    descriptors.iter().any(|d| d.domain == domain)
}

/// The key a descriptor is limited under: the domain and every entry, each
/// prefixed by its length, so that no two descriptors share one.
pub(crate) fn key(domain: &str, entries: &[(&str, &str)]) -> Vec<u8> {
    let mut key = Vec::new();
    let mut part = |s: &str| {
        key.extend_from_slice(s.len().to_string().as_bytes());
        key.push(b':');
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
            },
            Descriptor {
                domain: "edge".into(),
                entries: vec![
                    ("remote_address".into(), None),
                    ("path".into(), Some("/api/books".into())),
                ],
                policy: "books".into(),
            },
        ]
    }

    #[test]
    fn matching_and_keys() {
        let t = table();
        let (p, k1) = find(&t, "edge", &[("remote_address", "10.0.0.1")]).unwrap();
        assert_eq!(p, "per-ip");
        let (p, k2) = find(
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
        let (_, a) = find(&t, "edge", &[("remote_address", "a:b")]).unwrap();
        let (_, b) = find(&t, "edge", &[("remote_address", "a")]).unwrap();
        assert_ne!(a, b);
    }
}

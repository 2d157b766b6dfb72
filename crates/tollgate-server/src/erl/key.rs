//! ERL's counter key (`GenerateCacheKey` in its `src/limiter/
//! cache_key.go`): `CACHE_KEY_PREFIX` + domain + `_`, then `key_value_`
//! for each entry of the request's descriptor, then the window's start in
//! Unix seconds: `prefix` `domain_key1_value1_key2_value2_1764000000`.
//!
//! The key is made from the request's entries, not the rule's, so a
//! key-only or wildcard rule counts each value apart, and the same
//! descriptor twice in one call counts twice on one key. An entry matched
//! by a `share_threshold` wildcard writes the rule's pattern (`files/*`)
//! in place of its value, so every value it matches shares the counter.
//! ERL and tollgate on one Redis therefore count on the same keys.

/// The key of the window starting at `window_start` for `entries`;
/// `shared` lists the entries (by index) whose value is replaced by a
/// wildcard pattern.
pub(crate) fn cache_key(
    prefix: &str,
    domain: &str,
    entries: &[(&str, &str)],
    shared: &[(usize, &str)],
    window_start: u64,
) -> String {
    let len: usize = entries.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    let mut key = String::with_capacity(prefix.len() + domain.len() + len + 12);
    key.push_str(prefix);
    key.push_str(domain);
    key.push('_');
    for (i, (k, v)) in entries.iter().enumerate() {
        key.push_str(k);
        key.push('_');
        let value = shared
            .iter()
            .find(|(at, _)| *at == i)
            .map_or(*v, |(_, p)| *p);
        key.push_str(value);
        key.push('_');
    }
    key.push_str(&window_start.to_string());
    key
}

#[cfg(test)]
mod tests {
    use super::cache_key;

    #[test]
    fn erl_layout() {
        assert_eq!(
            cache_key("", "domain", &[("key", "value")], &[], 1234),
            "domain_key_value_1234"
        );
        assert_eq!(
            cache_key("pre_", "d", &[("a", "x"), ("b", "")], &[], 60),
            "pre_d_a_x_b__60"
        );
        assert_eq!(
            cache_key("", "d", &[("files", "a.pdf")], &[(0, "files/*")], 3600),
            "d_files_files/*_3600"
        );
    }
}

use std::time::Duration;

use super::*;

fn sel(s: &str) -> Selector {
    Selector::parse(s.as_bytes()).unwrap()
}

fn limit(n: u64) -> Override {
    Override::limits(Limits {
        limit: Some(n),
        ..Limits::default()
    })
}

/// The limit and override that decide `key`, the same whether resolved
/// shared or in a snapshot.
fn decided_limit(o: &Overrides, p: &Policy, key: &str) -> (u64, Option<String>) {
    let limit = |r: Resolved<'_>| match r {
        Resolved::Decide { policy, by } => (policy.limit(), by.map(|s| s.to_string())),
        other => panic!("{other:?}"),
    };
    let shared = limit(o.resolve(p, key.as_bytes(), None).unwrap());
    let snapshot = o.snapshot();
    let lent = limit(snapshot.resolve(p, key.as_bytes(), None).unwrap());
    assert_eq!(shared, lent, "{key}");
    shared
}

#[test]
fn an_exact_key_wins_over_the_longest_prefix_which_wins_over_the_policy() {
    let p = Policy::fixed_window("api", 100, Duration::from_secs(60)).unwrap();
    let o = Overrides::new();
    o.set(&p, sel("t*"), limit(1)).unwrap();
    o.set(&p, sel("trial_*"), limit(2)).unwrap();
    o.set(&p, sel("trial_9"), limit(3)).unwrap();
    assert_eq!(
        decided_limit(&o, &p, "trial_9"),
        (3, Some("trial_9".into()))
    );
    assert_eq!(
        decided_limit(&o, &p, "trial_8"),
        (2, Some("trial_*".into()))
    );
    assert_eq!(decided_limit(&o, &p, "tx"), (1, Some("t*".into())));
    assert_eq!(decided_limit(&o, &p, "pro"), (100, None));
    // The prefix itself is a key it selects.
    assert_eq!(decided_limit(&o, &p, "trial_"), (2, Some("trial_*".into())));
    assert!(o.remove("api", &sel("trial_*")));
    assert_eq!(decided_limit(&o, &p, "trial_8"), (1, Some("t*".into())));
    assert!(!o.remove("api", &sel("trial_*")));
    // Another policy is untouched.
    let q = Policy::fixed_window("other", 7, Duration::from_secs(60)).unwrap();
    assert_eq!(decided_limit(&o, &q, "trial_9"), (7, None));
}

#[test]
fn block_and_allow_name_their_selector() {
    let p = Policy::gcra("api", 10, Duration::from_secs(1), 10).unwrap();
    let o = Overrides::new();
    o.set(&p, sel("bot*"), Override::block()).unwrap();
    o.set(&p, sel("health"), Override::allow()).unwrap();
    match o.resolve(&p, b"bot-1", None).unwrap() {
        Resolved::Block { by } => assert_eq!(by.to_string(), "bot*"),
        other => panic!("{other:?}"),
    }
    match o.resolve(&p, b"health", None).unwrap() {
        Resolved::Allow { by } => assert_eq!(by.to_string(), "health"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        o.counts("api"),
        [("limits", 0), ("block", 1), ("allow", 1), ("tier", 0)]
    );
}

#[test]
fn an_ended_override_no_longer_applies_and_its_prefix_shows_through() {
    let p = Policy::fixed_window("api", 100, Duration::from_secs(60)).unwrap();
    let o = Overrides::new();
    o.set(&p, sel("a*"), limit(5)).unwrap();
    o.set(&p, sel("acme"), limit(9).expiring_at(now_ms() - 1))
        .unwrap();
    assert_eq!(decided_limit(&o, &p, "acme"), (5, Some("a*".into())));
    assert!(o.get("api", &sel("acme")).is_none());
    assert_eq!(o.list("api").len(), 1);
    assert!(o.purge_expired());
    assert!(!o.purge_expired());
    let live = limit(9).with_ttl(Duration::from_secs(3600)).unwrap();
    o.set(&p, sel("acme"), live).unwrap();
    assert_eq!(decided_limit(&o, &p, "acme"), (9, Some("acme".into())));
    assert!(limit(9).with_ttl(Duration::ZERO).is_err());
}

#[test]
fn bad_selectors_and_parameters_are_refused_naming_the_field_and_change_nothing() {
    for bad in ["", "*", "a*b", "**", "*a"] {
        let e = Selector::parse(bad.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("`selector`"), "{bad}: {e}");
    }
    let long = vec![b'k'; crate::MAX_KEY_LEN + 1];
    assert!(Selector::parse(&long).is_err());
    let p = Policy::fixed_window("api", 100, Duration::from_secs(60)).unwrap();
    let o = Overrides::new();
    let rate = Override::limits(Limits {
        rate: Some(5),
        ..Limits::default()
    });
    let e = o.set(&p, sel("a"), rate).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid policy: `rate` does not apply to fixed_window (it takes limit, window)"
    );
    let e = o.set(&p, sel("a"), limit(0)).unwrap_err();
    assert!(e.to_string().contains("`limit`"), "{e}");
    let e = o.set(&p, sel("a"), Override::tier("pro")).unwrap_err();
    assert!(e.to_string().contains("`tier`"), "{e}");
    // A replacement that fails half-way leaves the set as it was.
    o.set(&p, sel("keep"), limit(3)).unwrap();
    let e = o.replace(&p, [(sel("x"), limit(4)), (sel("y"), limit(0))]);
    assert!(e.is_err());
    assert_eq!(o.list("api").len(), 1);
    assert_eq!(decided_limit(&o, &p, "x"), (100, None));
}

#[test]
fn tiers_come_from_the_request_or_from_an_override() {
    let pro = Limits {
        rate: Some(100),
        burst: Some(200),
        ..Limits::default()
    };
    let p = Policy::token_bucket("api", 10, Duration::from_secs(1), 20)
        .unwrap()
        .with_tier("pro", &pro)
        .unwrap();
    let o = Overrides::new();
    let by_request = |key: &str, tier: Option<&str>| match o.resolve(&p, key.as_bytes(), tier) {
        Ok(Resolved::Decide { policy, by }) => Ok((policy.limit(), by.map(|s| s.to_string()))),
        Ok(other) => panic!("{other:?}"),
        Err(e) => Err(e),
    };
    assert_eq!(by_request("k", None).unwrap(), (20, None));
    assert_eq!(by_request("k", Some("pro")).unwrap(), (200, None));
    let e = by_request("k", Some("gold")).unwrap_err();
    assert!(e.to_string().contains("`tier`"), "{e}");
    o.set(&p, sel("acme"), Override::tier("pro")).unwrap();
    assert_eq!(
        by_request("acme", None).unwrap(),
        (200, Some("acme".into()))
    );
    assert!(p.clone().with_tier("pro", &pro).is_err());
}

#[test]
fn an_override_follows_a_reloaded_policy_and_lapses_when_it_no_longer_fits() {
    let p = Policy::token_bucket("api", 10, Duration::from_secs(1), 20).unwrap();
    let o = Overrides::new();
    let burst = Override::limits(Limits {
        burst: Some(50),
        ..Limits::default()
    });
    o.set(&p, sel("acme"), burst).unwrap();
    let reloaded = Policy::token_bucket("api", 99, Duration::from_secs(1), 20).unwrap();
    match o.resolve(&reloaded, b"acme", None).unwrap() {
        Resolved::Decide { policy, .. } => match policy.algorithm() {
            crate::Algorithm::TokenBucket(b) => assert_eq!((b.rate().rate, b.burst()), (99, 50)),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    let window = Policy::fixed_window("api", 7, Duration::from_secs(1)).unwrap();
    assert_eq!(decided_limit(&o, &window, "acme"), (7, None));
}

#[test]
fn many_prefixes_of_a_few_lengths_are_found() {
    let p = Policy::fixed_window("api", 100, Duration::from_secs(60)).unwrap();
    let o = Overrides::new();
    let entries = (0..10_000u64).map(|i| {
        let s = if i % 2 == 0 {
            format!("org{i:05}:*")
        } else {
            format!("user{i:05}")
        };
        (sel(&s), limit(i + 1))
    });
    o.replace(&p, entries).unwrap();
    assert_eq!(
        decided_limit(&o, &p, "org00042:x"),
        (43, Some("org00042:*".into()))
    );
    assert_eq!(
        decided_limit(&o, &p, "user00043"),
        (44, Some("user00043".into()))
    );
    assert_eq!(decided_limit(&o, &p, "user00042"), (100, None));
}

#[test]
fn the_longest_of_many_nested_prefixes_wins_and_removals_show_the_next() {
    // A prefix at every length of one key: each passes the filter, the
    // longest live one decides.
    let p = Policy::fixed_window("api", 100, Duration::from_secs(60)).unwrap();
    let o = Overrides::new();
    let key = "abcdefghijklmnopqrstuvwxyz0123456789";
    for n in 1..=key.len() {
        o.set(&p, sel(&format!("{}*", &key[..n])), limit(n as u64))
            .unwrap();
    }
    for n in (1..=key.len()).rev() {
        let want = format!("{}*", &key[..n]);
        assert_eq!(decided_limit(&o, &p, key), (n as u64, Some(want.clone())));
        assert!(o.remove("api", &sel(&want)));
    }
    assert_eq!(decided_limit(&o, &p, key), (100, None));
}

#[test]
fn every_override_of_a_large_table_is_found_and_nothing_else() {
    // The filter in front of the tables never hides an override, through
    // growth, replacement and removal; every key is checked against the
    // selectors one by one.
    let p = Policy::fixed_window("api", 100, Duration::from_secs(60)).unwrap();
    let o = Overrides::new();
    let selectors: Vec<String> = (0..3_000u64)
        .map(|i| match i % 4 {
            0 => format!("k{i}"),
            1 => format!("p{i}*"),
            2 => format!("q{}_{}*", i % 11, i),
            // Past 16 bytes, an exact key is filtered before its probe.
            _ => format!("a-long-exact-key-{i:06}"),
        })
        .collect();
    for (i, s) in selectors.iter().enumerate() {
        o.set(&p, sel(s), limit(1_000 + i as u64)).unwrap();
    }
    for (i, s) in selectors.iter().enumerate().step_by(5) {
        assert!(o.remove("api", &sel(s)), "{i}: {s}");
    }
    let live: Vec<(usize, Selector)> = selectors
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 5 != 0)
        .map(|(i, s)| (i, sel(s)))
        .collect();
    let keys = (0..3_000u64).flat_map(|i| {
        [
            format!("k{i}"),
            format!("p{}x", i / 7),
            format!("q{}_{}", i % 11, i),
            format!("q{}_{}9", i % 11, i),
            format!("z{i}"),
            format!("a-long-exact-key-{i:06}"),
            format!("a-long-exact-key-{i:06}x"),
        ]
    });
    for key in keys {
        // Exact first, then the longest prefix, as `resolve` promises.
        let best = live
            .iter()
            .filter(|(_, s)| s.matches(key.as_bytes()))
            .max_by_key(|(_, s)| (!s.is_prefix(), s.bytes().len()));
        let want = best.map_or((100, None), |(i, s)| {
            (1_000 + *i as u64, Some(s.to_string()))
        });
        assert_eq!(decided_limit(&o, &p, &key), want, "{key}");
    }
}

#[test]
fn a_shorter_selector_set_or_removed_later_leaves_every_other_found() {
    // The lead filter holds every selector's first bytes, as many as the
    // shortest selector has: it is made again when that length changes.
    let p = Policy::fixed_window("api", 100, Duration::from_secs(60)).unwrap();
    let o = Overrides::new();
    o.set(&p, sel("tenant_42"), limit(1)).unwrap();
    o.set(&p, sel("org-*"), limit(2)).unwrap();
    o.set(&p, sel("a*"), limit(3)).unwrap();
    // Past 16 bytes, a selector's map hash is no longer its sketch.
    o.set(&p, sel("customer-0042-of-the-long-keys"), limit(4))
        .unwrap();
    let found = |key: &str, want: (u64, &str)| {
        assert_eq!(
            decided_limit(&o, &p, key),
            (want.0, Some(want.1.to_string())),
            "{key}"
        );
    };
    found("tenant_42", (1, "tenant_42"));
    found("org-7", (2, "org-*"));
    found("ab", (3, "a*"));
    found("a", (3, "a*"));
    found(
        "customer-0042-of-the-long-keys",
        (4, "customer-0042-of-the-long-keys"),
    );
    assert_eq!(
        decided_limit(&o, &p, "customer-0043-of-the-long-keys"),
        (100, None)
    );
    assert_eq!(decided_limit(&o, &p, "b"), (100, None));
    assert!(o.remove("api", &sel("a*")));
    assert_eq!(decided_limit(&o, &p, "ab"), (100, None));
    assert_eq!(decided_limit(&o, &p, "org"), (100, None));
    found("org-7", (2, "org-*"));
    found("tenant_42", (1, "tenant_42"));
}

#[test]
fn an_override_decides_with_its_policy_as_it_is_now() {
    // An override's policy is made once, from the policy it was set
    // against, and shared while that policy is the one asked about; a
    // policy built otherwise since (here: in shadow mode, the same
    // parameters) decides with its own fields and the override's limit.
    let p = Policy::fixed_window("api", 100, Duration::from_secs(60))
        .unwrap()
        .with_tier(
            "pro",
            &Limits {
                limit: Some(1_000),
                ..Limits::default()
            },
        )
        .unwrap();
    let o = Overrides::new();
    o.set(&p, sel("acme"), limit(500)).unwrap();
    o.set(&p, sel("pro_*"), Override::tier("pro")).unwrap();
    let decided = |q: &Policy, key: &[u8]| match o.resolve(q, key, None).unwrap() {
        Resolved::Decide { policy, .. } => (
            policy.limit(),
            policy.is_shadow(),
            matches!(policy, ResolvedPolicy::Shared(_)),
        ),
        other => panic!("{other:?}"),
    };
    assert_eq!(decided(&p, b"acme"), (500, false, true));
    assert_eq!(decided(&p.clone(), b"pro_1"), (1_000, false, true));
    let shadowed = p.clone().shadow();
    assert_eq!(decided(&shadowed, b"acme"), (500, true, false));
    assert_eq!(decided(&shadowed, b"pro_1"), (1_000, true, false));
    assert_eq!(decided(&shadowed, b"other"), (100, true, false));
    // Two policies built alike are equal, whichever build each is.
    assert_eq!(shadowed, p.clone().shadow());
    // Rebased on the new build, its overrides' policies are made from it.
    o.rebase(&shadowed);
    assert_eq!(decided(&shadowed, b"acme"), (500, true, true));
    assert_eq!(decided(&shadowed, b"pro_1"), (1_000, true, true));
    assert_eq!(decided(&p, b"acme"), (500, false, false));
    // One that no longer fits the policy is left, and lapses (a tier it
    // no longer has); one that does is made again from it.
    let log = Policy::sliding_log("api", 7, Duration::from_secs(1)).unwrap();
    o.rebase(&log);
    assert_eq!(decided(&log, b"acme"), (500, false, true));
    assert_eq!(decided(&log, b"pro_1"), (7, false, false));
}

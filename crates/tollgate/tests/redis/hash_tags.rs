//! Hash tags: braces in user keys neither move the slot nor collide.
use super::*;

/// The documented layout: `<prefix>{<policy>:<escaped key>}:<algorithm>`,
/// where `\` becomes `\\` and `}` becomes `\]`, so the tag ends at the
/// first `}` after `{` and contains the whole user key.
fn escaped(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in key {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'}' => out.extend_from_slice(b"\\]"),
            b => out.push(b),
        }
    }
    out
}

#[test]
fn braces_in_user_keys_keep_their_slot_and_never_collide() {
    let rt = runtime();
    rt.block_on(async {
        let store = connect(Deployment::Cluster.urls(), TimeSource::Server, "tags").await;
        let policy = Policy::fixed_window("p", 1, Duration::from_secs(60)).unwrap();
        let keys: Vec<&[u8]> = vec![
            b"a", b"{a}", b"a}", b"}a", b"{", b"}", b"}{", b"a\\]", b"a}", b"\\", b"{p:a}",
        ];
        let mut seen = std::collections::HashSet::new();
        for key in &keys {
            let redis_key = store.key_of(&policy, key);
            let mut tag = b"p:".to_vec();
            tag.extend(escaped(key));
            assert_eq!(
                key_slot(&redis_key),
                key_slot(&tag),
                "{:?} left its hash tag",
                String::from_utf8_lossy(key)
            );
            if seen.insert(redis_key) {
                // A key new to this loop starts fresh: no other key's count.
                assert!(
                    store.check(&policy, key, 1).await.unwrap().allowed,
                    "{key:?}"
                );
                assert!(!store.check(&policy, key, 1).await.unwrap().allowed);
            }
        }
        assert_eq!(
            seen.len(),
            keys.len() - 1,
            "only the repeated `a}}` may coincide"
        );

        // Keys in two slots still make one all-or-nothing batch (by
        // compensation across slots, see tests/cluster_batch.rs).
        let batch = [
            Request {
                policy: &policy,
                key: b"x",
                cost: 1,
            },
            Request {
                policy: &policy,
                key: b"y",
                cost: 1,
            },
        ];
        let slots = [
            key_slot(&store.key_of(&policy, b"x")),
            key_slot(&store.key_of(&policy, b"y")),
        ];
        assert_ne!(slots[0], slots[1], "pick keys in two slots");
        let first = store.check_many(&batch, true).await.unwrap();
        assert!(first.iter().all(|d| d.allowed), "{first:?}");
        let second = store.check_many(&batch, true).await.unwrap();
        assert!(second.iter().all(|d| !d.allowed), "{second:?}");
    });
    Deployment::Cluster.assert_every_key_expires();
}

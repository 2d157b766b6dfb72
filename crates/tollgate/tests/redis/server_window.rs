//! The fixed window in its server-clock form: the key's expiry ends the
//! window.
use super::*;

/// The fixed window on the server's clock reads no clock on its hot path:
/// the key's expiry ends the window. Each call here is pipelined between
/// two `TIME`s, so the server's time at the call is known within a round
/// trip; the reply's tag names the window (k mod 4), which must lie in
/// that bracket, its count must be what the window admitted so far, and
/// the key must expire at the window's last millisecond (or, created in
/// the window's last 2 ms, one or two ms later, which the tag says). A key that
/// lived a millisecond too long, one that Redis deleted at once, or a
/// window counted from the wrong time shows as a wrong expiry, and as a
/// count carried into the next window or started over. Windows of 20 ms
/// and of 1 ms (where every key is created in its window's last ms), and a
/// cost of 2, which takes the script's form with an argument.
#[test]
fn the_server_clock_window_ends_exactly_at_the_windows_end() {
    let server = standalone();
    runtime().block_on(async {
        let store = connect(vec![server.url()], TimeSource::Server, "exact").await;
        let client = redis::Client::open(server.url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        // A cost of 1 has a form of the script that takes no arguments;
        // other costs pass theirs.
        for (limit, w, cost) in [(3u64, 20_000u64, 1u64), (2, 1_000, 1), (6, 20_000, 2)] {
            let name = format!("exact-{w}-{cost}");
            let policy = Policy::fixed_window(&name, limit, Duration::from_micros(w)).unwrap();
            let (sha, key, args) = store.evalsha_call(&policy, b"k", cost).unwrap();
            assert_eq!(args.is_empty(), cost == 1, "{args:?}");
            let suffix = format!(":fws:{}:{limit}", w / 1000);
            assert!(
                key.ends_with(suffix.as_bytes()),
                "the server-clock form is used"
            );
            let mut admitted = std::collections::HashMap::<u64, u64>::new();
            // Windows a call may have counted in that no bracket could name
            // (a round trip of 4 windows or more): not checked.
            let mut unknown = std::collections::HashSet::new();
            let (mut calls, mut first_ms_calls) = (0, 0);
            let end = unix_micros() + 300_000;
            while unix_micros() < end {
                let ((s0, u0), reply, expires, (s1, u1)) =
                    bracketed_call(&mut conn, &sha, &key, &args).await;
                let (k0, k1) = ((s0 * 1_000_000 + u0) / w, (s1 * 1_000_000 + u1) / w);
                if k1 - k0 >= 4 {
                    unknown.extend(k0..=k1);
                    continue;
                }
                // remaining·16 + tag, or -1 minus that when denied.
                let value = if reply >= 0 { reply } else { -1 - reply } as u64;
                let count = limit
                    .checked_sub(value / 16)
                    .unwrap_or_else(|| panic!("{value}: more left than the limit"));
                let tag = value % 16;
                assert!((1..=8).contains(&tag), "tag {tag}");
                let k = (k0..=k1)
                    .find(|k| k % 4 == (tag - 1) % 4)
                    .unwrap_or_else(|| panic!("tag {tag} names none of windows {k0}..={k1}"));
                if unknown.contains(&k) {
                    continue;
                }
                let so_far = admitted.entry(k).or_default();
                if reply >= 0 {
                    *so_far += cost;
                    assert!(*so_far <= limit, "window {k}: {so_far} admitted");
                } else {
                    assert!(*so_far + cost > limit, "window {k}: a denial at {so_far}");
                }
                assert_eq!(count, *so_far, "window {k}: the count");
                // The window's last ms; a key created in the window's last
                // 2 ms (tag > 4) lives one or two ms more.
                let last_ms = (k + 1) * w / 1000 - 1;
                let expiry = if tag > 4 {
                    last_ms + 1..=last_ms + 2
                } else {
                    last_ms..=last_ms
                };
                if expires == -2 {
                    // Gone by the PEXPIRETIME that followed: only past it.
                    assert!(
                        s1 * 1000 + u1 / 1000 > *expiry.start(),
                        "window {k}: the key vanished before its expiry"
                    );
                } else {
                    assert!(
                        expiry.contains(&(expires as u64)),
                        "window {k}: the expiry {expires}, tag {tag}, last ms {last_ms}"
                    );
                }
                calls += 1;
                if (s1 * 1_000_000 + u1) % w < 1000 {
                    first_ms_calls += 1;
                }
            }
            assert!(
                admitted.len() >= 3 && first_ms_calls > 0,
                "{w}µs windows: {calls} calls met {} windows, {first_ms_calls} in a first ms",
                admitted.len()
            );
        }

        // Through the store: the decision's times come from our estimate of
        // the server's clock, and a denied caller who waits retry_after is
        // admitted (nobody else uses the key).
        let policy = Policy::fixed_window("retry", 1, Duration::from_millis(30)).unwrap();
        let mut denied = 0;
        for _ in 0..20 {
            let d = store.check(&policy, b"k", 1).await.unwrap();
            assert!(d.reset_after > Duration::ZERO && d.reset_after <= Duration::from_millis(30));
            if !d.allowed {
                denied += 1;
                assert_eq!(d.remaining, 0);
                assert!(d.retry_after > Duration::ZERO && d.retry_after <= d.reset_after);
                tokio::time::sleep(d.retry_after).await;
                let again = store.check(&policy, b"k", 1).await.unwrap();
                assert!(again.allowed, "denied again after retry_after: {again:?}");
            }
        }
        assert!(denied > 0);

        // A peek counts nothing; the key names the window and the limit, so
        // a policy whose limit changes starts over under a key of its own.
        let hour = Duration::from_secs(3600);
        let two = Policy::fixed_window("changed", 2, hour).unwrap();
        assert_eq!(store.check(&two, b"k", 0).await.unwrap().remaining, 2);
        assert_eq!(store.check(&two, b"k", 2).await.unwrap().remaining, 0);
        let peek = store.check(&two, b"k", 0).await.unwrap();
        assert!(
            peek.allowed && peek.reset_after > Duration::ZERO,
            "{peek:?}"
        );
        assert_eq!(peek.remaining, 0);
        assert!(!store.check(&two, b"k", 1).await.unwrap().allowed);
        let three = Policy::fixed_window("changed", 3, hour).unwrap();
        assert_eq!(store.check(&three, b"k", 1).await.unwrap().remaining, 2);

        // In an atomic batch beside a bucket: all or nothing.
        let window = Policy::fixed_window("batch-fw", 2, hour).unwrap();
        let bucket = Policy::token_bucket("batch-tb", 1, hour, 5).unwrap();
        let batch = |cost| requests_on_k([&window, &bucket], cost);
        for left in [1, 0] {
            let both = store.check_many(&batch(1), true).await.unwrap();
            assert!(both.iter().all(|d| d.allowed), "{both:?}");
            assert_eq!(both[0].remaining, left);
            assert!(both[0].reset_after > Duration::ZERO && both[0].reset_after <= hour);
        }
        let over = store.check_many(&batch(1), true).await.unwrap();
        assert!(over.iter().all(|d| !d.allowed), "{over:?}");
        assert!(over[0].retry_after > Duration::ZERO && over[0].retry_after <= hour);
        assert_eq!(over[1].retry_after, Duration::ZERO, "the bucket had room");
        let peek = store.check_many(&batch(0), true).await.unwrap();
        assert_eq!((peek[0].remaining, peek[1].remaining), (0, 3), "{peek:?}");
    });
    Deployment::Standalone.assert_every_key_expires();
}

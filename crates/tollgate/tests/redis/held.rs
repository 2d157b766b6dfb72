//! A held take's exact refund on the server's clock, where the
//! conformance suite (client time) does not reach: the buckets' server-
//! clock form (the TAT is the key's expiry) and the script form reading
//! `TIME`. The refund moves the stored TAT back by exactly its units'
//! emission intervals, and leaves a key another call moved untouched.
use super::bucket_expiry::{run, store_and_connection};
use super::*;

/// The server-clock form: the key's expiry moves back by exactly the
/// units times the interval; after a check moved it, nothing is written.
#[test]
fn a_held_refund_moves_the_keys_expiry_back_exactly() {
    run(async {
        let (store, mut conn) = store_and_connection("held-exp").await;
        let hold = Duration::from_secs(2);
        for policy in [
            Policy::token_bucket("held-tb", 10, Duration::from_secs(1), 100).unwrap(),
            Policy::gcra("held-gcra", 10, Duration::from_secs(1), 100).unwrap(),
        ] {
            let name = policy.name();
            let key = store.key_of(&policy, b"k");
            assert!(key.ends_with(b"s"), "{name}: the server-clock form");
            let expiry = async |conn: &mut redis::aio::MultiplexedConnection| -> i64 {
                redis::cmd("PEXPIRETIME")
                    .arg(&key)
                    .query_async(conn)
                    .await
                    .unwrap()
            };
            let taken = store.take_held(&policy, b"k", 30, hold).await.unwrap();
            assert_eq!(taken.decision.granted, 30, "{name}");
            let stamp = taken.stamp.expect("a stamp");
            let before = expiry(&mut conn).await;
            let d = store.refund_held(&policy, b"k", stamp, 12).await.unwrap();
            assert!(d.is_some(), "{name}: applied");
            // 12 units of 100 ms.
            assert_eq!(expiry(&mut conn).await, before - 1_200, "{name}");
            assert_eq!(
                store.refund_held(&policy, b"k", stamp, 1).await.unwrap(),
                None,
                "{name}: spent"
            );
            let taken = store.take_held(&policy, b"k", 10, hold).await.unwrap();
            assert!(store.check(&policy, b"k", 1).await.unwrap().allowed);
            let moved = expiry(&mut conn).await;
            let stamp = taken.stamp.unwrap();
            assert_eq!(
                store.refund_held(&policy, b"k", stamp, 5).await.unwrap(),
                None
            );
            assert_eq!(expiry(&mut conn).await, moved, "{name}: nothing written");
        }
    });
}

/// The script form on the server's `TIME` (a rate whose interval is not
/// whole ms): the stored TAT, read as the script keeps it, moves back by
/// exactly the units' emission intervals (the token bucket's at its
/// newer time, the same instant); after a check moved it, nothing is
/// written.
#[test]
fn a_held_refund_on_the_servers_time_moves_the_tat_back_exactly() {
    run(async {
        let (store, mut conn) = store_and_connection("held-time").await;
        let hold = Duration::from_secs(2);
        // 3 a second: an interval of 333.3 ms, in scaled units 3 per µs
        // and 1,000,000 a token.
        for policy in [
            Policy::token_bucket("held-tb3", 3, Duration::from_secs(1), 100).unwrap(),
            Policy::gcra("held-gcra3", 3, Duration::from_secs(1), 100).unwrap(),
        ] {
            let name = policy.name();
            let key = store.key_of(&policy, b"k");
            assert!(!key.ends_with(b"s"), "{name}: the script form");
            let tb = name == "held-tb3";
            // The time (scaled units) at which the bucket is full again.
            let full_at = async |conn: &mut redis::aio::MultiplexedConnection| -> Option<u128> {
                let stored: Option<Vec<u8>> =
                    redis::cmd("GET").arg(&key).query_async(conn).await.unwrap();
                let stored = stored?;
                let n = |i: usize| {
                    f64::from_le_bytes(stored[8 * i..8 * i + 8].try_into().unwrap()) as u128
                };
                Some(if tb { n(1) * 3 + n(0) } else { n(0) * 3 + n(1) })
            };
            let taken = store.take_held(&policy, b"k", 30, hold).await.unwrap();
            let stamp = taken.stamp.expect("a stamp");
            let before = full_at(&mut conn).await.unwrap();
            assert!(
                store
                    .refund_held(&policy, b"k", stamp, 12)
                    .await
                    .unwrap()
                    .is_some()
            );
            assert_eq!(
                full_at(&mut conn).await,
                Some(before - 12 * 1_000_000),
                "{name}"
            );
            let taken = store.take_held(&policy, b"k", 10, hold).await.unwrap();
            assert!(store.check(&policy, b"k", 1).await.unwrap().allowed);
            let moved = full_at(&mut conn).await;
            let stamp = taken.stamp.unwrap();
            assert_eq!(
                store.refund_held(&policy, b"k", stamp, 5).await.unwrap(),
                None
            );
            assert_eq!(full_at(&mut conn).await, moved, "{name}: nothing written");
        }
    });
}

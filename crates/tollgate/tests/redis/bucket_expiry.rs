//! The token bucket, GCRA and leaky bucket in their server-clock form: the
//! theoretical arrival time is the key's expiry.
use super::*;

/// A store on the test server in server time, with a prefix of its own,
/// and a connection of the test's.
pub(super) async fn store_and_connection(
    tag: &str,
) -> (RedisStore, redis::aio::MultiplexedConnection) {
    let server = standalone();
    let store = connect(vec![server.url()], TimeSource::Server, tag).await;
    let client = redis::Client::open(server.url()).unwrap();
    (
        store,
        client.get_multiplexed_async_connection().await.unwrap(),
    )
}

/// Runs `test` on a runtime of its own, then checks every key expires.
pub(super) fn run<F: std::future::Future<Output = ()>>(test: F) {
    runtime().block_on(test);
    Deployment::Standalone.assert_every_key_expires();
}

/// A token bucket, GCRA or leaky bucket whose interval is whole ms keeps
/// its theoretical arrival time (TAT) as its key's expiry and reads no
/// clock: the script reads the backlog with PTTL, on the server's clock in
/// ms. Each call here is pipelined between two `TIME`s and followed by
/// `PEXPIRETIME`, and checked against a model of the TAT: the reply is the
/// backlog at some ms of the bracket, the admission is what the algorithm
/// makes of it, an admission on a backlog moves the expiry by exactly the
/// cost times the interval (one made from a second reading of the clock
/// would drift by the ms that passed), one on a fresh bucket sets it that
/// far from a ms of the bracket, and a denial leaves it alone.
#[test]
fn the_server_clock_bucket_keeps_its_tat_as_the_keys_expiry() {
    run(async {
        let (store, mut conn) = store_and_connection("tat").await;
        let second = Duration::from_secs(1);
        // (policy, interval ms, capacity ms, cost)
        let cases = [
            (
                Policy::gcra("tat-gcra", 200, second, 3).unwrap(),
                5u64,
                15u64,
                1u64,
            ),
            (
                Policy::token_bucket("tat-tb", 500, second, 4).unwrap(),
                2,
                8,
                2,
            ),
            (
                Policy::leaky_bucket("tat-lb", 1000, second, 2).unwrap(),
                1,
                2,
                1,
            ),
            // Calls a few ms apart (a busy machine) still pile up a backlog
            // here, which the intervals of a few ms above may not see.
            (Policy::gcra("tat-slow", 20, second, 3).unwrap(), 50, 150, 1),
        ];
        for (policy, interval, capacity, cost) in cases {
            let name = policy.name();
            let (sha, key, args) = store.evalsha_call(&policy, b"k", cost).unwrap();
            let need = cost * interval;
            assert_eq!(args, [need.to_string(), (capacity - need).to_string()]);
            let ms = |(s, u): (u64, u64)| s * 1000 + u / 1000;
            // The expiry the model expects: the TAT in ms, or none.
            let mut tat: Option<u64> = None;
            let (mut admitted, mut denied, mut on_backlog) = (0, 0, 0);
            // Until every path has been taken often enough, or 2 s.
            let end = unix_micros() + 2_000_000;
            while !(admitted > 10 && denied > 10 && on_backlog > 5) && unix_micros() < end {
                let (t0, reply, expires, t1) = bracketed_call(&mut conn, &sha, &key, &args).await;
                let (m0, m1) = (ms(t0), ms(t1));
                let backlog = if reply >= 0 { reply } else { -1 - reply } as u64;
                let (low, high) = match tat {
                    Some(t) => (t.saturating_sub(m1), t.saturating_sub(m0)),
                    None => (0, 0),
                };
                assert!(
                    (low..=high).contains(&backlog),
                    "{name}: backlog {backlog} outside {low}..={high}"
                );
                assert_eq!(
                    reply >= 0,
                    backlog + need <= capacity,
                    "{name}: backlog {backlog}, reply {reply}"
                );
                let expected = if reply < 0 {
                    denied += 1;
                    tat
                } else if backlog > 0 {
                    admitted += 1;
                    on_backlog += 1;
                    Some(tat.unwrap() + need)
                } else {
                    admitted += 1;
                    // Fresh: from the ms the script ran in.
                    let e = expires as u64;
                    assert!(
                        (m0 + need..=m1 + need).contains(&e),
                        "{name}: a fresh TAT {e} outside {}..={}",
                        m0 + need,
                        m1 + need
                    );
                    Some(e)
                };
                if expires == -2 {
                    // Gone by the PEXPIRETIME that followed: only past it.
                    assert!(
                        expected.is_none_or(|e| e < m1),
                        "{name}: the key vanished before its TAT {expected:?} (now {m1})"
                    );
                    tat = None;
                } else {
                    assert_eq!(Some(expires as u64), expected, "{name}: the expiry");
                    tat = Some(expires as u64);
                }
            }
            // Admissions come at any speed; the 50 ms interval sees denials
            // and admissions on a backlog at any pace under 20 ms a call.
            let counts =
                format!("{admitted} admitted ({on_backlog} on a backlog), {denied} denied");
            assert!(admitted > 10, "{name}: {counts}");
            if interval >= 50 {
                assert!(denied > 10 && on_backlog > 5, "{name}: {counts}");
            }
        }
    });
}

/// Through the store: a denied caller who waits retry_after is admitted
/// (nobody else uses the key), and the decision's numbers are the
/// algorithm's.
#[test]
fn a_server_clock_bucket_admits_after_retry_after() {
    run(async {
        let (store, _) = store_and_connection("tat-retry").await;
        let second = Duration::from_secs(1);
        let policy = Policy::gcra("tat-retry", 50, second, 2).unwrap();
        let mut denials = 0;
        for _ in 0..12 {
            let d = store.check(&policy, b"k", 1).await.unwrap();
            assert!(d.reset_after > Duration::ZERO && d.reset_after <= Duration::from_millis(40));
            if !d.allowed {
                denials += 1;
                assert_eq!(d.remaining, 0);
                assert!(
                    d.retry_after > Duration::ZERO && d.retry_after <= Duration::from_millis(20)
                );
                tokio::time::sleep(d.retry_after).await;
                let again = store.check(&policy, b"k", 1).await.unwrap();
                assert!(again.allowed, "denied again after retry_after: {again:?}");
            }
        }
        assert!(denials > 0);
    });
}

/// A reservation waits for its turn and moves the TAT that far: a bucket
/// of 1 per hour, emptied, then reserved for up to two hours.
#[test]
fn a_server_clock_reservation_moves_the_tat_by_its_wait() {
    run(async {
        let (store, mut conn) = store_and_connection("tat-reserve").await;
        let hour = Duration::from_secs(3600);
        let slow = Policy::token_bucket("tat-reserve", 1, hour, 1).unwrap();
        let redis_key = store.key_of(&slow, b"k");
        assert!(store.check(&slow, b"k", 1).await.unwrap().allowed);
        let denied = store.reserve(&slow, b"k", 1, hour / 2).await.unwrap();
        assert!(!denied.allowed);
        assert!(
            denied.retry_after > hour / 2 - Duration::from_secs(1),
            "{denied:?}"
        );
        let reserved = store.reserve(&slow, b"k", 1, hour * 2).await.unwrap();
        assert!(reserved.allowed);
        assert!(
            reserved.delay > hour - Duration::from_secs(1) && reserved.delay <= hour,
            "{reserved:?}"
        );
        let pttl: i64 = redis::cmd("PTTL")
            .arg(&redis_key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(
            (2 * 3_590_000..=2 * 3_600_000).contains(&pttl),
            "two tokens owed: {pttl} ms"
        );
    });
}

/// In an atomic batch beside a window: all or nothing.
#[test]
fn a_server_clock_bucket_in_an_atomic_batch_is_all_or_nothing() {
    run(async {
        let (store, _) = store_and_connection("tat-batch").await;
        let hour = Duration::from_secs(3600);
        let window = Policy::fixed_window("tat-batch-fw", 5, hour).unwrap();
        let bucket = Policy::gcra("tat-batch-gcra", 1, hour, 2).unwrap();
        assert!(store.key_of(&bucket, b"k").ends_with(b":gcras"));
        let batch = |cost| requests_on_k([&window, &bucket], cost);
        for left in [1, 0] {
            let both = store.check_many(&batch(1), true).await.unwrap();
            assert!(both.iter().all(|d| d.allowed), "{both:?}");
            assert_eq!(both[1].remaining, left);
            assert!(
                both[1].reset_after > hour * (1 - left as u32) && both[1].reset_after <= hour * 2
            );
        }
        let over = store.check_many(&batch(1), true).await.unwrap();
        assert!(over.iter().all(|d| !d.allowed), "{over:?}");
        assert_eq!(over[0].retry_after, Duration::ZERO, "the window had room");
        assert!(over[1].retry_after > hour - Duration::from_secs(1) && over[1].retry_after <= hour);
        let peek = store.check_many(&batch(0), true).await.unwrap();
        assert_eq!((peek[0].remaining, peek[1].remaining), (3, 0), "{peek:?}");
    });
}

/// A leaky bucket in a batch and alone: the second admission waits for
/// the first to leave (its delay is the backlog), the third finds the
/// queue full.
#[test]
fn a_server_clock_leaky_bucket_delays_batched_and_alone() {
    run(async {
        let (store, _) = store_and_connection("tat-lb").await;
        let hour = Duration::from_secs(3600);
        let shaper = Policy::leaky_bucket("tat-batch-lb", 1, hour, 2).unwrap();
        assert!(store.key_of(&shaper, b"k").ends_with(b":lbs"));
        for batched in [true, false] {
            let key: &[u8] = if batched { b"batched" } else { b"alone" };
            let mut decisions = Vec::new();
            for _ in 0..3 {
                let request = Request {
                    policy: &shaper,
                    key,
                    cost: 1,
                };
                decisions.push(if batched {
                    store.check_many(&[request], true).await.unwrap()[0]
                } else {
                    store.check(&shaper, key, 1).await.unwrap()
                });
            }
            let [first, second, third] = decisions[..] else {
                unreachable!()
            };
            assert!(first.allowed && first.delay == Duration::ZERO, "{first:?}");
            assert!(second.allowed, "{second:?}");
            assert!(
                second.delay > hour - Duration::from_secs(1) && second.delay <= hour,
                "batched {batched}: {second:?}"
            );
            assert!(!third.allowed && third.remaining == 0, "{third:?}");
            assert!(third.retry_after > hour - Duration::from_secs(1) && third.retry_after <= hour);
        }
    });
}

/// Asked not to, the store keeps the form that reads `TIME`, under the
/// bucket's own key; so does a user whose ACL denies it `PEXPIRETIME`.
#[test]
fn the_time_form_stays_when_switched_off_or_denied_pexpiretime() {
    run(async {
        let server = standalone();
        let hour = Duration::from_secs(3600);
        let bucket = Policy::gcra("tat-batch-gcra", 1, hour, 2).unwrap();
        // Asked not to, the store keeps the form that reads `TIME`, under the
        // bucket's own key: the same bucket empties there from full.
        let time_form = RedisStore::builder([server.url()])
            .prefix(fresh_prefix("tat-off"))
            .bucket_expiry_form(false)
            .connect()
            .await
            .unwrap();
        assert!(time_form.key_of(&bucket, b"k").ends_with(b":gcra"));
        for left in [1, 0] {
            assert_eq!(
                time_form.check(&bucket, b"k", 1).await.unwrap().remaining,
                left
            );
        }
        assert!(!time_form.check(&bucket, b"k", 1).await.unwrap().allowed);

        // So does a user whose ACL denies it PEXPIRETIME (a script calling it
        // would fail): the store connects and decides in the TIME form.
        server.cli(&[
            "ACL",
            "SETUSER",
            "no-expiretime",
            "on",
            ">secret",
            "~*",
            "+@all",
            "-pexpiretime",
        ]);
        let url = format!("redis://no-expiretime:secret@127.0.0.1:{}/", server.port());
        let limited = RedisStore::builder([url])
            .prefix(fresh_prefix("tat-acl"))
            .connect()
            .await
            .unwrap();
        assert!(limited.key_of(&bucket, b"k").ends_with(b":gcra"));
        assert_eq!(limited.check(&bucket, b"k", 1).await.unwrap().remaining, 1);
    });
}

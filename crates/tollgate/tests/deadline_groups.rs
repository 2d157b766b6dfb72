//! Server-clock fixed-window checks with a deadline, which read the
//! server's clock seldom. When callers are busy their calls leave as groups
//! (`lua/fixed_window_server_group.lua`) that read it once: each check
//! still gets its own answer and its own error, the limit holds exactly,
//! and a group run after its deadline writes nothing. Sent alone to a
//! standalone server, a check names a clock key
//! (`lua/fixed_window_server_deadline.lua`) whose existence proves it on
//! time, so that one check in many reads the clock; and one that runs
//! after its deadline still writes nothing, even when the clock key it
//! names was there when it was sent.

#![cfg(feature = "redis")]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tollgate::Policy;
use tollgate::store::Store;
use tollgate::store::redis::RedisStore;
use tollgate_testkit::{PATIENCE, RedisServer, scan_keys_without_ttl};

async fn store(server: &RedisServer, prefix: &str, deadline: Duration) -> Arc<RedisStore> {
    Arc::new(
        RedisStore::builder([server.url()])
            .prefix(prefix)
            .deadline(deadline)
            .connect()
            .await
            .expect("connect to the test server"),
    )
}

/// A call sent into a stopped server: refused as late by the server once
/// it resumes, or, when the resumption came later than the connection's
/// response timeout (a stalled machine), timed out by the client. Either
/// way it ran late, if at all, and the test's verdict is what it wrote.
fn late_or_timed_out(e: &tollgate::Error) -> bool {
    matches!(
        e,
        tollgate::Error::Store {
            kind: tollgate::StoreErrorKind::Timeout,
            ..
        }
    )
}

/// `cmdstat_<command>`'s calls in `INFO commandstats` (commands that
/// scripts call included).
fn calls_of(server: &RedisServer, command: &str) -> u64 {
    let info = server.cli(&["INFO", "commandstats"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_checks_with_a_deadline_share_one_clock_read_and_each_gets_its_own_reply() {
    let server = RedisServer::start();
    {
        // A deadline the loaded machine never misses: what is tested is
        // the grouping, not the clock.
        let store = store(&server, "g:", Duration::from_secs(10)).await;
        // No window boundary during the test: a key's first five checks
        // are admitted, the next three denied; costs of 1 and of 2 mixed
        // (a group whose costs are not all 1 sends them).
        let window = Duration::from_secs(364 * 86_400);
        let policy = Arc::new(Policy::fixed_window("fw", 10, window).unwrap());
        let wrong = String::from_utf8(store.key_of(&policy, b"wrong")).unwrap();
        server.cli(&["RPUSH", &wrong, "x"]);
        server.cli(&["PEXPIRE", &wrong, "600000"]);
        let tasks = 240;
        let mut round = 0;
        loop {
            let time_before = calls_of(&server, "time");
            let start = Arc::new(tokio::sync::Barrier::new(tasks));
            let handles: Vec<_> = (0..tasks)
                .map(|t| {
                    let (store, policy, start) = (store.clone(), policy.clone(), start.clone());
                    tokio::spawn(async move {
                        let key = if t < 2 {
                            "wrong".to_string()
                        } else {
                            format!("r{round}-k{t}")
                        };
                        let cost = if t % 3 == 0 { 2 } else { 1 };
                        start.wait().await;
                        let mut seen = Vec::new();
                        for _ in 0..8 {
                            seen.push(
                                store
                                    .check(&policy, key.as_bytes(), cost)
                                    .await
                                    .map(|d| (d.allowed, d.remaining))
                                    .map_err(|e| e.to_string()),
                            );
                        }
                        (t, cost, seen)
                    })
                })
                .collect();
            for h in handles {
                let (t, cost, seen) = h.await.unwrap();
                if t < 2 {
                    for answer in seen {
                        let e = answer.expect_err("a key of the wrong type");
                        assert!(e.contains("WRONGTYPE"), "task {t}: {e}");
                    }
                    continue;
                }
                let mut left = 10;
                let expected: Vec<_> = (0..8)
                    .map(|_| {
                        let allowed = left >= cost;
                        if allowed {
                            left -= cost;
                        }
                        Ok((allowed, left))
                    })
                    .collect();
                assert_eq!(seen, expected, "task {t} (cost {cost})");
            }
            round += 1;
            // Every key's first check reads the clock to start its window;
            // the others read it only for their deadline, once per group
            // when they were grouped.
            let checks = (tasks as u64 - 2) * 8;
            let keys = tasks as u64 - 2;
            let reads = calls_of(&server, "time") - time_before;
            let deadline_reads = reads.saturating_sub(keys);
            if deadline_reads < checks * 3 / 4 || round == 20 {
                eprintln!(
                    "{round} rounds: {reads} clock reads for {checks} checks on {keys} keys; {:?}",
                    store.pipelined()
                );
                assert!(
                    deadline_reads < checks * 3 / 4,
                    "the deadline was read once per check: {reads} reads for {checks} checks"
                );
                break;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_run_after_its_deadline_writes_nothing() {
    let server = RedisServer::start();
    {
        let deadline = Duration::from_millis(50);
        // The same keys, for the checks that must not be late themselves.
        let patient = store(&server, "late:", PATIENCE).await;
        let store = store(&server, "late:", deadline).await;
        let policy = Arc::new(Policy::fixed_window("fw", 10, Duration::from_secs(3600)).unwrap());
        // The keys' windows exist, so the late checks would be bare
        // DECRBYs.
        for k in 0..96 {
            let d = patient
                .check(&policy, format!("k{k}").as_bytes(), 1)
                .await
                .unwrap();
            assert_eq!(d.remaining, 9);
        }
        let before = store.pipelined();
        tokio::task::block_in_place(|| server.stop());
        // 96 checks at once: the first 32 leave alone, the rest queue and
        // leave as groups, all into the frozen server.
        let checks: Vec<_> = (0..96)
            .map(|k| {
                let (store, policy) = (store.clone(), policy.clone());
                tokio::spawn(
                    async move { store.check(&policy, format!("k{k}").as_bytes(), 1).await },
                )
            })
            .collect();
        tokio::time::sleep(deadline * 4).await;
        tokio::task::block_in_place(|| server.cont());
        for check in checks {
            let err = check.await.unwrap().unwrap_err();
            assert!(err.is_transient(), "{err}");
            assert!(late_or_timed_out(&err), "{err}");
        }
        let sent = store.pipelined();
        assert!(
            sent.calls > before.calls,
            "no check left in a group: {sent:?}"
        );
        for k in 0..96 {
            let d = patient
                .check(&policy, format!("k{k}").as_bytes(), 0)
                .await
                .unwrap();
            assert_eq!(d.remaining, 9, "key k{k}: a late check wrote");
        }
    }
}

/// The server's clock in ms.
fn server_ms(server: &RedisServer) -> u64 {
    let time = server.cli(&["TIME"]);
    let mut parts = time.split_whitespace().map(|p| p.parse::<u64>().unwrap());
    let (s, us) = (parts.next().unwrap(), parts.next().unwrap());
    s * 1000 + us / 1000
}

#[tokio::test]
async fn lone_checks_with_a_deadline_prove_it_by_a_clock_key_and_read_the_clock_seldom() {
    let server = RedisServer::start();
    // A deadline of 8 s: clock keys on a grid of 0.5 s, each at least
    // 7.5 s ahead of the checks that name it.
    let store = store(&server, "c:", Duration::from_secs(8)).await;
    let policy = Policy::fixed_window("fw", 50, Duration::from_secs(3600)).unwrap();
    // Windows started first (each start reads the clock).
    for k in 0..4 {
        store
            .check(&policy, format!("k{k}").as_bytes(), 1)
            .await
            .unwrap();
    }
    let time_before = calls_of(&server, "time");
    let started = std::time::Instant::now();
    let checks = 200;
    let mut left = [49u64; 4];
    for n in 0..checks {
        let k = n % 4;
        let cost = if n % 5 == 0 { 2 } else { 1 };
        let d = store
            .check(&policy, format!("k{k}").as_bytes(), cost)
            .await
            .unwrap();
        // The limit holds exactly, costs of 2 among those of 1.
        let allowed = left[k] >= cost;
        if allowed {
            left[k] -= cost;
        }
        assert_eq!((d.allowed, d.remaining), (allowed, left[k]), "check {n}");
    }
    let reads = calls_of(&server, "time") - time_before;
    // One read per clock key (a new one each half second at most), not one
    // per check.
    let grid_steps = (started.elapsed().as_secs_f64() / 0.5).ceil() as u64;
    assert!(
        reads <= grid_steps + 2,
        "{reads} clock reads for {checks} lone checks with a deadline over {grid_steps} grid steps"
    );
    assert!(
        left.iter().all(|&l| l < 2),
        "{left:?}: the limit was reached"
    );
    // Every clock key expires at the ms its name says, within the deadline.
    let now = server_ms(&server);
    let clocks = server.cli(&["KEYS", "c:clock:*"]);
    let clocks: Vec<&str> = clocks.split_whitespace().collect();
    assert!(!clocks.is_empty(), "no clock key");
    for clock in clocks {
        let x: u64 = clock.strip_prefix("c:clock:").unwrap().parse().unwrap();
        let at: u64 = server.cli(&["PEXPIRETIME", clock]).trim().parse().unwrap();
        assert_eq!(at, x, "{clock}");
        assert!(x > now && x <= now + 8_000, "{clock} at {now}");
    }
    assert!(scan_keys_without_ttl(&server).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_check_run_after_its_deadline_writes_nothing_though_its_clock_key_was_there() {
    let server = RedisServer::start();
    // A deadline of 100 ms: clock keys on a grid of 6 ms. Eight callers
    // check in a loop (never enough in flight to queue), so every grid
    // step's clock key is made by its first check and is there when the
    // next ones are sent; the server then stops for 250 ms, past the clock
    // keys and the deadlines of the checks in flight (100 ms), and well
    // short of the connection's response timeout (500 ms), so that the
    // checks in flight are answered late rather than timed out by the
    // client. A check the client timed out anyway (the machine stalled the
    // test past it), which the server may have run in time, cannot be
    // counted either way: the window holds at most that many more.
    let deadline = Duration::from_millis(100);
    // The same key, for the checks that must not be late themselves.
    let patient = store(&server, "late:", PATIENCE).await;
    let store = store(&server, "late:", deadline).await;
    let policy = Arc::new(Policy::fixed_window("fw", 1 << 40, Duration::from_secs(3600)).unwrap());
    patient.check(&policy, b"hot", 1).await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let callers: Vec<_> = (0..8)
        .map(|_| {
            let (store, policy, stop) = (store.clone(), policy.clone(), stop.clone());
            tokio::spawn(async move {
                let (mut admitted, mut late, mut unknown) = (0u64, 0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    match store.check(&policy, b"hot", 1).await {
                        Ok(d) => {
                            assert!(d.allowed);
                            admitted += 1;
                        }
                        Err(e) if e.to_string().contains("deadline") => late += 1,
                        Err(e) => {
                            assert!(late_or_timed_out(&e), "{e}");
                            unknown += 1;
                        }
                    }
                }
                (admitted, late, unknown)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let time_before = calls_of(&server, "time");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let time_reads = calls_of(&server, "time") - time_before;
    tokio::task::block_in_place(|| {
        server.stop();
        std::thread::sleep(Duration::from_millis(250));
        stop.store(true, Ordering::Relaxed);
        server.cont();
    });
    let (mut admitted, mut late, mut unknown) = (1, 0, 0);
    for caller in callers {
        let (a, l, u) = caller.await.unwrap();
        admitted += a;
        late += l;
        unknown += u;
    }
    assert!(
        late > 0,
        "no check in flight during the stop was refused as late"
    );
    // 300 ms of checks read the clock about once per 6 ms grid step, not
    // once per check.
    assert!(
        time_reads < admitted / 4,
        "{time_reads} clock reads, {admitted} checks"
    );
    // What the window consumed is exactly what was admitted: the late
    // checks wrote nothing.
    let d = patient.check(&policy, b"hot", 0).await.unwrap();
    let consumed = (1 << 40) - d.remaining;
    assert!(
        consumed >= admitted && consumed - admitted <= unknown,
        "consumed {consumed}, admitted {admitted}: {late} late checks, {unknown} timed out"
    );
}

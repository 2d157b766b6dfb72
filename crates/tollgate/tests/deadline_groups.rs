//! Server-clock fixed-window checks with a deadline, when callers are busy:
//! their calls leave as groups (`lua/fixed_window_server_group.lua`) that
//! read the server's clock once. Each check still gets its own answer and
//! its own error, the limit holds exactly, and a group run after its
//! deadline writes nothing.

#![cfg(feature = "redis")]

use std::sync::Arc;
use std::time::Duration;

use tollgate::Policy;
use tollgate::store::Store;
use tollgate::store::redis::RedisStore;
use tollgate_testkit::RedisServer;

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
        let store = store(&server, "late:", deadline).await;
        let policy = Arc::new(Policy::fixed_window("fw", 10, Duration::from_secs(3600)).unwrap());
        // The keys' windows exist, so the late checks would be bare
        // DECRBYs.
        for k in 0..96 {
            let d = store
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
            assert!(err.to_string().contains("deadline"), "{err}");
        }
        let sent = store.pipelined();
        assert!(
            sent.calls > before.calls,
            "no check left in a group: {sent:?}"
        );
        for k in 0..96 {
            let d = store
                .check(&policy, format!("k{k}").as_bytes(), 0)
                .await
                .unwrap();
            assert_eq!(d.remaining, 9, "key k{k}: a late check wrote");
        }
    }
}

//! Busy callers' calls leave together as pipelines, each caller getting
//! its own reply.
use super::*;

/// Many callers at once on a standalone server: their calls leave in
/// pipelines, several scripts in one, and each caller gets its own reply,
/// an error included (a key of the wrong type), exactly as when every call
/// leaves alone.
#[test]
fn busy_callers_share_pipelines_and_each_gets_its_own_reply() {
    let server = RedisServer::start();
    // On the multi-threaded runtime (where the flush must yield to let the
    // others queue) and on the current-thread one.
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for rt in [runtime(), current] {
        share_pipelines(&server, &rt);
    }
}

fn share_pipelines(server: &RedisServer, rt: &tokio::runtime::Runtime) {
    rt.block_on(async {
        // No window boundary, no refill, no ageing out during the test: a
        // key's first five checks are admitted, the next three denied.
        // The first three read their key's value, so a key of another type
        // is an error; the GCRA (whose interval is whole ms) keeps its
        // state in the key's expiry, which any type has.
        let policies = Arc::new([
            Policy::fixed_window("fw", 5, Duration::from_secs(364 * 86_400)).unwrap(),
            Policy::token_bucket("tb", 7, Duration::from_secs(3600), 5).unwrap(),
            Policy::sliding_log("sl", 5, Duration::from_secs(3600)).unwrap(),
            Policy::gcra("gcra", 1, Duration::from_secs(3600), 5).unwrap(),
        ]);
        let wrong = 3;
        for pipelining in [true, false] {
            let store = Arc::new(
                RedisStore::builder([server.url()])
                    .prefix(fresh_prefix("pipe"))
                    .pipelining(pipelining)
                    .connect()
                    .await
                    .unwrap(),
            );
            // A key of the wrong type under each policy.
            for p in &policies[..wrong] {
                let key = String::from_utf8(store.key_of(p, b"wrong")).unwrap();
                server.cli(&["RPUSH", &key, "x"]);
                server.cli(&["PEXPIRE", &key, "60000"]);
            }
            // Rounds on fresh keys until calls were pipelined (the first
            // round nearly always suffices).
            let mut round = 0;
            loop {
                let tasks = 240;
                let start = Arc::new(tokio::sync::Barrier::new(tasks));
                let handles: Vec<_> = (0..tasks)
                    .map(|t| {
                        let (store, policies, start) =
                            (store.clone(), policies.clone(), start.clone());
                        tokio::spawn(async move {
                            let p = &policies[t % policies.len()];
                            let key = if t < wrong {
                                "wrong".to_string()
                            } else {
                                format!("r{round}-k{t}")
                            };
                            start.wait().await;
                            let mut seen = Vec::new();
                            for _ in 0..8 {
                                seen.push(
                                    store
                                        .check(p, key.as_bytes(), 1)
                                        .await
                                        .map(|d| (d.allowed, d.remaining))
                                        .map_err(|e| e.to_string()),
                                );
                            }
                            (t, seen)
                        })
                    })
                    .collect();
                for h in handles {
                    let (t, seen) = h.await.unwrap();
                    if t < wrong {
                        for answer in seen {
                            let e = answer.expect_err("a key of the wrong type");
                            assert!(e.contains("WRONGTYPE"), "task {t}: {e}");
                        }
                    } else {
                        let expected: Vec<_> = [(true, 4), (true, 3), (true, 2), (true, 1)]
                            .into_iter()
                            .chain([(true, 0), (false, 0), (false, 0), (false, 0)])
                            .map(Ok)
                            .collect();
                        assert_eq!(seen, expected, "task {t}, pipelining {pipelining}");
                    }
                }
                round += 1;
                let sent = store.pipelined();
                if !pipelining {
                    assert_eq!(sent, Default::default());
                    break;
                }
                if sent.calls > 0 || round == 20 {
                    eprintln!("{round} rounds: {sent:?}");
                    assert!(
                        sent.calls > sent.pipelines,
                        "no pipeline carried two calls: {sent:?}"
                    );
                    break;
                }
            }
        }
    });
}

//! Bad input never reaches Redis.
use super::*;

/// Calls of scripts and functions the server has counted so far.
fn script_calls(server: &RedisServer) -> u64 {
    server
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter(|l| l.starts_with("cmdstat_eval") || l.starts_with("cmdstat_fcall"))
        .filter_map(|l| l.split("calls=").nth(1))
        .filter_map(|rest| rest.split(',').next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn bad_input_never_reaches_redis() {
    let server = RedisServer::start();
    let rt = runtime();
    rt.block_on(async {
        let store = connect(vec![server.url()], TimeSource::Server, "bad").await;
        let fw = Policy::fixed_window("fw", 5, Duration::from_secs(1)).unwrap();
        let tb = Policy::token_bucket("tb", 1, Duration::from_secs(1), 5).unwrap();
        let cc = Policy::concurrency("cc", 2, Duration::from_secs(1)).unwrap();
        // Warm up: the connection and the scripts are loaded.
        store.check(&fw, b"warm", 1).await.unwrap();
        let before = script_calls(&server);
        let long = vec![b'x'; tollgate::MAX_KEY_LEN + 1];
        let cases: Vec<(&str, tollgate::Result<Decision>)> = vec![
            ("invalid_key", store.check(&fw, b"", 1).await),
            ("invalid_key", store.check(&fw, &long, 1).await),
            ("cost_exceeds_limit", store.check(&fw, b"k", 6).await),
            (
                "cost_exceeds_limit",
                store.reserve(&tb, b"k", 6, Duration::ZERO).await,
            ),
            (
                "unsupported",
                store.reserve(&fw, b"k", 1, Duration::from_secs(1)).await,
            ),
            (
                "invalid_argument",
                store
                    .reserve(&tb, b"k", 1, Duration::from_secs(1 << 40))
                    .await,
            ),
            ("unsupported", store.check(&cc, b"k", 1).await),
            (
                "unsupported",
                store.acquire_lease(&tb, b"k").await.map(|l| l.decision),
            ),
            (
                "invalid_key",
                store.acquire_lease(&cc, b"").await.map(|l| l.decision),
            ),
        ];
        for (i, (code, result)) in cases.into_iter().enumerate() {
            let err = result.expect_err(&format!("case {i} must fail"));
            assert_eq!(err.code(), code, "case {i}: {err}");
            assert!(!err.to_string().is_empty());
        }
        let dup = [
            Request {
                policy: &fw,
                key: b"a",
                cost: 1,
            },
            Request {
                policy: &fw,
                key: b"a",
                cost: 1,
            },
        ];
        let err = store.check_many(&dup, true).await.unwrap_err();
        assert_eq!(err.code(), "invalid_argument", "{err}");
        let bad_batch = [
            Request {
                policy: &fw,
                key: b"a",
                cost: 1,
            },
            Request {
                policy: &fw,
                key: b"",
                cost: 1,
            },
        ];
        assert_eq!(
            store
                .check_many(&bad_batch, false)
                .await
                .unwrap_err()
                .code(),
            "invalid_key"
        );
        assert_eq!(script_calls(&server), before, "bad input reached Redis");
    });
}

//! `SCRIPT FLUSH` under load: scripts reload themselves, no caller sees
//! an error.
use super::*;

fn flush_under_load(deployment: Deployment, server: Option<&RedisServer>) {
    let rt = runtime();
    rt.block_on(async {
        let urls = match server {
            Some(s) => vec![s.url()],
            None => deployment.urls(),
        };
        let store = Arc::new(connect(urls, TimeSource::Server, "flush").await);
        let policies: Arc<Vec<Policy>> = Arc::new(vec![
            Policy::fixed_window("fw", 1 << 20, Duration::from_secs(60)).unwrap(),
            Policy::token_bucket("tb", 1000, Duration::from_secs(1), 1000).unwrap(),
            Policy::sliding_log("sl", 1000, Duration::from_secs(1)).unwrap(),
        ]);
        let loads_before = store.script_loads();
        // Callers run until the flushes are done: a count, not a time, so a
        // slow machine makes the test longer, never weaker.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Enough callers that calls on a standalone server leave in
        // pipelines, where a NOSCRIPT is one call's reply among others.
        let tasks: Vec<_> = (0..64)
            .map(|t| {
                let (store, policies, stop) = (store.clone(), policies.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut calls = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let p = &policies[(calls as usize + t) % policies.len()];
                        let key = format!("k{}", calls % 7);
                        store.check(p, key.as_bytes(), 1).await.expect("no caller sees NOSCRIPT");
                        calls += 1;
                    }
                    calls
                })
            })
            .collect();
        let mut flushes = 0u64;
        while flushes < 6 {
            tokio::time::sleep(Duration::from_millis(150)).await;
            match server {
                Some(s) => {
                    s.cli(&["SCRIPT", "FLUSH"]);
                }
                None => {
                    cluster().cli_all(&["SCRIPT", "FLUSH"]);
                }
            }
            flushes += 1;
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
        stop.store(true, Ordering::Relaxed);
        let mut calls = 0;
        for t in tasks {
            calls += t.await.unwrap();
        }
        let reloads = store.script_loads() - loads_before;
        let nodes = if server.is_some() { 1 } else { 3 };
        // Single-flight: each flush costs each script in use at most one
        // load per node, however many callers hit NOSCRIPT at once.
        let bound = (flushes + 1) * policies.len() as u64 * nodes;
        eprintln!("{deployment:?}: {calls} calls, {flushes} flushes, {reloads} script loads (bound {bound})");
        assert!(calls > 100, "only {calls} calls around {flushes} flushes");
        assert!(reloads <= bound, "{reloads} loads for {flushes} flushes: a reload storm");
    });
}

#[test]
fn script_flush_under_load_is_invisible_standalone() {
    let server = RedisServer::start();
    flush_under_load(Deployment::Standalone, Some(&server));
}

#[test]
fn script_flush_under_load_is_invisible_on_a_cluster() {
    flush_under_load(Deployment::Cluster, None);
}

//! The Redis store against a `redis-server` this benchmark starts on a free
//! loopback port: decisions per second and latency per algorithm with 1, 16,
//! 64 and 256 concurrent callers (the fixed window in both its forms on the
//! server's clock: the key expiring with its window, and `fixed_window
//! TIME`, a window that is not whole ms, which reads `TIME` on every call);
//! the server's own cost per script call (`INFO commandstats`, the median of
//! interleaved rounds; the token bucket and GCRA also on the caller's
//! clock, `client`); floors measured the same way through the same
//! client (`INCR`, a script that returns 1, the peers' INCRBY+PEXPIRE fixed
//! window in both its forms, `TIME`+`INCRBY`, `TIME`+`GET`+`SET PX`, and
//! the peers' token bucket and GCRA in the shape of their scripts); and
//! each script driven by `redis-benchmark -c 50 -P 16` for what the server
//! can do without our client, beside the store (which pipelines busy
//! callers' calls), the store sending each call alone, and our client
//! sending redis-benchmark's text command.
//!
//! `cargo bench -p tollgate --features redis --bench redis` (add
//! `-- --quick` for a shorter run). The machine is shared: compare the
//! rows of one run, not runs. `-- --saturation` runs only that last part,
//! `-- --policy NAME` (repeatable: fw, fw-time, sw, sl, tb, gcra, lb,
//! tb-us, gcra-us, lb-us) only those policies in it. `-- --instructions`
//! counts each script's instructions per call under callgrind instead
//! (needs valgrind); `-- --instructions --usage` counts `check`, `charge`,
//! `refund` and `check_at_most` (each of cost 1) per rate policy,
//! a server-clock window with a limit of 1000 and a calendar month's
//! window (`--policy NAME`, also `fw-1000` and `fw-cal`, only those).
//! `-- --usage` alone measures those four operations' server µs per call
//! instead (`INFO commandstats`, 16 callers, every phase alone on the
//! server, the median of 40 interleaved rounds, 8 with `--quick`, and each
//! operation's ratio to its round's check; `--policy NAME` as above).
//!
//! Kept whole on purpose: one benchmark against one `redis-server`, whose rows are reported side by side.

use std::future::Future;
use std::pin::Pin;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tollgate::algorithm::Period;
use tollgate::store::Store;
use tollgate::store::redis::{RedisStore, TimeSource};
use tollgate::{Clock, Policy, SystemClock, Usage};
use tollgate_testkit::RedisServer;

/// The middle value (the upper one of an even count).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// One measured row.
struct Row {
    name: String,
    callers: usize,
    per_second: f64,
    p50_us: f64,
    p99_us: f64,
}

impl Row {
    fn print(&self) {
        println!(
            "{:<22} {:>7} {:>12.0} {:>9.1} {:>9.1}",
            self.name, self.callers, self.per_second, self.p50_us, self.p99_us
        );
    }
}

/// Runs `op` from `callers` tasks for `run`; throughput and latency.
async fn drive<F, Fut>(name: &str, callers: usize, run: Duration, op: F) -> Row
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let start = Instant::now();
    let end = start + run;
    let tasks: Vec<_> = (0..callers)
        .map(|c| {
            let op = op.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut n = 0u64;
                while Instant::now() < end {
                    let t = Instant::now();
                    op(c, n).await;
                    latencies.push(t.elapsed().as_nanos() as u64);
                    n += 1;
                }
                latencies
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let elapsed = start.elapsed().as_secs_f64();
    all.sort_unstable();
    let pct = |p: f64| all[((all.len() - 1) as f64 * p) as usize] as f64 / 1000.0;
    Row {
        name: name.to_string(),
        callers,
        per_second: all.len() as f64 / elapsed,
        p50_us: pct(0.5),
        p99_us: pct(0.99),
    }
}

/// `usec_per_call` of `command` since the last `CONFIG RESETSTAT`.
fn usec_per_call(server: &RedisServer, command: &str) -> f64 {
    let stats = server.cli(&["INFO", "commandstats"]);
    let prefix = format!("cmdstat_{command}:");
    stats
        .lines()
        .find(|l| l.starts_with(&prefix))
        .and_then(|l| l.split("usec_per_call=").nth(1))
        .and_then(|v| v.split(',').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(f64::NAN)
}

fn reset_stats(server: &RedisServer) {
    server.cli(&["CONFIG", "RESETSTAT"]);
}

/// Requests per second that `redis-benchmark -c 50 -P 16` gets from the
/// same EVALSHA.
fn redis_benchmark(server: &RedisServer, requests: u64, command: &[String]) -> f64 {
    let out = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &server.port().to_string()])
        .args([
            "-c",
            "50",
            "-P",
            "16",
            "-n",
            &requests.to_string(),
            "-r",
            "6400",
            "-q",
        ])
        .args(command)
        .output()
        .expect("redis-benchmark (package redis-tools)");
    let text = String::from_utf8_lossy(&out.stdout);
    // "EVALSHA ...: 123456.79 requests per second, p50=..." after \r updates.
    text.rsplit('\r')
        .flat_map(|s| s.lines())
        .filter_map(|l| l.split(": ").nth(1))
        .filter_map(|l| l.split(" requests per second").next())
        .filter_map(|v| v.trim().parse().ok())
        .next_back()
        .unwrap_or(f64::NAN)
}

/// One call of something measured, from caller `i`'s `n`th turn.
type Op = Arc<dyn Fn(usize, u64) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// A check of cost 1 (a lease and its release, for concurrency) on one of
/// each caller's 100 keys.
fn decide(
    store: &Arc<RedisStore>,
    policy: &Arc<Policy>,
) -> impl Fn(usize, u64) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync + 'static {
    let (store, policy) = (store.clone(), policy.clone());
    move |c, n| {
        let (store, p) = (store.clone(), policy.clone());
        Box::pin(async move {
            let key = format!("k{c}-{}", n % 100);
            if p.algorithm().name() == "concurrency" {
                let lease = store.acquire_lease(&p, key.as_bytes()).await.unwrap();
                if let Some(id) = lease.id {
                    store.release_lease(&p, key.as_bytes(), id).await.unwrap();
                }
            } else {
                skip_transient(store.check(&p, key.as_bytes(), 1).await);
            }
        })
    }
}

/// A call's answer, unwrapped but for a transient error (a timeout when
/// the shared machine stalls the server), which the measures skip: the
/// server's counts are of what it ran, and a long run should not be lost
/// to one late reply.
fn skip_transient<T>(answer: tollgate::Result<T>) {
    if let Err(e) = answer {
        assert!(e.is_transient(), "{e}");
    }
}

/// A usage operation of cost `cost` on one of each caller's 100 keys,
/// the operation's own (named after it: `refund` and its preparation
/// share theirs).
fn usage(
    store: &Arc<RedisStore>,
    policy: &Arc<Policy>,
    op: Usage,
    cost: u64,
    keys: &'static str,
) -> Op {
    let (store, policy) = (store.clone(), policy.clone());
    Arc::new(move |c, n| {
        let (store, p) = (store.clone(), policy.clone());
        Box::pin(async move {
            let key = format!("{keys}{c}-{}", n % 100);
            skip_transient(store.usage(&p, key.as_bytes(), op, cost).await);
        })
    })
}

/// One call of a floor script, on one of each caller's 100 keys.
fn floor(conn: &redis::aio::MultiplexedConnection, text: &str) -> Op {
    let script = Arc::new(redis::Script::new(text));
    let conn = conn.clone();
    Arc::new(move |i, n| {
        let (mut c, script) = (conn.clone(), script.clone());
        Box::pin(async move {
            let _: redis::Value = script
                .key(format!("floor{i}-{}", n % 100))
                .arg(1)
                .arg(60_000)
                .invoke_async(&mut c)
                .await
                .unwrap();
        })
    })
}

/// One call of a peer-shaped bucket, on one of each caller's 100 keys:
/// go-zero's shape (two keys, the caller's time in seconds) or
/// redis_rate's (one key, `TIME`).
fn peer(conn: &redis::aio::MultiplexedConnection, text: &str) -> Op {
    let script = Arc::new(redis::Script::new(text));
    let two_keys = text.contains("KEYS[2]");
    let conn = conn.clone();
    Arc::new(move |i, n| {
        let (mut c, script) = (conn.clone(), script.clone());
        Box::pin(async move {
            let key = format!("{{peer{i}-{}}}", n % 100);
            let mut call = script.key(format!("{key}:tokens"));
            if two_keys {
                let now = SystemClock.now_micros() / 1_000_000;
                call.key(format!("{key}:ts"))
                    .arg(1_000_000)
                    .arg(1_000_000)
                    .arg(now)
                    .arg(1);
            } else {
                call.arg(1_000_000).arg(1_000_000).arg(1).arg(1);
            }
            let _: redis::Value = call.invoke_async(&mut c).await.unwrap();
        })
    })
}

/// The token bucket and GCRA on the caller's clock, which skip `TIME` like
/// go-zero's bucket, for the cost rows.
async fn client_time_buckets(url: &str) -> Vec<(&'static str, Op)> {
    let store = Arc::new(
        RedisStore::builder([url])
            .prefix("client-time:")
            .time_source(TimeSource::Client(Arc::new(SystemClock)))
            .connect()
            .await
            .expect("connect"),
    );
    policies()
        .into_iter()
        .filter_map(|policy| {
            let name = match policy.name() {
                "tb-us" => "token_bucket client",
                "gcra-us" => "gcra client",
                _ => return None,
            };
            Some((name, Arc::new(decide(&store, &Arc::new(policy))) as Op))
        })
        .collect()
}

fn policies() -> Vec<Policy> {
    let second = Duration::from_secs(1);
    let hour = Duration::from_secs(3600);
    vec![
        Policy::fixed_window("fw", 1 << 40, hour).unwrap(),
        // A window that is not whole ms: the form that reads TIME each call.
        Policy::fixed_window("fw-time", 1 << 40, hour + Duration::from_micros(500)).unwrap(),
        Policy::sliding_window("sw", 1 << 30, second).unwrap(),
        Policy::sliding_log("sl", 100, second).unwrap(),
        // An interval of 1 ms, and room for 1000 s of traffic: the buckets'
        // form whose key expires at its TAT (bucket_expiry.lua), which never
        // denies here (each of the keys gets far fewer than 1000 calls a
        // second).
        Policy::token_bucket("tb", 1000, second, 1_000_000).unwrap(),
        Policy::gcra("gcra", 1000, second, 1_000_000).unwrap(),
        Policy::leaky_bucket("lb", 1000, second, 1_000_000).unwrap(),
        // An interval of 1 µs: the buckets' own scripts, which read `TIME`.
        Policy::token_bucket("tb-us", 1_000_000, second, 1_000_000).unwrap(),
        Policy::gcra("gcra-us", 1_000_000, second, 1_000_000).unwrap(),
        Policy::leaky_bucket("lb-us", 1_000_000, second, 1_000_000).unwrap(),
        Policy::concurrency("cc", 10_000, Duration::from_secs(60)).unwrap(),
    ]
}

/// A policy's name in the output: its algorithm's, but for the forms that
/// read `TIME` on each call.
fn label(policy: &Policy) -> &'static str {
    match policy.name() {
        "fw-time" => "fixed_window TIME",
        "fw-1000" => "fixed_window 1000",
        "tb-us" => "token_bucket TIME",
        "gcra-us" => "gcra TIME",
        "lb-us" => "leaky_bucket TIME",
        "fw-cal" => "fixed_window month",
        _ => policy.algorithm().name(),
    }
}

// The peers' fixed window in its two published forms: the expiry set with
// a window's first count only (go-zero's periodlimit), and on every call;
// go-zero's periodlimit as published (core/limit/periodscript.lua, written
// here in its shape: both arguments through tonumber, `INCRBY` by the
// number 1, which redis.call prints to text, `EXPIRE` on a window's first
// count, a three-way answer); `TIME` and one `INCRBY`, the least any fixed
// window on the server's clock does; and `TIME`, `GET` and `SET PX`, the
// least a bucket does.
const FLOORS: [(&str, &str); 6] = [
    ("return 1", "return 1"),
    (
        "INCRBY+PEXPIRE first",
        "local n = redis.call('INCRBY', KEYS[1], ARGV[1]) \
         if n == tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end \
         return n",
    ),
    (
        "INCRBY+PEXPIRE each",
        "local n = redis.call('INCRBY', KEYS[1], ARGV[1]) \
         redis.call('PEXPIRE', KEYS[1], ARGV[2]) \
         return n",
    ),
    (
        "periodlimit, go-zero",
        "local limit, window = tonumber(ARGV[1]), tonumber(ARGV[2]) \
         local n = redis.call('INCRBY', KEYS[1], 1) \
         if n == 1 then redis.call('EXPIRE', KEYS[1], window) end \
         if n < limit then return 1 elseif n == limit then return 2 end \
         return 0",
    ),
    (
        "TIME+INCRBY",
        "local t = redis.call('TIME') \
         local n = redis.call('INCRBY', KEYS[1], ARGV[1]) \
         return t[1] * 1000000 + t[2] + n",
    ),
    (
        "TIME+GET+SET PX",
        "local t = redis.call('TIME') \
         local v = redis.call('GET', KEYS[1]) \
         redis.call('SET', KEYS[1], t[1] * 1000000 + t[2], 'PX', ARGV[2]) \
         return 1",
    ),
];

// The peers' token bucket and GCRA, written here in the shape of their
// published scripts, which is what decides their cost: go-zero's
// tokenlimit (two keys, tokens and the time of the last refill, each read
// with GET and written with SETEX when it changed, so the time about once
// a second; the caller's time in seconds; every argument through
// tonumber) and redis_rate (`TIME`, `GET`, `SET … EX` of
// a fractional time printed by Lua, a table reply with two numbers as
// strings). The issue quotes 15-17 µs for these against 1.3 for `return 1`.
const PEERS: [(&str, &str); 2] = [
    (
        "bucket, go-zero shape",
        "local rate, capacity = tonumber(ARGV[1]), tonumber(ARGV[2]) \
         local now, want = tonumber(ARGV[3]), tonumber(ARGV[4]) \
         local ttl = math.floor(capacity / rate * 2) \
         local tokens = tonumber(redis.call('GET', KEYS[1])) or capacity \
         local last = tonumber(redis.call('GET', KEYS[2])) or 0 \
         local filled = math.min(capacity, tokens + math.max(0, now - last) * rate) \
         local ok = filled >= want \
         if ok then filled = filled - want end \
         if filled ~= tokens then redis.call('SETEX', KEYS[1], ttl, filled) end \
         if now > last then redis.call('SETEX', KEYS[2], ttl, now) end \
         return ok",
    ),
    (
        "GCRA, redis_rate shape",
        "redis.replicate_commands() \
         local burst, rate = tonumber(ARGV[1]), tonumber(ARGV[2]) \
         local period, cost = tonumber(ARGV[3]), tonumber(ARGV[4]) \
         local t = redis.call('TIME') \
         local now = (t[1] - 1483228800) + t[2] / 1000000 \
         local tat = tonumber(redis.call('GET', KEYS[1])) or now \
         local interval = period / rate \
         tat = math.max(tat, now) \
         local new_tat = tat + interval * cost \
         local diff = now - (new_tat - interval * burst) \
         if diff < 0 then return {0, 0, tostring(-diff), tostring(tat - now)} end \
         local reset = new_tat - now \
         redis.call('SET', KEYS[1], new_tat, 'EX', math.ceil(reset)) \
         return {cost, diff / interval, tostring(-1), tostring(reset)}",
    ),
];

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    // `cargo test --benches` runs this with --bench absent: do nothing then.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    if std::env::args().any(|a| a == "--instructions") {
        instructions();
        return;
    }
    // `-- --saturation` runs only the last section; `-- --policy NAME`
    // (repeatable) only those policies in it (fw, sw, sl, tb, gcra, lb, …).
    let saturation_only = std::env::args().any(|a| a == "--saturation");
    let only = only_policies();
    let run = Duration::from_millis(if quick { 500 } else { 2000 });
    let requests = if quick { 50_000 } else { 300_000 };
    let server = RedisServer::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = Arc::new(RedisStore::connect(&server.url()).await.expect("connect"));
        store.load_scripts().await.unwrap();
        // The same store with every call sent alone: the baseline of its
        // pipelining, in the saturation rows.
        let alone = Arc::new(
            RedisStore::builder([server.url()])
                .pipelining(false)
                .connect()
                .await
                .expect("connect"),
        );
        if std::env::args().any(|a| a == "--usage") {
            let (rounds, phase) = if quick { (8, 150) } else { (40, 150) };
            usage_costs(&server, &store, rounds, Duration::from_millis(phase)).await;
            return;
        }
        let client = redis::Client::open(server.url()).unwrap();
        let conn = client.get_multiplexed_async_connection().await.unwrap();

        println!(
            "{:<22} {:>7} {:>12} {:>9} {:>9}",
            "decision", "callers", "per second", "p50 µs", "p99 µs"
        );
        for policy in policies() {
            if saturation_only {
                break;
            }
            let policy = Arc::new(policy);
            for callers in [1, 16, 64, 256] {
                let row = drive(label(&policy), callers, run, decide(&store, &policy)).await;
                row.print();
            }
        }

        // The server's cost per call: every script and floor, 16 callers
        // (a lone caller's calls each arrive cold), in interleaved rounds
        // so that a busy moment of the machine falls on all of them alike;
        // the median of the rounds.
        let mut costs: Vec<(&str, &str, Op)> = Vec::new();
        for policy in policies() {
            let policy = Arc::new(policy);
            costs.push((label(&policy), "evalsha", Arc::new(decide(&store, &policy))));
        }
        for (name, op) in client_time_buckets(&server.url()).await {
            costs.push((name, "evalsha", op));
        }
        let c = conn.clone();
        costs.push((
            "INCR",
            "incr",
            Arc::new(move |i, _| {
                let mut c = c.clone();
                Box::pin(async move {
                    let _: i64 = redis::cmd("INCR")
                        .arg(format!("incr{i}"))
                        .query_async(&mut c)
                        .await
                        .unwrap();
                })
            }),
        ));
        for (name, text) in FLOORS {
            costs.push((name, "evalsha", floor(&conn, text)));
        }
        for (name, text) in PEERS {
            costs.push((name, "evalsha", peer(&conn, text)));
        }
        let rounds = if saturation_only {
            0
        } else if quick {
            3
        } else {
            7
        };
        let mut seen: Vec<Vec<f64>> = vec![Vec::new(); costs.len()];
        for _ in 0..rounds {
            for ((_, command, op), seen) in costs.iter().zip(&mut seen) {
                reset_stats(&server);
                let op = op.clone();
                drive("", 16, run / 2, move |i, n| op(i, n)).await;
                seen.push(usec_per_call(&server, command));
            }
        }
        if rounds > 0 {
            println!(
                "\nserver cost per call (INFO commandstats usec_per_call, 16 callers): \
                 median of {rounds} interleaved rounds [each round]"
            );
            for ((name, _, _), seen) in costs.iter().zip(seen) {
                println!("{name:<22} {:>6.2} µs  {seen:.2?}", median(seen.clone()));
            }
        }

        // As many commands in flight as redis-benchmark keeps: 50
        // connections of 16 pipelined commands.
        let callers = 800;
        let rounds = if quick { 1 } else { 5 };
        println!(
            "\nsaturation: our client ({callers} callers, one thread) vs redis-benchmark -c 50 -P 16, \
             same script; median of {rounds} rounds, each on fresh keys"
        );
        println!(
            "(redis-benchmark cannot send NUL bytes, so it sends the numbers as decimal text,\n\
             which the scripts also accept at a higher server cost; `text` is our client\n\
             sending that same text command, `store` is RedisStore with packed numbers, which\n\
             for the server-clock forms is redis-benchmark's own command, pipelining busy\n\
             callers' calls, and `alone` the same store sending each call by itself)"
        );
        for policy in policies() {
            if policy.algorithm().name() == "concurrency"
                || !(only.is_empty() || only.iter().any(|o| o == policy.name()))
            {
                continue;
            }
            let (mut rb, mut rb_cost, mut texts, mut stores, mut alones) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for round in 0..rounds {
                // redis-benchmark replaces __rand_int__ with one of 6400 keys
                // (-r); our two runs use 6400 others each, all fresh in each
                // round (a fixed window's first admission of a key costs
                // more), one after the other so that the three share the
                // machine's moment.
                let user_key = format!("r{round}-__rand_int__");
                let (sha, key, args) = store.evalsha_call(&policy, user_key.as_bytes(), 1).unwrap();
                let mut command = vec!["EVALSHA".to_string(), sha, "1".to_string()];
                command.push(String::from_utf8(key).unwrap());
                command.extend(args);
                reset_stats(&server);
                rb.push(redis_benchmark(&server, requests, &command));
                rb_cost.push(usec_per_call(&server, "evalsha"));
                let text = Arc::new(command);
                let c = conn.clone();
                let row = drive("text", callers, run, move |i, n| {
                    let (mut c, text) = (c.clone(), text.clone());
                    async move {
                        let mut cmd = redis::cmd(&text[0]);
                        for (j, arg) in text[1..].iter().enumerate() {
                            if j == 2 {
                                let k = format!("t{:011}", (i as u64 * 100 + n % 100) % 6400);
                                cmd.arg(arg.replace("__rand_int__", &k));
                            } else {
                                cmd.arg(arg);
                            }
                        }
                        let _: redis::Value = cmd.query_async(&mut c).await.unwrap();
                    }
                })
                .await;
                texts.push(row.per_second);
                for (s, mark, seen) in [(&store, 's', &mut stores), (&alone, 'a', &mut alones)] {
                    let (s, p) = (s.clone(), Arc::new(policy.clone()));
                    let row = drive("store", callers, run, move |i, n| {
                        let (s, p) = (s.clone(), p.clone());
                        async move {
                            let k = (i as u64 * 100 + n % 100) % 6400;
                            let key = format!("r{round}-{mark}{k:011}");
                            s.check(&p, key.as_bytes(), 1).await.unwrap();
                        }
                    })
                    .await;
                    seen.push(row.per_second);
                }
            }
            let store_rb: Vec<String> = stores
                .iter()
                .zip(&rb)
                .map(|(s, r)| format!("{:.0}%", 100.0 * s / r))
                .collect();
            let (ours, alone, text, theirs) =
                (median(stores), median(alones), median(texts), median(rb));
            println!(
                "{:<18} store {:>8.0}/s  alone {:>8.0}/s  text {:>8.0}/s  redis-benchmark {:>8.0}/s \
                 ({:.2} µs/call)  text/rb {:>5.1}%  alone/rb {:>5.1}%  store/rb {:>5.1}% [rounds {}]",
                label(&policy),
                ours,
                alone,
                text,
                theirs,
                median(rb_cost),
                100.0 * text / theirs,
                100.0 * alone / theirs,
                100.0 * ours / theirs,
                store_rb.join(" ")
            );
        }
    });
}

/// `-- --instructions`: each script's and floor's cost in CPU instructions
/// per call, counted by callgrind in a `redis-server` run under valgrind
/// (only inside `EVALSHA`, so networking and parsing are left out). Unlike
/// a timing on a shared machine, the count is the same from run to run
/// within a few per cent, which makes small changes to a script visible.
fn instructions() {
    let calls = 2000u64;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port();
    let dir = std::env::temp_dir().join(format!("tollgate-callgrind-{port}"));
    std::fs::create_dir_all(&dir).unwrap();
    // Killed when dropped, so that a run that panics (a call timed out by
    // the slowed server) leaves no server behind.
    let mut valgrind = KillOnDrop(
        Command::new("valgrind")
            .args([
                "--tool=callgrind",
                "--collect-atstart=no",
                "--toggle-collect=evalShaCommand",
            ])
            .arg(format!("--callgrind-out-file={}/out.%p", dir.display()))
            .args(["redis-server", "--port", &port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("valgrind (package valgrind) and redis-server"),
    );
    let pid = valgrind.0.id().to_string();
    let url = format!("redis://127.0.0.1:{port}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = loop {
            match RedisStore::connect(&url).await {
                Ok(store) => break Arc::new(store),
                Err(_) if valgrind.0.try_wait().unwrap().is_none() => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("redis-server under valgrind did not start: {e}"),
            }
        };
        let conn = redis::Client::open(url.as_str())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        // The fixed window with a deadline, as the service runs it (the
        // deadline long enough that the slowed server never misses it: its
        // length does not change the check's cost): one caller, whose
        // calls leave alone, and 64, whose calls queue and leave in groups
        // that read the clock once.
        let with_deadline = Arc::new(
            RedisStore::builder([url.as_str()])
                .prefix("deadline:")
                .deadline(Duration::from_secs(10))
                .connect()
                .await
                .expect("connect"),
        );
        let fw = Arc::new(policies().remove(0));
        if std::env::args().any(|a| a == "--usage") {
            usage_instructions(&store, &pid, &dir, calls).await;
            return;
        }
        let mut measured: Vec<(&str, Op, usize)> = policies()
            .into_iter()
            .map(|p| {
                let p = Arc::new(p);
                (label(&p), Arc::new(decide(&store, &p)) as Op, 1)
            })
            .collect();
        for (name, callers) in [("fixed_window deadline", 1), ("fw deadline 64 busy", 64)] {
            measured.push((name, Arc::new(decide(&with_deadline, &fw)) as Op, callers));
        }
        measured.extend(
            client_time_buckets(&url)
                .await
                .into_iter()
                .map(|(name, op)| (name, op, 1)),
        );
        for (name, text) in FLOORS {
            measured.push((name, floor(&conn, text), 1));
        }
        for (name, text) in PEERS {
            measured.push((name, peer(&conn, text), 1));
        }
        println!(
            "instructions per decision inside EVALSHA (callgrind, {calls} decisions on 100 \
             keys per caller; concurrency is an acquire and its release, two calls)"
        );
        for (name, op, callers) in measured {
            // The keys exist before counting starts, as in steady traffic.
            run_callers(&op, callers, 100).await;
            callgrind_control(&["-z", &pid]);
            run_callers(&op, callers, calls / callers as u64).await;
            let before = dumps(&dir);
            callgrind_control(&["-d", &pid]);
            let total = loop {
                let new: Vec<_> = dumps(&dir).difference(&before).cloned().collect();
                if let Some(total) = new.iter().find_map(|f| dump_total(f)) {
                    break total;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            let decisions = calls / callers as u64 * callers as u64;
            println!(
                "{name:<22} {:>7.1}k",
                total as f64 / decisions as f64 / 1000.0
            );
        }
    });
    drop(valgrind);
    std::fs::remove_dir_all(&dir).ok();
}

/// A child process killed (and reaped) when dropped.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.0.kill().ok();
        self.0.wait().ok();
    }
}

/// `--policy NAME` arguments (repeatable): the policies a part is limited
/// to, none for all.
fn only_policies() -> Vec<String> {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2)
        .filter(|w| w[0] == "--policy")
        .map(|w| w[1].clone())
        .collect()
}

/// The usage parts' policies: every rate policy, the server-clock window
/// with a limit of 1000 (whose refund takes the limit as an argument, see
/// `lua/fixed_window_server_refund.lua`) and a calendar month's window
/// (the fixed window's script with the window's bounds), or those
/// `--policy` names.
fn usage_policies() -> Vec<Arc<Policy>> {
    let only = only_policies();
    let mut list = policies();
    list.insert(
        1,
        Policy::fixed_window("fw-1000", 1000, Duration::from_secs(3600)).unwrap(),
    );
    list.push(
        Policy::fixed_window_calendar("fw-cal", 1 << 40, Period::Month, "Europe/Paris").unwrap(),
    );
    list.into_iter()
        .filter(|p| p.algorithm().name() != "concurrency")
        .filter(|p| only.is_empty() || only.iter().any(|o| o == p.name()))
        .map(Arc::new)
        .collect()
}

/// A usage part's four rows of a policy: `check`, `charge`, `refund` and
/// `check_at_most`, each of cost 1 on keys of its own, and what makes its
/// keys' steady state (None: its own calls): `refund`'s keys charged deep
/// into debt, so that every refund has something to give back however
/// fast the policy refills.
fn usage_rows(store: &Arc<RedisStore>, p: &Arc<Policy>) -> [(&'static str, Op, Option<Op>); 4] {
    [
        ("check", Arc::new(decide(store, p)) as Op, None),
        ("charge", usage(store, p, Usage::Charge, 1, "charge"), None),
        (
            "refund",
            usage(store, p, Usage::Refund, 1, "refund"),
            Some(usage(store, p, Usage::Charge, 1 << 40, "refund")),
        ),
        (
            "check_at_most",
            usage(store, p, Usage::AtMost, 1, "at_most"),
            None,
        ),
    ]
}

/// `-- --instructions --usage`: per rate policy, `check`, `charge`,
/// `refund` and `check_at_most` of cost 1 (`usage_rows`), one caller, each
/// on 100 keys of its own that exist (100 calls first, untimed), as a hot
/// key's are.
async fn usage_instructions(store: &Arc<RedisStore>, pid: &str, dir: &std::path::Path, calls: u64) {
    println!("instructions per call inside EVALSHA (callgrind, {calls} calls on 100 keys)");
    for p in usage_policies() {
        let mut line = format!("{:<18}", label(&p));
        for (name, op, prepare) in usage_rows(store, &p) {
            run_callers(prepare.as_ref().unwrap_or(&op), 1, 100).await;
            callgrind_control(&["-z", pid]);
            run_callers(&op, 1, calls).await;
            let before = dumps(dir);
            callgrind_control(&["-d", pid]);
            let total = loop {
                let new: Vec<_> = dumps(dir).difference(&before).cloned().collect();
                if let Some(total) = new.iter().find_map(|f| dump_total(f)) {
                    break total;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            line += &format!(" {name} {:.1}k", total as f64 / calls as f64 / 1000.0);
        }
        println!("{line}");
    }
}

/// `-- --usage`: per rate policy, the server's µs per call (`INFO
/// commandstats`, EVALSHA's `usec_per_call` after `CONFIG RESETSTAT`) of
/// `usage_rows`' four operations, 16 callers on 100 keys each, every phase
/// alone on the server: interleaved rounds (check, charge, refund,
/// check_at_most; the next round from charge, and so on), each
/// operation's ratio to the same round's check, and the medians. Before its first phase each operation's keys
/// are made to exist; `refund`'s are charged into debt again before each
/// of its phases (a window of 1 s would otherwise have repaid it).
async fn usage_costs(
    server: &RedisServer,
    store: &Arc<RedisStore>,
    rounds: usize,
    phase: Duration,
) {
    let callers = 16;
    println!(
        "server µs per call (INFO commandstats usec_per_call of EVALSHA, {callers} callers on 100 \
         keys each, cost 1, phases of {} ms): median of {rounds} interleaved rounds; \
         × check: the median of the rounds' ratios to their check [lowest–highest]",
        phase.as_millis()
    );
    for p in usage_policies() {
        let rows = usage_rows(store, &p);
        let mut seen: [Vec<f64>; 4] = Default::default();
        for round in 0..rounds {
            // Each round starts one operation later, so that none always
            // follows the same one.
            let order = (0..rows.len()).map(|i| (i + round) % rows.len());
            for i in order {
                let ((_, op, prepare), seen) = (&rows[i], &mut seen[i]);
                if round == 0 || prepare.is_some() {
                    run_callers(prepare.as_ref().unwrap_or(op), callers, 100).await;
                }
                reset_stats(server);
                let op = op.clone();
                drive("", callers, phase, move |i, n| op(i, n)).await;
                seen.push(usec_per_call(server, "evalsha"));
            }
        }
        let [check, usage @ ..] = seen;
        let mut line = format!("{:<18} check {:>5.2} µs", label(&p), median(check.clone()));
        for ((name, _, _), seen) in rows.iter().skip(1).zip(usage) {
            let ratios: Vec<f64> = seen
                .iter()
                .zip(&check)
                .map(|(op, check)| op / check)
                .collect();
            let (low, high) = ratios
                .iter()
                .fold((f64::INFINITY, 0f64), |(l, h), r| (l.min(*r), h.max(*r)));
            line += &format!(
                "  {name} {:>5.2} µs {:.2}× [{low:.2}–{high:.2}]",
                median(seen),
                median(ratios)
            );
        }
        println!("{line}");
    }
}

/// `op` from `callers` concurrent tasks, `each` calls each (caller `c`'s
/// call `n`).
async fn run_callers(op: &Op, callers: usize, each: u64) {
    let tasks: Vec<_> = (0..callers)
        .map(|c| {
            let op = op.clone();
            tokio::spawn(async move {
                for n in 0..each {
                    op(c, n).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

fn callgrind_control(args: &[&str]) {
    let status = Command::new("callgrind_control")
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("callgrind_control (package valgrind)");
    assert!(status.success(), "callgrind_control {args:?}: {status}");
}

fn dumps(dir: &std::path::Path) -> std::collections::BTreeSet<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect()
}

/// The instruction total of a complete dump (its `totals:` line).
fn dump_total(path: &std::path::Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("totals: "))?
        .trim()
        .parse()
        .ok()
}

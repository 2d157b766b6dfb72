//! Lifecycle and fault injection of a standalone `RedisServer`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use tollgate_testkit::{
    PATIENCE, RedisServer, SLACK, ServerState, free_port, scan_keys_without_ttl,
};

const SHORT: Duration = Duration::from_millis(300);

/// A raw `PING` with a short timeout, independent of the harness's client.
fn raw_ping(port: u16, timeout: Duration) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.write_all(b"*1\r\n$4\r\nPING\r\n")?;
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

fn process_exists(pid: u32) -> bool {
    // A reaped process has no /proc entry; a zombie would show state Z.
    // The state is the first field after the parenthesised command name.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_none_or(|state| state != "Z")
    })
}

#[test]
fn ping_kill9_restart_stop_cont() {
    let redis = RedisServer::start();
    let port = redis.port();
    assert_ne!(port, 6379);
    assert_eq!(redis.url(), format!("redis://127.0.0.1:{port}/"));
    assert_eq!(redis.state(), ServerState::Running);
    assert_eq!(raw_ping(port, PATIENCE).unwrap(), "+PONG\r\n");
    assert_eq!(redis.cli(&["PING"]), "PONG");
    assert_eq!(redis.cli(&["SET", "k", "v"]), "OK");
    assert_eq!(redis.cli(&["GET", "k"]), "v");
    assert_eq!(redis.cli(&["CONFIG", "GET", "bind"]), "bind\n127.0.0.1");

    // kill -9: port closed, process gone.
    let old_pid = redis.pid();
    redis.kill9();
    assert_eq!(redis.state(), ServerState::Killed);
    assert!(!process_exists(old_pid));
    assert!(!redis.ping(SHORT));
    assert!(raw_ping(port, SHORT).is_err());

    // restart: same port, new process, empty dataset (no persistence).
    redis.restart();
    assert_eq!(redis.port(), port);
    assert_ne!(redis.pid(), old_pid);
    assert_eq!(redis.state(), ServerState::Running);
    assert!(redis.ping(PATIENCE));
    assert_eq!(redis.cli(&["GET", "k"]), "");

    // SIGSTOP: TCP connect may succeed (backlog) but nothing answers.
    redis.stop();
    assert_eq!(redis.state(), ServerState::Stopped);
    let t = Instant::now();
    assert!(!redis.ping(SHORT));
    assert!(raw_ping(port, SHORT).is_err());
    // Both gave up at their timeout rather than hanging.
    assert!(t.elapsed() < 2 * SHORT + SLACK);

    // SIGCONT: works again, the queued raw connection's data included.
    redis.cont();
    assert_eq!(redis.state(), ServerState::Running);
    assert!(redis.ping(PATIENCE));
    assert_eq!(redis.cli(&["PING"]), "PONG");

    // restart of a live server kills it first.
    let pid = redis.pid();
    redis.restart();
    assert_ne!(redis.pid(), pid);
    assert!(!process_exists(pid));
    assert!(redis.ping(PATIENCE));
}

#[test]
fn drop_kills_even_a_stopped_server_and_removes_its_dir() {
    let redis = RedisServer::start_with(&["--maxmemory", "10mb"]);
    assert_eq!(
        redis.cli(&["CONFIG", "GET", "maxmemory"]),
        "maxmemory\n10485760"
    );
    let (pid, port, dir) = (redis.pid(), redis.port(), redis.dir().to_path_buf());
    assert!(dir.is_dir());
    redis.stop();
    drop(redis);
    assert!(!process_exists(pid));
    assert!(!Path::new(&dir).exists());
    assert!(raw_ping(port, SHORT).is_err());
}

#[test]
fn drop_on_panic_cleans_up() {
    let (tx, rx) = std::sync::mpsc::channel();
    let result = std::thread::spawn(move || {
        let redis = RedisServer::start();
        tx.send((redis.pid(), redis.dir().to_path_buf())).unwrap();
        panic!("test panics while owning a server");
    })
    .join();
    assert!(result.is_err());
    let (pid, dir) = rx.recv().unwrap();
    assert!(!process_exists(pid));
    assert!(!dir.exists());
}

#[test]
fn parallel_servers_get_distinct_ports() {
    let servers: Vec<RedisServer> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6).map(|_| s.spawn(RedisServer::start)).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut ports: Vec<u16> = servers.iter().map(RedisServer::port).collect();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), servers.len());
    for (i, s) in servers.iter().enumerate() {
        // Each server holds its own data: they really are distinct processes.
        assert_eq!(s.cli(&["SET", "who", &i.to_string()]), "OK");
    }
    for (i, s) in servers.iter().enumerate() {
        assert_eq!(s.cli(&["GET", "who"]), i.to_string());
    }
}

#[test]
fn cli_returns_errors_as_text_and_injects_faults() {
    let redis = RedisServer::start();
    assert!(
        redis
            .cli(&["NOSUCHCOMMAND"])
            .starts_with("ERR unknown command")
    );
    // CLIENT PAUSE makes the server stall regular commands for a while:
    // 2 s, so that the ping sent just after is still stalled past its
    // 150 ms however slowly this test runs; then it answers again.
    assert_eq!(redis.cli(&["CLIENT", "PAUSE", "2000", "ALL"]), "OK");
    assert!(!redis.ping(Duration::from_millis(150)));
    assert!(redis.ping(PATIENCE));
}

#[test]
fn finds_keys_without_ttl() {
    let redis = RedisServer::start();
    assert!(scan_keys_without_ttl(&redis).is_empty());
    redis.cli(&["SET", "forever", "1"]);
    redis.cli(&["SET", "expiring", "1", "PX", "60000"]);
    redis.cli(&["HSET", "hash:forever", "f", "1"]);
    // Enough keys for SCAN to need several round trips.
    let mut args = vec!["MSET"];
    let names: Vec<String> = (0..3000).map(|i| format!("bulk:{i}")).collect();
    for n in &names {
        args.extend([n.as_str(), "x"]);
    }
    redis.cli(&args);
    let mut expire = vec![
        "EVAL",
        "for _, k in ipairs(KEYS) do redis.call('PEXPIRE', k, 60000) end",
        "2999",
    ];
    expire.extend(names[1..].iter().map(String::as_str));
    redis.cli(&expire);
    assert_eq!(
        scan_keys_without_ttl(&redis),
        vec!["bulk:0", "forever", "hash:forever"]
    );
}

#[test]
fn free_port_is_bindable_and_never_6379() {
    for _ in 0..20 {
        let port = free_port();
        assert_ne!(port, 6379);
        std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    }
}

//! A TCP proxy between a client and a server, whose link can flap.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How often the proxy's threads look at their flags.
const TICK: Duration = Duration::from_millis(2);

/// A TCP proxy on a free `127.0.0.1` port that relays every connection to a
/// target (a [`RedisServer`](crate::RedisServer)'s address, say), and can
/// make the link between them flap: [`flap`](TcpProxy::flap) alternates a
/// phase that drops every connection (those open are cut, new ones are
/// accepted and closed at once) with a phase that passes them, each
/// `period` long; [`pass`](TcpProxy::pass) makes the link steady again.
///
/// Written with threads and blocking sockets, nothing else. Dropping it
/// cuts every connection and stops its threads.
///
/// ```no_run
/// use std::time::Duration;
/// use tollgate_testkit::{RedisServer, TcpProxy};
///
/// let redis = RedisServer::start();
/// let proxy = TcpProxy::start(redis.addr());
/// // A client connects to proxy.url() instead of redis.url().
/// proxy.flap(Duration::from_millis(100)); // drop 100 ms, pass 100 ms, ...
/// proxy.pass(); // steady again
/// println!("{} connections dropped", proxy.dropped());
/// ```
pub struct TcpProxy {
    port: u16,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

struct Shared {
    target: SocketAddr,
    /// `Some((period, since))` while flapping.
    flapping: Mutex<Option<(Duration, Instant)>>,
    passing: AtomicBool,
    stop: AtomicBool,
    /// Both ends of every live connection, to cut them.
    live: Mutex<Vec<(u64, TcpStream, TcpStream)>>,
    next_id: AtomicU64,
    dropped: AtomicU64,
    passed: AtomicU64,
}

impl Shared {
    fn lock_live(&self) -> std::sync::MutexGuard<'_, Vec<(u64, TcpStream, TcpStream)>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Cuts every live connection.
    fn cut_all(&self) {
        let live = std::mem::take(&mut *self.lock_live());
        for (_, a, b) in live {
            let _ = a.shutdown(Shutdown::Both);
            let _ = b.shutdown(Shutdown::Both);
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn forget(&self, id: u64) {
        self.lock_live().retain(|(i, ..)| *i != id);
    }
}

impl TcpProxy {
    /// Starts a proxy to `target`, passing every connection.
    ///
    /// # Panics
    ///
    /// If no loopback port can be bound.
    pub fn start(target: SocketAddr) -> TcpProxy {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap_or_else(|e| panic!("cannot bind a loopback port for the proxy: {e}"));
        let port = listener.local_addr().expect("a bound address").port();
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let shared = Arc::new(Shared {
            target,
            flapping: Mutex::new(None),
            passing: AtomicBool::new(true),
            stop: AtomicBool::new(false),
            live: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            passed: AtomicU64::new(0),
        });
        let acceptor = {
            let shared = shared.clone();
            thread::spawn(move || accept_loop(&listener, &shared))
        };
        let flapper = {
            let shared = shared.clone();
            thread::spawn(move || flap_loop(&shared))
        };
        TcpProxy {
            port,
            shared,
            threads: vec![acceptor, flapper],
        }
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/`, for a Redis client.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Alternates from now on: `period` dropping every connection, then
    /// `period` passing them, and so on, starting with a drop.
    pub fn flap(&self, period: Duration) {
        *self
            .shared
            .flapping
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some((period, Instant::now()));
        self.shared.passing.store(false, Ordering::SeqCst);
        self.shared.cut_all();
    }

    /// Passes every connection again, from now on.
    pub fn pass(&self) {
        *self
            .shared
            .flapping
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        self.shared.passing.store(true, Ordering::SeqCst);
    }

    /// Connections cut, or refused, so far.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Connections relayed to the target so far.
    pub fn passed(&self) -> u64 {
        self.shared.passed.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for TcpProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpProxy")
            .field("port", &self.port)
            .field("target", &self.shared.target)
            .field("dropped", &self.dropped())
            .field("passed", &self.passed())
            .finish_non_exhaustive()
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.cut_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        let client = match listener.accept() {
            Ok((client, _)) => client,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(TICK);
                continue;
            }
            Err(_) => continue,
        };
        if !shared.passing.load(Ordering::SeqCst) {
            let _ = client.shutdown(Shutdown::Both);
            shared.dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        match relay(client, shared) {
            Ok(()) => {
                shared.passed.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                shared.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Connects to the target and copies bytes both ways, each way on a
/// thread of its own, until either side closes or the link is cut.
fn relay(client: TcpStream, shared: &Arc<Shared>) -> io::Result<()> {
    client.set_nonblocking(false)?;
    let server = TcpStream::connect_timeout(&shared.target, Duration::from_secs(1))?;
    for s in [&client, &server] {
        s.set_nodelay(true)?;
    }
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    shared
        .lock_live()
        .push((id, client.try_clone()?, server.try_clone()?));
    for (from, to) in [(client.try_clone()?, server.try_clone()?), (server, client)] {
        let shared = shared.clone();
        thread::spawn(move || {
            copy(from, to);
            shared.forget(id);
        });
    }
    Ok(())
}

fn copy(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// Switches phases while flapping; a switch to dropping cuts every live
/// connection.
fn flap_loop(shared: &Shared) {
    while !shared.stop.load(Ordering::SeqCst) {
        thread::sleep(TICK);
        let flapping = *shared
            .flapping
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some((period, since)) = flapping else {
            continue;
        };
        let phase = since.elapsed().as_nanos() / period.as_nanos().max(1);
        let passing = phase % 2 == 1;
        let was = shared.passing.swap(passing, Ordering::SeqCst);
        if was && !passing {
            shared.cut_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RedisServer;
    use crate::resp::Conn;

    fn ping(port: u16) -> bool {
        Conn::connect(port, Duration::from_millis(200))
            .and_then(|mut c| c.cmd(&["PING"]))
            .is_ok()
    }

    #[test]
    fn passes_then_flaps_then_passes() {
        let redis = RedisServer::start();
        let proxy = TcpProxy::start(redis.addr());
        assert!(ping(proxy.port()), "a steady link passes");
        let mut held = Conn::connect(proxy.port(), Duration::from_secs(1)).unwrap();
        assert!(held.cmd(&["PING"]).is_ok());
        proxy.flap(Duration::from_millis(100));
        assert!(held.cmd(&["PING"]).is_err(), "a flap cuts open connections");
        let (mut up, mut down) = (0, 0);
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(800) {
            if ping(proxy.port()) {
                up += 1;
            } else {
                down += 1;
            }
            thread::sleep(Duration::from_millis(10));
        }
        assert!(up > 0 && down > 0, "both phases seen: {up} up, {down} down");
        proxy.pass();
        assert!(ping(proxy.port()), "steady again");
        assert!(proxy.dropped() >= 2 && proxy.passed() >= 2);
    }
}

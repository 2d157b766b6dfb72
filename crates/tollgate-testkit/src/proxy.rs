//! A TCP proxy between a client and a server, whose link can flap, be
//! cut until healed, or carry every byte late.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
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
/// `period` long; [`cut`](TcpProxy::cut) drops every connection until
/// [`pass`](TcpProxy::pass) makes the link steady again (a partition and
/// its healing). [`delay`](TcpProxy::delay) holds every chunk of bytes,
/// each way, that long before passing it on (a long link: 80 ms each way
/// makes a 160 ms round trip), without slowing the bytes behind it.
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
/// proxy.delay(Duration::from_millis(80)); // a 160 ms round trip
/// proxy.cut(); // partitioned until the next pass()
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
    /// How long each chunk is held, each way, in µs.
    delay_micros: AtomicU64,
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
            delay_micros: AtomicU64::new(0),
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

    /// Drops every connection from now on (those open are cut, new ones
    /// closed at once) until [`pass`](TcpProxy::pass): a partition.
    pub fn cut(&self) {
        *self
            .shared
            .flapping
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        self.shared.passing.store(false, Ordering::SeqCst);
        self.shared.cut_all();
    }

    /// Holds every chunk of bytes `delay` before passing it on, each way,
    /// from now on (open connections included); zero passes at once.
    /// Bytes keep their order, and a chunk's wait does not add to the
    /// next one's: the link is long, not slow.
    pub fn delay(&self, delay: Duration) {
        let micros = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.shared.delay_micros.store(micros, Ordering::SeqCst);
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
        let reader = shared.clone();
        let (chunks, due) = mpsc::channel::<(Instant, Vec<u8>)>();
        thread::spawn(move || {
            read_chunks(from, &chunks, &reader);
            reader.forget(id);
        });
        thread::spawn(move || write_chunks(to, &due));
    }
    Ok(())
}

/// Reads chunks from one end, each stamped with when it may be passed on;
/// on end of file or error, shuts both ends (the writer then stops too).
fn read_chunks(mut from: TcpStream, chunks: &mpsc::Sender<(Instant, Vec<u8>)>, shared: &Shared) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let delay = Duration::from_micros(shared.delay_micros.load(Ordering::SeqCst));
                if chunks
                    .send((Instant::now() + delay, buf[..n].to_vec()))
                    .is_err()
                {
                    break;
                }
            }
        }
    }
    let _ = from.shutdown(Shutdown::Both);
}

/// Writes each chunk to the other end once it is due, in order.
fn write_chunks(mut to: TcpStream, due: &mpsc::Receiver<(Instant, Vec<u8>)>) {
    while let Ok((at, bytes)) = due.recv() {
        let wait = at.saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            thread::sleep(wait);
        }
        if to.write_all(&bytes).is_err() {
            break;
        }
    }
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

    #[test]
    fn a_delayed_link_holds_bytes_and_a_cut_lasts_until_pass() {
        let redis = RedisServer::start();
        let proxy = TcpProxy::start(redis.addr());
        proxy.delay(Duration::from_millis(40));
        let mut conn = Conn::connect(proxy.port(), Duration::from_secs(5)).unwrap();
        // Many commands in flight at once come back whole and in order.
        let value = "v".repeat(40_000);
        assert!(conn.cmd(&["SET", "k", &value]).is_ok());
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(conn.text(&["GET", "k"]).unwrap(), value);
        }
        // Each round trip is held 40 ms each way: a lower bound that a
        // sleep guarantees, not a timing goal.
        assert!(start.elapsed() >= Duration::from_millis(3 * 80));
        proxy.cut();
        assert!(conn.cmd(&["PING"]).is_err(), "a cut drops open connections");
        for _ in 0..3 {
            assert!(!ping(proxy.port()), "and refuses new ones until healed");
            thread::sleep(Duration::from_millis(20));
        }
        proxy.pass();
        proxy.delay(Duration::ZERO);
        assert!(ping(proxy.port()), "healed");
    }
}

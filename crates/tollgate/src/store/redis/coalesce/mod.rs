//! Auto-pipelining: when many callers are busy on a standalone server,
//! their script calls leave together, as one pipeline.
//!
//! The multiplexed connection already shares one socket, but it writes
//! each command as it arrives. On tokio's multi-threaded runtime a caller
//! that sends a command wakes the connection's task, which runs next (the
//! woken task's slot) and so writes that one command alone: one `writev`
//! per decision, the largest single cost of the client when many callers
//! are busy. Here, once [`QUEUE_FROM`] commands are in flight (the server
//! has work enough), a caller queues its command instead, and the first
//! of a burst spawns one flush, which yields once, so that every caller
//! ready to run queues its own, then sends the queue as pipelines of at
//! most [`MAX_PIPELINE`] (`pipeline.rs`): one message on the connection's
//! channel, one write and one response timer per pipeline, and the
//! replies handed back in order. With fewer in flight a command leaves at
//! once, as without this queue.
//!
//! Each command's reply, error included, goes to its own caller: a
//! NOSCRIPT in a pipeline is one caller's, who reloads and tries again as
//! it would alone. An error of the whole pipeline (the connection lost, the
//! response timeout) goes to every caller in it.
//!
//! The files here: this one the queue, what a pipeline carries (`Item`)
//! and the flush that drains it (what
//! is in flight, what a flush takes, each reply to its caller);
//! `pipeline.rs` a flush's batch sent as pipelines and the replies handed
//! back; `sink.rs` where they go, a standalone server or one cluster
//! primary, whose flushes are bounded (see there); `group.rs` server-clock
//! fixed-window checks with a deadline, sent as one call of the group
//! script.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use redis::aio::ConnectionManager;
use redis::{Cmd, RedisError, RedisResult, Value};
use tokio::sync::oneshot;

pub(crate) use self::group::WindowCheck;
use self::sink::NODE_FLUSHES;
pub(crate) use self::sink::{Sink, reroutes};
use super::Pipelined;

mod group;
mod pipeline;
mod sink;

/// The most commands in one pipeline: a larger queue leaves as several
/// pipelines at once, so the first replies need not wait for the last.
const MAX_PIPELINE: usize = 128;

/// How many commands must be in flight before a new one queues: below
/// this the server may be idle, waiting for the next command, and a
/// command leaves at once. (Held back, few commands would fall into
/// lockstep: every caller waits for one pipeline's replies, the server for
/// the next pipeline, and each round pays both sides' wake-up.)
const QUEUE_FROM: usize = 32;

/// A queue of commands in front of one standalone connection, or of one
/// cluster node.
pub(crate) struct Coalescer {
    sink: Sink,
    /// Whether window checks may leave as groups: on a standalone server,
    /// not on a cluster node (a group's keys are in many slots).
    groups: bool,
    /// The SHA1 of `lua/fixed_window_server_group.lua` as loaded.
    group_sha: String,
    queue: Mutex<Queue>,
    /// Commands sent and not yet answered: to this server, or to every
    /// primary of a cluster (whose queues share the count, so that busy
    /// callers queue however their keys fall over the primaries).
    in_flight: Arc<AtomicUsize>,
    /// The most flushes in flight at once (see `sink.rs`).
    flushes: usize,
    /// Pipelines sent, and the commands they carried.
    pipelines: AtomicU64,
    calls: AtomicU64,
}

/// Counts `.1` commands out of flight when dropped (answered, failed or
/// abandoned).
struct InFlight<'a>(&'a AtomicUsize, usize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(self.1, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for Coalescer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Coalescer")
    }
}

type Waiter = oneshot::Sender<RedisResult<Value>>;

#[derive(Default)]
struct Queue {
    commands: Vec<Cmd>,
    waiters: Vec<Waiter>,
    /// Window checks, to leave as groups (see the module's docs).
    windows: Vec<(WindowCheck, Waiter)>,
    /// Whether a flush is spawned and has not yet taken the queue.
    scheduled: bool,
    /// Flushes that took their batch and are not yet answered.
    sending: usize,
}

/// What a flush takes from the queue.
struct Batch {
    commands: Vec<Cmd>,
    waiters: Vec<Waiter>,
    windows: Vec<(WindowCheck, Waiter)>,
}

/// What a caller queues.
enum Entry {
    Command(Cmd),
    Window(WindowCheck),
}

/// A command submitted to a queue: in it, or to send alone.
pub(crate) enum Submitted {
    Queued(oneshot::Receiver<RedisResult<Value>>),
    Alone(Arc<Coalescer>, Cmd),
}

impl Submitted {
    /// The command's reply (sent now, if alone).
    pub(crate) async fn reply(self) -> RedisResult<Value> {
        match self {
            Submitted::Queued(receiver) => receiver.await.unwrap_or_else(|_| Err(dropped())),
            Submitted::Alone(queue, cmd) => {
                queue.in_flight.fetch_add(1, Ordering::Relaxed);
                let _sent = InFlight(&queue.in_flight, 1);
                queue.sink.one(&cmd).await
            }
        }
    }
}

impl Coalescer {
    /// The queue of a standalone server.
    pub(crate) fn new(conn: ConnectionManager) -> Coalescer {
        Coalescer {
            groups: true,
            flushes: usize::MAX,
            ..Coalescer::to(Sink::Server(conn), Arc::default())
        }
    }

    /// The queue of one cluster primary, counting its commands in flight
    /// in `in_flight` (shared by the cluster's queues).
    pub(crate) fn to(sink: Sink, in_flight: Arc<AtomicUsize>) -> Coalescer {
        Coalescer {
            sink,
            groups: false,
            group_sha: redis::Script::new(super::texts::FIXED_WINDOW_SERVER_GROUP)
                .get_hash()
                .to_string(),
            queue: Mutex::new(Queue::default()),
            in_flight,
            flushes: NODE_FLUSHES,
            pipelines: AtomicU64::new(0),
            calls: AtomicU64::new(0),
        }
    }

    /// Sends `cmd`, at once or in the next pipeline, and waits for its
    /// reply.
    pub(crate) async fn query(self: &Arc<Self>, cmd: Cmd) -> RedisResult<Value> {
        self.submit(cmd).reply().await
    }

    /// Queues `cmd` for the next pipeline when callers are busy, or hands
    /// it back to leave alone: what [`Coalescer::query`] waits on, taken
    /// without holding this queue (a cluster's caller finds it under the
    /// slot map, and so needs no reference of its own to it, shared with
    /// every other caller, when it queues).
    pub(crate) fn submit(self: &Arc<Self>, cmd: Cmd) -> Submitted {
        if self.in_flight.load(Ordering::Relaxed) < QUEUE_FROM {
            return Submitted::Alone(self.clone(), cmd);
        }
        match self.enqueue(Entry::Command(cmd)) {
            Ok(receiver) => Submitted::Queued(receiver),
            Err(Entry::Command(cmd)) => Submitted::Alone(self.clone(), cmd),
            Err(Entry::Window(_)) => unreachable!("a command comes back as it went"),
        }
    }

    /// Queues a window check for the next group, when the server is busy
    /// enough that calls queue; `None` when it is not (the caller then
    /// sends its own script call, which leaves at once).
    pub(crate) async fn query_window(
        self: &Arc<Self>,
        check: WindowCheck,
    ) -> Option<RedisResult<Value>> {
        if !self.groups || self.in_flight.load(Ordering::Relaxed) < QUEUE_FROM {
            return None;
        }
        let receiver = self.enqueue(Entry::Window(check)).ok()?;
        Some(Submitted::Queued(receiver).reply().await)
    }

    /// Queues `entry`, spawning the flush if it is a burst's first and
    /// fewer than [`Coalescer::flushes`] are in flight (else the first of
    /// those to come back sends it); the reply's receiver. With no runtime
    /// to spawn the flush on, `entry` comes back, to be sent alone. (The runtime is looked up once a
    /// burst: its handle is shared by every thread, so a lookup per call
    /// would have them take turns at one cache line.)
    fn enqueue(
        self: &Arc<Self>,
        entry: Entry,
    ) -> Result<oneshot::Receiver<RedisResult<Value>>, Entry> {
        let (sender, receiver) = oneshot::channel();
        let runtime = {
            let mut queue = self.lock();
            let runtime = if queue.scheduled || queue.sending >= self.flushes {
                None
            } else {
                match tokio::runtime::Handle::try_current() {
                    Ok(runtime) => Some(runtime),
                    Err(_) => return Err(entry),
                }
            };
            match entry {
                Entry::Command(cmd) => {
                    queue.commands.push(cmd);
                    queue.waiters.push(sender);
                }
                Entry::Window(check) => queue.windows.push((check, sender)),
            }
            queue.scheduled |= runtime.is_some();
            runtime
        };
        if let Some(runtime) = runtime {
            runtime.spawn(self.clone().flush());
        }
        Ok(receiver)
    }

    /// How many pipelines this queue sent, and how many commands they
    /// carried in all.
    pub(crate) fn sent(&self) -> Pipelined {
        Pipelined {
            pipelines: self.pipelines.load(Ordering::Relaxed),
            calls: self.calls.load(Ordering::Relaxed),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        // A panic while the lock is held cannot leave the queue half
        // written (pushes and takes only), so a poisoned lock is usable.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn flush(self: Arc<Self>) {
        // Let every caller that is ready to run queue its command first.
        tokio::task::yield_now().await;
        let mut batch = {
            let mut queue = self.lock();
            queue.scheduled = false;
            Self::take(&mut queue)
        };
        loop {
            let failed = {
                // Out of flight when answered, or dropped with the runtime.
                let _sending = Sending(&self);
                self.send_batch(batch).await
            };
            // What queued while this was out, unless a flush of its own
            // is spawned for it or others are in flight.
            let mut queue = self.lock();
            if queue.scheduled
                || queue.sending >= self.flushes
                || (queue.commands.is_empty() && queue.windows.is_empty())
            {
                return;
            }
            batch = Self::take(&mut queue);
            drop(queue);
            if let Some(e) = failed {
                // Sent again through the cluster connection by its callers,
                // as the failed pipeline's calls are.
                let _sending = Sending(&self);
                batch.fail(&e);
                return;
            }
        }
    }

    /// The queue's commands, counted in flight as a flush's; the next
    /// burst's vectors as long as this one's, so that they do not grow by
    /// doubling, a reallocation at a time, under the lock every caller
    /// takes.
    fn take(queue: &mut Queue) -> Batch {
        queue.sending += 1;
        let n = queue.commands.len();
        Batch {
            commands: std::mem::replace(&mut queue.commands, Vec::with_capacity(n)),
            waiters: std::mem::replace(&mut queue.waiters, Vec::with_capacity(n)),
            windows: std::mem::take(&mut queue.windows),
        }
    }
}

/// Counts a flush out of its queue's flushes in flight when dropped.
struct Sending<'a>(&'a Coalescer);

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        self.0.lock().sending -= 1;
    }
}

/// The error of a command whose flush was dropped (the runtime shutting
/// down) before it answered.
fn dropped() -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::BrokenPipe,
        "the pipeline carrying this command was dropped (runtime shutdown)",
    ))
}

/// What a pipeline carries: a caller's own command, or a group of window
/// checks whose reply is an array, one element per caller.
pub(super) enum Item {
    One(Cmd, Waiter),
    Group(Cmd, Vec<Waiter>),
}

impl Item {
    pub(super) fn calls(&self) -> usize {
        match self {
            Item::One(..) => 1,
            Item::Group(_, waiters) => waiters.len(),
        }
    }
}

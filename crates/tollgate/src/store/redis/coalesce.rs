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
//! most [`MAX_PIPELINE`]: one message on the connection's channel, one
//! write and one response timer per pipeline, and the replies handed back
//! in order. With fewer in flight a command leaves at once, as without
//! this queue.
//!
//! Each command's reply, error included, goes to its own caller: a
//! NOSCRIPT in a pipeline is one caller's, who reloads and tries again as
//! it would alone. An error of the whole pipeline (the connection lost, the
//! response timeout) goes to every caller in it.
//!
//! A cluster primary's queue keeps at most [`NODE_FLUSHES`] flushes in
//! flight: a burst that finds them out waits in the queue, and the first
//! of them to come back sends it, at once (its callers have had a round
//! trip to queue). Without the bound, 256 busy callers over three
//! primaries made some fifteen pipelines of 17 in flight, where a
//! standalone server's queue made ten of 26 (every pipeline pays a flush,
//! the connection task's wake-up, a write and its reads, whatever its
//! length); with it, a primary's pipelines are as long as a standalone
//! server's. When a pipeline fails whole on an error that sends its calls
//! again through the cluster connection (a lost connection, a timeout),
//! the calls queued behind it go the same way at once rather than wait
//! out the same error. A standalone server's queue is not bounded.
//!
//! Server-clock fixed-window checks that carry a deadline queue apart
//! ([`Coalescer::query_window`]): a flush sends them, at most
//! [`MAX_PIPELINE`] at a time, as one call of
//! `lua/fixed_window_server_group.lua`, which reads the server's clock
//! once for all of them instead of once each (the clock read is most of
//! what a deadline costs the server). The group's deadline is the
//! earliest of its checks'; each check's reply, or its own error, goes to
//! its caller.
//!
//! Kept whole on purpose: one concept, the queue and the flush that drains it share their invariants (in flight, batch size, each reply to its caller).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::SingleNodeRoutingInfo;
use redis::{Cmd, ErrorKind, RedisError, RedisResult, Value};
use tokio::sync::oneshot;

use super::Pipelined;

/// The most commands in one pipeline: a larger queue leaves as several
/// pipelines at once, so the first replies need not wait for the last.
const MAX_PIPELINE: usize = 128;

/// How many commands must be in flight before a new one queues: below
/// this the server may be idle, waiting for the next command, and a
/// command leaves at once. (Held back, few commands would fall into
/// lockstep: every caller waits for one pipeline's replies, the server for
/// the next pipeline, and each round pays both sides' wake-up.)
const QUEUE_FROM: usize = 32;

/// The most flushes in flight at once from one cluster primary's queue:
/// one on the wire while the next burst gathers, so that the primary
/// is never left waiting for the client between two.
const NODE_FLUSHES: usize = 2;

/// Where a queue's commands go.
pub(crate) enum Sink {
    /// A standalone server.
    Server(ConnectionManager),
    /// One primary of a cluster: pipelines to its address through the
    /// cluster's connection (which keeps one connection per node); a
    /// command alone goes by its key's slot, redirects followed.
    Node {
        cluster: ClusterConnection,
        host: String,
        port: u16,
    },
}

impl Sink {
    async fn one(&self, cmd: &Cmd) -> RedisResult<Value> {
        match self {
            Sink::Server(conn) => cmd.query_async(&mut conn.clone()).await,
            Sink::Node { cluster, .. } => cmd.query_async(&mut cluster.clone()).await,
        }
    }

    async fn many(&self, pipeline: redis::Pipeline, count: usize) -> RedisResult<Vec<Value>> {
        match self {
            Sink::Server(conn) => conn.clone().req_packed_commands(&pipeline, 0, count).await,
            Sink::Node {
                cluster,
                host,
                port,
            } => {
                let to = SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                };
                cluster.clone().route_pipeline(pipeline, 0, count, to).await
            }
        }
    }
}

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
    /// The most flushes in flight at once (see the module's docs).
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

/// One server-clock fixed-window check with a deadline, as the group
/// script takes it.
#[derive(Debug, Clone)]
pub(crate) struct WindowCheck {
    pub(crate) key: Vec<u8>,
    /// The cost times 16 (see `lua/fixed_window_server.lua`), at least 16.
    pub(crate) cost16: u64,
    /// When, on the server's clock (µs), the check must have run.
    pub(crate) deadline: u64,
}

/// What a pipeline carries: a caller's own command, or a group of window
/// checks whose reply is an array, one element per caller.
enum Item {
    One(Cmd, Waiter),
    Group(Cmd, Vec<Waiter>),
}

impl Item {
    fn calls(&self) -> usize {
        match self {
            Item::One(..) => 1,
            Item::Group(_, waiters) => waiters.len(),
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

    /// Sends a batch as pipelines; the error of a pipeline that failed
    /// whole on a cluster primary in a way that sends its calls again
    /// through the cluster connection (see `nodes.rs`), if one did.
    async fn send_batch(&self, batch: Batch) -> Option<RedisError> {
        let Batch {
            commands,
            waiters,
            mut windows,
        } = batch;
        let mut items: Vec<Item> = commands
            .into_iter()
            .zip(waiters)
            .map(|(cmd, waiter)| Item::One(cmd, waiter))
            .collect();
        while !windows.is_empty() {
            let rest = windows.split_off(windows.len().min(MAX_PIPELINE));
            items.push(self.group(std::mem::replace(&mut windows, rest)));
        }
        // Pipelines of at most MAX_PIPELINE calls (a group counting its
        // checks), all sent at once.
        let mut sends = Vec::new();
        let mut pipeline = Vec::new();
        let mut calls = 0;
        for item in items {
            if calls + item.calls() > MAX_PIPELINE && !pipeline.is_empty() {
                sends.push(self.send(std::mem::take(&mut pipeline)));
                calls = 0;
            }
            calls += item.calls();
            pipeline.push(item);
        }
        if !pipeline.is_empty() {
            sends.push(self.send(pipeline));
        }
        let failed = if sends.len() == 1 {
            // The usual burst, one pipeline: no joining.
            sends.pop().unwrap().await
        } else {
            futures_util::future::join_all(sends)
                .await
                .into_iter()
                .flatten()
                .next()
        };
        // (Only a bounded queue, a cluster primary's, has calls waiting
        // behind a flush.)
        failed.filter(reroutes)
    }

    /// One call of the group script for these checks.
    fn group(&self, checks: Vec<(WindowCheck, Waiter)>) -> Item {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&self.group_sha).arg(checks.len());
        for (check, _) in &checks {
            cmd.arg(&check.key[..]);
        }
        let deadline = checks.iter().map(|(c, _)| c.deadline).min();
        cmd.arg(deadline.unwrap_or(0));
        if checks.iter().any(|(c, _)| c.cost16 != 16) {
            for (check, _) in &checks {
                cmd.arg(check.cost16);
            }
        }
        Item::Group(cmd, checks.into_iter().map(|(_, w)| w).collect())
    }

    /// Sends one pipeline; each reply to its waiter (a group's array, one
    /// element to each of its waiters). The error if it failed whole.
    async fn send(&self, items: Vec<Item>) -> Option<RedisError> {
        let count = items.len();
        let calls: usize = items.iter().map(Item::calls).sum();
        self.in_flight.fetch_add(calls, Ordering::Relaxed);
        let _sent = InFlight(&self.in_flight, calls);
        self.pipelines.fetch_add(1, Ordering::Relaxed);
        self.calls.fetch_add(calls as u64, Ordering::Relaxed);
        crate::metrics::record_pipeline(calls);
        let mut pipeline = redis::Pipeline::with_capacity(count);
        let mut routes = Vec::with_capacity(count);
        for item in items {
            let (cmd, route) = match item {
                Item::One(cmd, waiter) => (cmd, Route::One(waiter)),
                Item::Group(cmd, waiters) => (cmd, Route::Group(waiters)),
            };
            pipeline.add_command(cmd);
            routes.push(route);
        }
        let replies = self.sink.many(pipeline, count).await.and_then(|replies| {
            if replies.len() == count {
                Ok(replies)
            } else {
                Err(RedisError::from((
                    ErrorKind::Parse,
                    "pipeline reply",
                    format!("{} replies to {count} commands", replies.len()),
                )))
            }
        });
        // A caller that gave up has dropped its receiver: sends may fail.
        match replies {
            Ok(replies) => {
                for (route, reply) in routes.into_iter().zip(replies) {
                    route.answer(Ok(reply));
                }
            }
            Err(e) => {
                for route in routes {
                    route.answer(Err(e.clone()));
                }
                return Some(e);
            }
        }
        None
    }
}

/// Counts a flush out of its queue's flushes in flight when dropped.
struct Sending<'a>(&'a Coalescer);

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        self.0.lock().sending -= 1;
    }
}

impl Batch {
    /// Answers every call of the batch with `e`, unsent.
    fn fail(self, e: &RedisError) {
        let waiters = self.waiters.into_iter();
        for waiter in waiters.chain(self.windows.into_iter().map(|(_, w)| w)) {
            let _ = waiter.send(Err(e.clone()));
        }
    }
}

/// Who a pipeline's reply goes to.
enum Route {
    One(Waiter),
    Group(Vec<Waiter>),
}

impl Route {
    fn answer(self, reply: RedisResult<Value>) {
        let waiters = match self {
            Route::One(waiter) => {
                let _ = waiter.send(reply.and_then(Value::extract_error));
                return;
            }
            Route::Group(waiters) => waiters,
        };
        // An array is not read as one error because one check failed.
        let reply = match reply {
            Ok(Value::Array(replies)) => Ok(Value::Array(replies)),
            other => other.and_then(Value::extract_error),
        };
        match reply {
            // Each check's own reply, or its own error.
            Ok(Value::Array(replies)) if replies.len() == waiters.len() => {
                for (waiter, reply) in waiters.into_iter().zip(replies) {
                    let _ = waiter.send(reply.extract_error());
                }
            }
            // Late (nil, and nothing written), or the call's error
            // (NOSCRIPT, the connection): the same to every check.
            Ok(Value::Nil) | Err(_) => {
                for waiter in waiters {
                    let _ = waiter.send(reply.clone());
                }
            }
            Ok(other) => {
                let e = RedisError::from((
                    ErrorKind::Parse,
                    "group reply",
                    format!("{other:?} to {} window checks", waiters.len()),
                ));
                for waiter in waiters {
                    let _ = waiter.send(Err(e.clone()));
                }
            }
        }
    }
}

/// The error of a command whose flush was dropped (the runtime shutting
/// down) before it answered.
/// Whether a command failed as one sent to a node that no longer holds
/// its slot, or on a connection lost, would: to be sent again through
/// the cluster connection, which follows redirects and reconnects.
pub(crate) fn reroutes(e: &RedisError) -> bool {
    !matches!(e.retry_method(), redis::RetryMethod::NoRetry)
}

fn dropped() -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::BrokenPipe,
        "the pipeline carrying this command was dropped (runtime shutdown)",
    ))
}

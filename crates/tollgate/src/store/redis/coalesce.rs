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

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use redis::aio::{ConnectionLike, ConnectionManager};
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

/// A queue of commands in front of one standalone connection.
pub(crate) struct Coalescer {
    conn: ConnectionManager,
    queue: Mutex<Queue>,
    /// Commands sent and not yet answered.
    in_flight: AtomicUsize,
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

#[derive(Default)]
struct Queue {
    commands: Vec<Cmd>,
    waiters: Vec<oneshot::Sender<RedisResult<Value>>>,
    /// Whether a flush is spawned and has not yet taken the queue.
    scheduled: bool,
}

impl Coalescer {
    pub(crate) fn new(conn: ConnectionManager) -> Coalescer {
        Coalescer {
            conn,
            queue: Mutex::new(Queue::default()),
            in_flight: AtomicUsize::new(0),
            pipelines: AtomicU64::new(0),
            calls: AtomicU64::new(0),
        }
    }

    /// Sends `cmd`, at once or in the next pipeline, and waits for its
    /// reply.
    pub(crate) async fn query(self: &Arc<Self>, cmd: Cmd) -> RedisResult<Value> {
        let busy = self.in_flight.load(Ordering::Relaxed) >= QUEUE_FROM;
        let Some(runtime) = busy
            .then(tokio::runtime::Handle::try_current)
            .and_then(Result::ok)
        else {
            // Few commands in flight (or no runtime to run a flush): alone,
            // at once.
            self.in_flight.fetch_add(1, Ordering::Relaxed);
            let _sent = InFlight(&self.in_flight, 1);
            return cmd.query_async(&mut self.conn.clone()).await;
        };
        let (sender, receiver) = oneshot::channel();
        let first = {
            let mut queue = self.lock();
            queue.commands.push(cmd);
            queue.waiters.push(sender);
            !std::mem::replace(&mut queue.scheduled, true)
        };
        if first {
            runtime.spawn(self.clone().flush());
        }
        receiver.await.unwrap_or_else(|_| Err(dropped()))
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
        let (mut commands, mut waiters) = {
            let mut queue = self.lock();
            queue.scheduled = false;
            (
                std::mem::take(&mut queue.commands),
                std::mem::take(&mut queue.waiters),
            )
        };
        if commands.len() <= MAX_PIPELINE {
            self.send(commands, waiters).await;
            return;
        }
        let mut sends = Vec::new();
        while !commands.is_empty() {
            let rest = commands.split_off(commands.len().min(MAX_PIPELINE));
            let rest_waiters = waiters.split_off(commands.len());
            sends.push(self.send(commands, waiters));
            (commands, waiters) = (rest, rest_waiters);
        }
        futures_util::future::join_all(sends).await;
    }

    /// Sends one pipeline; each reply to its waiter.
    async fn send(&self, commands: Vec<Cmd>, waiters: Vec<oneshot::Sender<RedisResult<Value>>>) {
        let count = commands.len();
        self.in_flight.fetch_add(count, Ordering::Relaxed);
        let _sent = InFlight(&self.in_flight, count);
        self.pipelines.fetch_add(1, Ordering::Relaxed);
        self.calls.fetch_add(count as u64, Ordering::Relaxed);
        crate::metrics::record_pipeline(count);
        let mut pipeline = redis::Pipeline::with_capacity(count);
        for cmd in commands {
            pipeline.add_command(cmd);
        }
        let replies = self
            .conn
            .clone()
            .req_packed_commands(&pipeline, 0, count)
            .await
            .and_then(|replies| {
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
                for (waiter, reply) in waiters.into_iter().zip(replies) {
                    let _ = waiter.send(reply.extract_error());
                }
            }
            Err(e) => {
                for waiter in waiters {
                    let _ = waiter.send(Err(e.clone()));
                }
            }
        }
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

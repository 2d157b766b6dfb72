//! A flush's batch sent as pipelines of at most [`MAX_PIPELINE`] calls
//! (a group of window checks counting its checks), all at once, and each
//! reply handed to its caller.

use std::sync::atomic::Ordering;

use redis::{ErrorKind, RedisError, RedisResult, Value};

use super::{Batch, Coalescer, InFlight, Item, MAX_PIPELINE, Waiter, group, reroutes};

impl Coalescer {
    /// Sends a batch as pipelines; the error of a pipeline that failed
    /// whole on a cluster primary in a way that sends its calls again
    /// through the cluster connection (a primary's queue), if one did.
    pub(super) async fn send_batch(&self, batch: Batch) -> Option<RedisError> {
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

impl Batch {
    /// Answers every call of the batch with `e`, unsent.
    pub(super) fn fail(self, e: &RedisError) {
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
        match self {
            Route::One(waiter) => {
                let _ = waiter.send(reply.and_then(Value::extract_error));
            }
            Route::Group(waiters) => group::answer(waiters, reply),
        }
    }
}

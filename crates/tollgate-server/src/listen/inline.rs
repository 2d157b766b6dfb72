//! hyper's executor for HTTP/2 streams: a stream's future is polled once
//! where hyper hands it over, in the connection's task, and spawned as a
//! task of its own only if it is not finished by then.
//!
//! hyper gives every HTTP/2 stream (every gRPC call) to its executor as it
//! accepts it, after it has read every frame that had arrived, so a call
//! whose message came with its headers (most) has its body there already,
//! and a decision on the memory store never waits: polled once, the call
//! is answered, its frames queued, and the connection writes them with
//! whatever else it has to write when it goes on. Spawned (as
//! `TokioExecutor` does), each call cost a task: its allocation, its
//! registration in the runtime's list, a wake (often taken by the other
//! worker, a context switch) and a copy of the stream's future into it.
//!
//! A call that must wait (on Redis, say) has sent what it could in that
//! first poll and goes on in its task. On one connection that carries
//! many calls at once (as Envoy's does), the calls' decisions on the
//! memory store now run one after another in the connection's task, not
//! on either worker: measured, one connection with 64 calls in flight
//! answered as many a second as before (`benches/README.md`).
//!
//! The first poll has no task of its own to wake, so it is given a waker
//! that does nothing: a future that is not finished is then spawned, and
//! its task's first poll registers the task's own waker, seeing whatever
//! happened in between (a future is woken only to be polled again, and a
//! poll reads the state as it is). A panic in that first poll ends the
//! stream alone, as it does in a task: the future is dropped, which
//! resets the stream, and the connection goes on.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::task::{Context, Poll, Waker};

/// Polls each future once before spawning it on the current runtime.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AnswerInline;

impl<F> hyper::rt::Executor<F> for AnswerInline
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, future: F) {
        // Boxed before it is polled: it may not move afterwards, and its
        // task, if it needs one, takes the box.
        let mut future = Box::pin(future);
        let mut cx = Context::from_waker(Waker::noop());
        match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx))) {
            Ok(Poll::Ready(())) | Err(_) => {}
            Ok(Poll::Pending) => {
                tokio::spawn(future);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use hyper::rt::Executor;
    use tokio::sync::oneshot;

    use super::*;

    /// A future ready at once runs to its end inside `execute`; one that
    /// waits is finished by a task once what it waits for comes; one that
    /// panics is dropped, and the caller goes on.
    #[tokio::test]
    async fn a_ready_future_runs_inline_and_a_waiting_one_in_a_task() {
        let done = Arc::new(AtomicUsize::new(0));
        let d = done.clone();
        AnswerInline.execute(async move {
            d.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(done.load(Ordering::SeqCst), 1, "finished inside execute");

        let (send, receive) = oneshot::channel::<()>();
        let (finished, seen) = oneshot::channel::<()>();
        let d = done.clone();
        AnswerInline.execute(async move {
            receive.await.unwrap();
            d.fetch_add(1, Ordering::SeqCst);
            finished.send(()).unwrap();
        });
        assert_eq!(done.load(Ordering::SeqCst), 1, "still waiting");
        send.send(()).unwrap();
        seen.await.unwrap();
        assert_eq!(done.load(Ordering::SeqCst), 2);

        AnswerInline.execute(async { panic!("a stream's own failure") });
        let d = done.clone();
        AnswerInline.execute(async move {
            d.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(done.load(Ordering::SeqCst), 3, "the executor goes on");
    }
}

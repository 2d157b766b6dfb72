//! One limiter for a whole process: four workers share a partner API that
//! allows 20 calls a second with bursts of 5. Each worker waits its turn
//! with `acquire` (reserve, then sleep the wait) instead of failing.
//!
//! ```text
//! cargo run -p tollgate --example direct
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use tollgate::{DirectLimiter, Policy};

/// Calls each worker makes.
const CALLS_PER_WORKER: u32 = 5;
/// Workers sharing the limiter.
const WORKERS: u32 = 4;

/// Runs the workers; how long the 20 calls took in all. The first 5 go at
/// once (the burst), the other 15 one every 50 ms.
pub(crate) async fn run() -> tollgate::Result<Duration> {
    let partner = Arc::new(DirectLimiter::new(Policy::gcra(
        "partner-api",
        20,
        Duration::from_secs(1),
        5,
    )?));
    let start = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..WORKERS {
        let partner = Arc::clone(&partner);
        workers.push(tokio::spawn(async move {
            for call in 0..CALLS_PER_WORKER {
                // Waits at most 2 s for its turn; a denial would mean the
                // queue is longer than that.
                let decision = partner.acquire(1, Duration::from_secs(2)).await?;
                assert!(decision.allowed, "the queue never grows past 2 s here");
                println!(
                    "{:>6.3} s  worker {worker} call {call} (waited {:?})",
                    start.elapsed().as_secs_f64(),
                    decision.delay
                );
            }
            Ok::<(), tollgate::Error>(())
        }));
    }
    for worker in workers {
        worker.await.expect("a worker panicked")?;
    }
    Ok(start.elapsed())
}

#[tokio::main]
async fn main() -> tollgate::Result<()> {
    let took = run().await?;
    println!("{} calls in {took:.2?}", WORKERS * CALLS_PER_WORKER);
    Ok(())
}

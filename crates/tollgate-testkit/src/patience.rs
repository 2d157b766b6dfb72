//! How long tests wait, in one place: the machines they run on are shared
//! and loaded (CI runs on two cores beside other builds; a developer's
//! laptop compiles while it tests), so a task can stall for hundreds of
//! milliseconds at any moment, and a figure of elapsed time is never a
//! test's verdict. Timing goals are benchmarks (`crates/tollgate/benches`).

use std::time::Duration;

/// The one allowance a test adds to a latency bound that is a correctness
/// property (a call cut at its deadline instead of waiting for a fault to
/// end): sized for a loaded 2-core machine, where a ready task can wait
/// hundreds of milliseconds for a core. A bound with it must stay well
/// below what the broken behaviour would take (a fault held for 1.5 s or
/// more), so that the test still fails when the property does not hold.
pub const SLACK: Duration = Duration::from_secs(1);

/// How long a test polls for an event it expects (a breaker closing, a
/// reload seen, a background refund made) before it fails: far longer
/// than the event takes on any machine, so a timeout means the event did
/// not happen. Poll it; never sleep it.
pub const PATIENCE: Duration = Duration::from_secs(30);

//! Faults injected into real Redis servers under load, through a
//! `ResilientStore`: each test starts its own server, drives concurrent
//! callers on a hot key, injects the fault, and asserts the bounds: what
//! the instance admitted is at most what Redis admitted plus one local
//! share over every interval, no error reaches a caller, every call ends
//! within the deadline (with slack for a busy machine), and the breaker
//! closes again. Timings are printed, not asserted: run with
//! `--nocapture` to see one table row per scenario (the rows start with
//! `|`):
//!
//! ```text
//! cargo test -p tollgate --features redis --test faults -- --nocapture 2>&1 | grep '^|'
//! ```
//!
//! Columns: scenario | admitted for the hot key (store + fallback over the
//! fallback's span) | bound | slowest decision | fault to breaker open |
//! fault's end to breaker closed | times the breaker opened during the
//! fault | caller-visible errors of all calls.
#![cfg(feature = "redis")]

mod errors;
mod half_working;
mod outages;
mod startup;
mod support;

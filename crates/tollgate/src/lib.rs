#![doc = include_str!("../README.md")]

pub mod algorithm;
mod clock;
mod decision;
mod direct;
mod duration;
mod error;
mod key;
pub mod metrics;
pub mod overrides;
mod policy;
pub mod store;

pub use algorithm::{Algorithm, LeaseId, Usage};
pub use clock::{Clock, ManualClock, MonotonicClock, SystemClock};
pub use decision::{Decision, Source};
pub use direct::DirectLimiter;
pub use duration::{format_duration, parse_duration};
pub use error::{Error, Result, StoreErrorKind};
pub use key::{MAX_KEY_LEN, validate_key};
pub use policy::{MAX_POLICY_NAME_LEN, Policy};
pub use store::memory::{MemoryStore, MemoryStoreBuilder};
pub use store::{Lease, Request, Store, acquire};

//! One limit across regions: global fixed windows decided in the caller's
//! own region, with a stated bound on how far the global total can pass
//! the limit ([docs/regions.md] derives it and shows a setup end to end).
//!
//! ```no_run
//! # async fn run() -> tollgate::Result<()> {
//! use std::time::Duration;
//! use tollgate::store::redis::RedisStore;
//! use tollgate::store::redis::regions::{RegionalStore, Regions, Replicator};
//! use tollgate::{Policy, Store};
//!
//! // In region eu: its own Redis, and us's Redis to replicate into.
//! let regions = Regions::new("eu", ["us"])?.sync_interval(Duration::from_millis(100))?;
//! let local = RedisStore::builder(["redis://redis.eu.internal:6379"]).connect().await?;
//! let store = RegionalStore::new(local, regions, ["api"]);
//! let remotes = vec![RedisStore::builder(["rediss://:secret@redis.us.example:6380"])];
//! let replicator = Replicator::new(store.clone(), remotes)?;
//! tokio::spawn(async move { replicator.run().await });
//!
//! let api = Policy::fixed_window("api", 1000, Duration::from_secs(60))?;
//! let decision = store.check(&api, b"customer-42", 1).await?; // one local script
//! let view = store.view(&api, b"customer-42").await?; // every region's count here
//! # Ok(())
//! # }
//! ```
//!
//! Each region runs its own Redis (or Redis Cluster). A global policy's
//! window is a G-counter there: one component per region, under one key
//! per (policy, key, window) whose hash tag keeps every component in one
//! slot. A [`RegionalStore`] decides with one script on the local Redis
//! (`lua/region_window.lua`): it adds the cost to this region's component
//! only, and compares the sum of all components with the limit. It never
//! calls a remote region. A [`Replicator`] carries this region's
//! components to every other region's Redis every `sync_interval`, over
//! ordinary Redis connections, as max-merges (`lua/region_merge.lua`): a
//! replay never double counts.
//!
//! **The bound.** In any window, with `R` regions, the global total is at
//! most `limit + Σ_{j ≠ i*} a_j(Δ)`, where `i*` is the region whose
//! admission in the window came last and `a_j(Δ)` is what region `j`
//! admitted in the last `Δ` before it; `Δ`, the staleness of one region's
//! view of another, is at most `sync_interval` plus one replication round
//! (a local read and a remote round trip) while the links are up, and
//! never more than `partition_after` plus those before a region notices.
//! So at a steady rate of `r` per region, the excess is at most
//! `(R − 1) · r · Δ`.
//!
//! **Under a partition** (a remote region's components here are older
//! than `partition_after`, or ours could not reach it for as long), a
//! region keeps deciding alone but caps its own component at its share,
//! `floor(limit / R)`: a window lived wholly in a partition admits at most
//! `R · floor(limit / R) ≤ limit` in all. When the link heals the next
//! rounds carry every component the partition held back, and all regions
//! see the same sums again.
//!
//! Only fixed windows of a fixed length can be global: see
//! [docs/regions.md] for why buckets and calendar windows are refused.
//!
//! [docs/regions.md]: https://github.com/tollgate-rs/tollgate/blob/main/docs/regions.md

mod keys;
mod link;
mod pending;
mod replicator;
mod settings;
mod store;

pub use self::link::LinkStats;
pub use self::replicator::{Replicator, Round};
pub use self::settings::{MAX_REGIONS, Regions};
pub use self::store::{RegionView, RegionalStore};

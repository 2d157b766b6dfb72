#![doc = include_str!("../README.md")]

mod body;
mod estimate;
pub mod extract;
mod future;
pub mod headers;
mod key;
mod layer;
mod lease;
mod limit;
mod limiter;
mod mode;
mod rejection;
mod service;
mod settle;
mod usage;

pub use body::ResponseBody;
pub use future::ResponseFuture;
pub use key::{Key, KeyError, KeyExtractor};
pub use layer::{RateLimitLayer, RateLimitLayerBuilder};
pub use mode::{CheckMode, ResponseFormat};
pub use rejection::QUOTA_EXCEEDED;
pub use service::RateLimit;
pub use usage::Usage;

//! The resource Envoy Gateway pushes: `ratelimit.config.ratelimit.v3.RateLimitConfig`,
//! declared by hand with the field numbers of ERL's
//! `api/ratelimit/config/ratelimit/v3/rls_conf.proto`, so that nothing runs
//! protoc at build time.
//!
//! The messages mirror the YAML: one config per domain, a tree of
//! descriptors, each with an optional policy. The unit is an enum whose
//! numbers are those of Envoy's rate limit response (`WEEK` is 7).

use envoy_types::pb::google::protobuf::Struct;

/// The type URL of the resource, in `Any` and in discovery requests.
pub(crate) const TYPE_URL: &str =
    "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

/// One domain's config; `name` stands where a file name stands in errors.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RateLimitConfig {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(string, tag = "2")]
    pub(crate) domain: String,
    #[prost(message, repeated, tag = "3")]
    pub(crate) descriptors: Vec<RateLimitDescriptor>,
}

/// One descriptor of the tree.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RateLimitDescriptor {
    #[prost(string, tag = "1")]
    pub(crate) key: String,
    #[prost(string, tag = "2")]
    pub(crate) value: String,
    #[prost(message, optional, tag = "3")]
    pub(crate) rate_limit: Option<RateLimitPolicy>,
    #[prost(message, repeated, tag = "4")]
    pub(crate) descriptors: Vec<RateLimitDescriptor>,
    #[prost(bool, tag = "5")]
    pub(crate) shadow_mode: bool,
    #[prost(bool, tag = "6")]
    pub(crate) detailed_metric: bool,
    #[prost(bool, tag = "7")]
    pub(crate) quota_mode: bool,
    /// Returned as dynamic metadata (`RESPONSE_DYNAMIC_METADATA`).
    #[prost(message, optional, tag = "8")]
    pub(crate) metadata: Option<Struct>,
}

/// A descriptor's limit.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RateLimitPolicy {
    /// A `RateLimitUnit` number: UNKNOWN 0, SECOND 1, MINUTE 2, HOUR 3,
    /// DAY 4, MONTH 5, YEAR 6, WEEK 7.
    #[prost(int32, tag = "1")]
    pub(crate) unit: i32,
    #[prost(uint32, tag = "2")]
    pub(crate) requests_per_unit: u32,
    #[prost(bool, tag = "3")]
    pub(crate) unlimited: bool,
    #[prost(string, tag = "4")]
    pub(crate) name: String,
    #[prost(message, repeated, tag = "5")]
    pub(crate) replaces: Vec<RateLimitReplace>,
}

/// A rule this one replaces, by name.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RateLimitReplace {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
}

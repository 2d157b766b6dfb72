//! ERL mode: tollgate as a drop-in for envoyproxy/ratelimit ("ERL"): its
//! YAML config, its matching and counting, its Redis keys, its endpoints and
//! its environment.
//!
//! One concept per file. The config: `yaml` (the document with raw scalar
//! text), `keys` and `decode` (ERL's two passes over a file), `config`
//! (the checked descriptor trees), `files` (one file or a directory),
//! `error` (an error with its file and line), `xds` (the config pushed by
//! an xDS server instead of files), `reload` (the files and their
//! reloading). A call: `matcher` (a request descriptor's rule), `metric`
//! (the stats key when the config asks for request values), `window`
//! (units and epoch-aligned windows), `key` (ERL's Redis key), `counter`
//! and `redis` (the counters: pipelined `INCRBY` + `EXPIRE`), `policy`
//! (rules decided by a tollgate policy through `crate::decide`, the
//! `tollgate_policy` extension), `local_cache` (`LOCAL_CACHE_SIZE_IN_BYTES`),
//! `service` (one `ShouldRateLimit` call as ERL answers it, in steps:
//! match, count, answer) and `matched` (its first step: a call's
//! descriptors matched, `replaces` applied), `settings` (what every call
//! shares), `headers` (ERL's or the IETF fields), `metadata` (the
//! answer's dynamic metadata), `stats` (ERL's stats as Prometheus
//! counters). The service: `env` and `redis_env` (ERL's environment and
//! its Redis variables), `state` (what the endpoints share), `grpc`,
//! `http` and `json` (the endpoints, `/json`'s protojson), `serve` (the
//! whole mode) and `stores` (its counters and the policies' store).
//! `tests/` spans the files.

mod config;
mod counter;
mod decode;
mod env;
mod error;
mod files;
mod grpc;
mod headers;
mod http;
mod json;
mod key;
mod keys;
mod local_cache;
mod matched;
mod matcher;
mod metadata;
mod metric;
mod policy;
mod redis;
mod redis_env;
mod reload;
pub(crate) mod serve;
mod service;
mod settings;
mod state;
mod stats;
mod stores;
mod window;
mod xds;
mod yaml;

#[cfg(test)]
pub(crate) mod tests;

#[cfg(test)]
pub(crate) use config::Limit;
pub(crate) use config::{ErlConfig, PolicyLookup};
pub(crate) use files::{load, parse as parse_files};
#[cfg(test)]
pub(crate) use window::Unit;
pub(crate) use xds::{TYPE_URL as XDS_TYPE_URL, from_resources as from_xds_resources};

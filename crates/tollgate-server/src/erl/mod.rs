//! ERL mode: tollgate as a drop-in for envoyproxy/ratelimit ("ERL"): its
//! YAML config, its matching and counting, its Redis keys, its endpoints and
//! its environment.
//!
//! One concept per file: `yaml` (the document with raw scalar text),
//! `keys` and `decode` (ERL's two passes over a file), `config` (the
//! checked descriptor trees), `files` (one file or a directory),
//! `matcher` (a request descriptor's rule), `window` (units and
//! epoch-aligned windows), `error`, `xds` (the config pushed by an xDS
//! server instead of files).

mod config;
mod counter;
mod decode;
mod env;
mod error;
mod files;
mod grpc;
mod http;
mod json;
mod key;
mod keys;
mod matcher;
mod metadata;
mod metric;
mod redis;
mod redis_env;
pub(crate) mod serve;
mod service;
mod state;
mod stats;
mod window;
mod xds;
mod yaml;

#[cfg(test)]
mod tests;

pub(crate) use config::ErlConfig;
#[cfg(test)]
pub(crate) use config::Limit;
pub(crate) use error::ConfigError;
pub(crate) use files::load;
#[cfg(test)]
pub(crate) use window::Unit;

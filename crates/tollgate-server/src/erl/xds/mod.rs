//! ERL's xDS config source (`CONFIG_TYPE=GRPC_XDS_SOTW`), the way Envoy
//! Gateway configures ERL: `RateLimitConfig` resources pushed over an ADS
//! stream instead of files.
//!
//! `proto` (the resource's messages), `convert` (resources into the
//! checked config, through the YAML path's records and checks), `client`
//! (the stream: ACK, NACK, reconnect), `settings` (ERL's variables for it),
//! `tests` (against a stand-in ADS server).

mod client;
mod convert;
mod proto;
mod settings;

#[cfg(test)]
mod tests;

pub(crate) use client::run;
pub(crate) use convert::config as from_resources;
pub(crate) use proto::TYPE_URL;
pub(crate) use settings::{XdsSettings, read};

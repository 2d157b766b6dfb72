//! What `tollgate serve`'s command line puts over the config file.

use std::net::SocketAddr;

use crate::config::Config;
use crate::grpc_tls::TlsFile;

/// What the command line says over the config file, on start and on every
/// reload (so that a reload compares like with like).
#[derive(Debug, Clone)]
pub(super) struct Overrides {
    pub(super) redis: Vec<String>,
    pub(super) redis_sentinel: Vec<String>,
    pub(super) redis_master_name: Option<String>,
    pub(super) require_redis: bool,
    pub(super) token: Option<String>,
    pub(super) admin_token: Option<String>,
    pub(super) grpc_listen: Option<SocketAddr>,
    /// `--grpc-tls-cert`, `--grpc-tls-key`, `--grpc-tls-client-ca`.
    pub(super) grpc_tls: [Option<TlsFile>; 3],
    pub(super) shadow: bool,
    /// `--max-connections`.
    pub(super) max_connections: Option<usize>,
}

impl Overrides {
    /// Puts the command line over `config`; an error when the Sentinel
    /// flags and the file do not make a whole (sentinels and a master
    /// name).
    pub(super) fn apply(&self, config: &mut Config) -> Result<(), String> {
        if !self.redis.is_empty() {
            config.store.urls = self.redis.clone();
            config.store.master_name = None;
        }
        if !self.redis_sentinel.is_empty() {
            config.store.urls = self.redis_sentinel.clone();
            config.store.master_name = self
                .redis_master_name
                .clone()
                .or(config.store.master_name.take());
            if config.store.master_name.is_none() {
                return Err(
                    "--redis-sentinel needs --redis-master-name (or `master_name` under [store])"
                        .into(),
                );
            }
        } else if let Some(name) = &self.redis_master_name {
            if config.store.master_name.is_none() {
                return Err(
                    "--redis-master-name needs --redis-sentinel (or `sentinels` under [store])"
                        .into(),
                );
            }
            config.store.master_name = Some(name.clone());
        }
        if self.require_redis {
            config.store.require_at_startup = true;
        }
        if self.token.is_some() {
            config.server.token = self.token.clone();
        }
        if self.admin_token.is_some() {
            config.server.admin_token = self.admin_token.clone();
        }
        if self.grpc_listen.is_some() {
            config.server.grpc_listen = self.grpc_listen;
        }
        let [cert, key, ca] = &self.grpc_tls;
        let server = &mut config.server;
        for (flag, field) in [
            (cert, &mut server.grpc_tls_cert),
            (key, &mut server.grpc_tls_key),
            (ca, &mut server.grpc_tls_client_ca),
        ] {
            if flag.is_some() {
                field.clone_from(flag);
            }
        }
        if let Some(n) = self.max_connections {
            config.server.connections.max_connections = n;
        }
        if self.shadow {
            for policy in &mut config.policies.policies {
                *policy = policy.clone().shadow();
            }
        }
        Ok(())
    }
}

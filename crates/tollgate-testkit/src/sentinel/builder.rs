//! How a [`RedisSentinel`] topology is set up and started.

use super::*;

/// Options for [`RedisSentinel`]; create with [`RedisSentinel::builder`].
#[derive(Debug, Clone)]
pub struct SentinelBuilder {
    pub(super) replicas: usize,
    pub(super) sentinels: usize,
    pub(super) down_after: Duration,
    pub(super) master_name: String,
    pub(super) password: Option<String>,
}

impl SentinelBuilder {
    /// How many replicas the master has (default 1).
    pub fn replicas(mut self, replicas: usize) -> Self {
        self.replicas = replicas;
        self
    }

    /// How many `redis-sentinel` processes watch it (default 3; the quorum
    /// is a majority of them).
    pub fn sentinels(mut self, sentinels: usize) -> Self {
        self.sentinels = sentinels;
        self
    }

    /// `sentinel down-after-milliseconds` (default [`DEFAULT_DOWN_AFTER`]).
    pub fn down_after(mut self, down_after: Duration) -> Self {
        self.down_after = down_after;
        self
    }

    /// The name the sentinels know the master by (default
    /// [`DEFAULT_MASTER_NAME`]).
    pub fn master_name(mut self, name: &str) -> Self {
        self.master_name = name.to_owned();
        self
    }

    /// Makes the master and its replicas require `password`
    /// (`requirepass`, and `masterauth` for replication); the sentinels
    /// know it (`sentinel auth-pass`) and need none themselves.
    pub fn password(mut self, password: &str) -> Self {
        self.password = Some(password.to_owned());
        self
    }

    /// Starts the master, its replicas (waiting for their replication
    /// links), then the sentinels, and waits until every sentinel knows
    /// the master, its replicas and the other sentinels.
    ///
    /// # Panics
    ///
    /// If no sentinel is asked for, a process does not start, or the
    /// topology does not settle in time.
    pub fn start(self) -> RedisSentinel {
        assert!(self.sentinels >= 1, "at least one sentinel is needed");
        let mut data_args: Vec<String> = ["--repl-diskless-sync-delay", "0"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        if let Some(password) = &self.password {
            data_args.extend([
                "--requirepass".to_owned(),
                password.clone(),
                "--masterauth".to_owned(),
                password.clone(),
            ]);
        }
        let master = RedisServer::launch("sentinel-data", data_args.clone(), &mut || {
            (util::free_port(), Vec::new())
        });
        let mut nodes = vec![master];
        for _ in 0..self.replicas {
            let mut args = data_args.clone();
            args.extend([
                "--replicaof".to_owned(),
                "127.0.0.1".to_owned(),
                nodes[0].port().to_string(),
            ]);
            nodes.push(RedisServer::launch("sentinel-data", args, &mut || {
                (util::free_port(), Vec::new())
            }));
        }
        let quorum = self.sentinels / 2 + 1;
        let name = &self.master_name;
        let mut config = format!(
            "sentinel monitor {name} 127.0.0.1 {} {quorum}\n\
             sentinel down-after-milliseconds {name} {}\n\
             sentinel failover-timeout {name} {}\n\
             sentinel parallel-syncs {name} 1\n",
            nodes[0].port(),
            self.down_after.as_millis().max(1),
            FAILOVER_TIMEOUT.as_millis(),
        );
        if let Some(password) = &self.password {
            config.push_str(&format!("sentinel auth-pass {name} {password}\n"));
        }
        let sentinels = (0..self.sentinels)
            .map(|_| {
                RedisServer::launch_program(
                    "sentinel",
                    Program::Sentinel(config.clone()),
                    Vec::new(),
                    &mut || (util::free_port(), Vec::new()),
                )
            })
            .collect();
        let topology = RedisSentinel {
            master_name: self.master_name,
            password: self.password,
            nodes,
            sentinels,
            down_after: self.down_after,
        };
        topology.wait_until_stable();
        topology
    }
}

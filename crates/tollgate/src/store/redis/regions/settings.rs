//! The regions' settings: this region's name, the others', how often to
//! replicate and when a remote region counts as partitioned.

use std::time::Duration;

use super::super::algorithm;
use crate::{Error, Policy, Result};

/// The most regions (this one included).
pub const MAX_REGIONS: usize = 16;

/// The longest region name, in bytes.
const MAX_NAME_LEN: usize = 64;

/// Which regions there are and how they keep in step; see the
/// [module docs](super).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Regions {
    name: String,
    remotes: Vec<String>,
    sync_interval: Duration,
    partition_after: Duration,
    max_pending: usize,
}

impl Regions {
    /// This region `name` and the `remotes`' names: 1 to 64 bytes of
    /// `A-Z a-z 0-9 _ - .` each, all different, at most [`MAX_REGIONS`] in
    /// all. Replicates every 100 ms; a remote region is partitioned after
    /// 1 s without news; at most 100,000 keys wait for replication.
    pub fn new<I, S>(name: &str, remotes: I) -> Result<Regions>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let remotes: Vec<String> = remotes.into_iter().map(Into::into).collect();
        check_name("name", name)?;
        for remote in &remotes {
            check_name("remotes", remote)?;
        }
        if remotes.is_empty() {
            return Err(Error::argument(
                "remotes",
                "must name at least one other region",
            ));
        }
        if remotes.len() + 1 > MAX_REGIONS {
            return Err(Error::argument(
                "remotes",
                format!(
                    "at most {MAX_REGIONS} regions in all, got {}",
                    remotes.len() + 1
                ),
            ));
        }
        for (i, remote) in remotes.iter().enumerate() {
            if remote == name || remotes[..i].contains(remote) {
                return Err(Error::argument(
                    "remotes",
                    format!("region {remote:?} is named twice"),
                ));
            }
        }
        Ok(Regions {
            name: name.to_owned(),
            remotes,
            sync_interval: Duration::from_millis(100),
            partition_after: Duration::from_secs(1),
            max_pending: 100_000,
        })
    }

    /// How often the replicator carries this region's components to the
    /// others: 1 ms to 1 h.
    pub fn sync_interval(mut self, every: Duration) -> Result<Regions> {
        if every < Duration::from_millis(1) || every > Duration::from_secs(3600) {
            return Err(Error::argument(
                "sync_interval",
                format!("must be 1ms to 1h, got {every:?}"),
            ));
        }
        self.sync_interval = every;
        Ok(self)
    }

    /// How old a remote region's news may grow (its components here, or
    /// our last round that reached it) before this region decides as
    /// partitioned from it: at least twice the sync interval.
    pub fn partition_after(mut self, after: Duration) -> Result<Regions> {
        if after < self.sync_interval * 2 || after > Duration::from_secs(86_400) {
            return Err(Error::argument(
                "partition_after",
                format!(
                    "must be at least twice sync_interval ({:?}) and at most 1d, got {after:?}",
                    self.sync_interval
                ),
            ));
        }
        self.partition_after = after;
        Ok(self)
    }

    /// How many keys may wait for replication at once (1 to 10^7); a key
    /// that finds no room is decided as under a partition.
    pub fn max_pending(mut self, keys: usize) -> Result<Regions> {
        if keys == 0 || keys > 10_000_000 {
            return Err(Error::argument(
                "max_pending",
                format!("must be 1 to 10000000, got {keys}"),
            ));
        }
        self.max_pending = keys;
        Ok(self)
    }

    /// This region's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The other regions' names, in the order given.
    pub fn remotes(&self) -> &[String] {
        &self.remotes
    }

    /// How many regions there are, this one included.
    pub fn count(&self) -> u64 {
        self.remotes.len() as u64 + 1
    }

    /// See [`sync_interval`](Self::sync_interval).
    pub fn interval(&self) -> Duration {
        self.sync_interval
    }

    /// See [`partition_after`](Self::partition_after).
    pub fn partition_threshold(&self) -> Duration {
        self.partition_after
    }

    /// See [`max_pending`](Self::max_pending).
    pub fn pending_capacity(&self) -> usize {
        self.max_pending
    }

    /// What a region may admit alone under a partition: `floor(limit / R)`.
    pub fn share(&self, limit: u64) -> u64 {
        limit / self.count()
    }

    /// Whether `policy` can be global: a fixed window of a fixed length
    /// (not a calendar window), not leased; otherwise why not.
    pub fn supports(policy: &Policy) -> Result<()> {
        match Self::unsupported_reason(policy) {
            None => Ok(()),
            Some(_) => Err(Error::Unsupported {
                operation: "global (multi-region) limit",
                algorithm: policy.algorithm().name(),
            }),
        }
    }

    /// Why `policy` cannot be global, in words, or `None` when it can.
    pub fn unsupported_reason(policy: &Policy) -> Option<&'static str> {
        algorithm::global(policy).err()
    }
}

fn check_name(field: &'static str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        let shown: String = name.chars().take(MAX_NAME_LEN).collect();
        Err(Error::argument(
            field,
            format!(
                "a region name is 1 to {MAX_NAME_LEN} bytes of A-Z a-z 0-9 _ - ., got {shown:?}"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(Regions::new("eu", ["us"]).is_ok());
        assert!(Regions::new("eu", Vec::<String>::new()).is_err());
        assert!(Regions::new("eu", ["eu"]).is_err());
        assert!(Regions::new("eu", ["us", "us"]).is_err());
        assert!(Regions::new("e:u", ["us"]).is_err());
        assert!(Regions::new("", ["us"]).is_err());
        let many: Vec<String> = (0..MAX_REGIONS).map(|i| format!("r{i}")).collect();
        assert!(Regions::new("eu", many).is_err());
    }

    #[test]
    fn settings_are_bounded() {
        let r = Regions::new("eu", ["us", "ap"]).unwrap();
        assert_eq!(r.share(1000), 333);
        let r = r.sync_interval(Duration::from_millis(500)).unwrap();
        assert!(
            r.clone()
                .partition_after(Duration::from_millis(900))
                .is_err()
        );
        assert!(r.clone().partition_after(Duration::from_secs(1)).is_ok());
        assert!(r.clone().sync_interval(Duration::ZERO).is_err());
        assert!(r.max_pending(0).is_err());
    }

    #[test]
    fn only_fixed_length_windows_can_be_global() {
        let w = Policy::fixed_window("w", 10, Duration::from_secs(60)).unwrap();
        assert!(Regions::unsupported_reason(&w).is_none());
        assert!(Regions::supports(&w).is_ok());
        let b = Policy::token_bucket("b", 10, Duration::from_secs(1), 10).unwrap();
        assert!(Regions::unsupported_reason(&b).is_some());
        assert!(Regions::supports(&b).is_err());
        let leased = w.with_lease(true).unwrap();
        assert!(Regions::unsupported_reason(&leased).is_some());
    }
}

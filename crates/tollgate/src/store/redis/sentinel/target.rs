//! Where the sentinels are and which master they watch: the
//! `redis+sentinel://` URL form, or sentinel URLs and a master name, and
//! the master's credentials.
//!
//! Accepted URL form, the one several clients share (Python's
//! `redis+sentinel` URLs, Prefect, RedisVL):
//!
//! ```text
//! redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master_name[/db][?sentinel_username=..&sentinel_password=..]
//! rediss+sentinel://...            (TLS to the sentinels and the master; `#insecure` skips certificate checks)
//! ```
//!
//! The user and password are the master's (and its replicas'), the port
//! defaults to 26379, and the sentinels' own credentials, when they have
//! any, go in the query.

use redis::sentinel::SentinelNodeConnectionInfo;
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo, TlsMode};

use crate::{Error, Result};

/// Sentinels listen on 26379 unless told otherwise.
const DEFAULT_SENTINEL_PORT: u16 = 26379;

/// The sentinels, the master's name, and how to reach the master.
#[derive(Debug, Clone)]
pub(crate) struct SentinelTarget {
    pub(super) sentinels: Vec<ConnectionInfo>,
    pub(super) master_name: String,
    pub(super) node: SentinelNodeConnectionInfo,
}

/// The master's credentials (from [`RedisStoreBuilder::master_auth`]).
///
/// [`RedisStoreBuilder::master_auth`]: crate::store::redis::RedisStoreBuilder::master_auth
#[derive(Clone, Default)]
pub(crate) struct MasterAuth {
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) db: i64,
}

impl std::fmt::Debug for MasterAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MasterAuth")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("db", &self.db)
            .finish()
    }
}

pub(super) fn bad(message: impl Into<String>) -> Error {
    Error::argument("urls", message.into())
}

/// Whether `url` is in the `redis+sentinel://` form.
pub(crate) fn is_sentinel_url(url: &str) -> bool {
    let lower = url.get(..18).unwrap_or(url).to_ascii_lowercase();
    lower.starts_with("redis+sentinel://") || lower.starts_with("rediss+sentinel://")
}

impl SentinelTarget {
    /// The sentinels at `urls` (`redis://` or `rediss://`, each with the
    /// sentinel's own credentials, if any), watching `master_name`; the
    /// master is reached with `auth`, over TLS when the sentinels are (in
    /// the same mode).
    pub(crate) fn new(urls: &[String], master_name: &str, auth: MasterAuth) -> Result<Self> {
        if urls.is_empty() {
            return Err(bad("Redis Sentinel needs at least one sentinel URL"));
        }
        if master_name.is_empty() {
            return Err(Error::argument("master_name", "must not be empty"));
        }
        let sentinels = urls
            .iter()
            .map(|u| {
                u.as_str().into_connection_info().map_err(|e| {
                    bad(format!(
                        "invalid sentinel URL: {}",
                        e.detail().unwrap_or("unparsable")
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let tls = sentinels.iter().find_map(|s| match s.addr() {
            ConnectionAddr::TcpTls { insecure, .. } => Some(if *insecure {
                TlsMode::Insecure
            } else {
                TlsMode::Secure
            }),
            _ => None,
        });
        Ok(SentinelTarget {
            sentinels,
            master_name: master_name.to_owned(),
            node: node_info(tls, &auth),
        })
    }

    /// Parses the `redis+sentinel://` form (see the module's docs).
    pub(crate) fn parse(url: &str) -> Result<Self> {
        let (tls, rest) = match url.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("redis+sentinel") => (false, rest),
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("rediss+sentinel") => (true, rest),
            _ => return Err(bad("not a redis+sentinel:// URL")),
        };
        let (rest, insecure) = match rest.strip_suffix("#insecure") {
            Some(rest) => (rest, true),
            None => (rest, false),
        };
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let Some((authority, path)) = rest.split_once('/') else {
            return Err(bad(
                "a redis+sentinel:// URL names the master after the hosts: redis+sentinel://host:26379/mymaster",
            ));
        };
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (Some(userinfo), hosts),
            None => (None, authority),
        };
        let mut auth = MasterAuth::default();
        if let Some(userinfo) = userinfo {
            let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
            auth.username = Some(decode(user, "user")?).filter(|u| !u.is_empty());
            auth.password = Some(decode(password, "password")?).filter(|p| !p.is_empty());
        }
        let mut parts = path.split('/');
        let master_name = decode(parts.next().unwrap_or(""), "master name")?;
        if master_name.is_empty() {
            return Err(bad(
                "a redis+sentinel:// URL needs the master name after the hosts",
            ));
        }
        if let Some(db) = parts.next().filter(|d| !d.is_empty()) {
            auth.db = db.parse().map_err(|_| {
                bad(format!(
                    "a redis+sentinel:// URL's database must be a number, got {db:?}"
                ))
            })?;
        }
        if parts.next().is_some() {
            return Err(bad("a redis+sentinel:// URL's path is /master_name[/db]"));
        }
        let (mut sentinel_user, mut sentinel_password) = (None, None);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "sentinel_username" => sentinel_user = Some(decode(value, key)?),
                "sentinel_password" => sentinel_password = Some(decode(value, key)?),
                other => {
                    return Err(bad(format!(
                        "unknown redis+sentinel:// option {other:?} (known: sentinel_username, sentinel_password)"
                    )));
                }
            }
        }
        let scheme = if tls { "rediss" } else { "redis" };
        let fragment = if insecure { "#insecure" } else { "" };
        let mut sentinel_auth = RedisConnectionInfo::default();
        if let Some(user) = &sentinel_user {
            sentinel_auth = sentinel_auth.set_username(user);
        }
        if let Some(password) = &sentinel_password {
            sentinel_auth = sentinel_auth.set_password(password);
        }
        let mut sentinels = Vec::new();
        for host in hosts.split(',') {
            let has_port = host
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && !p.contains(']'));
            let address = if has_port {
                host.to_owned()
            } else {
                format!("{host}:{DEFAULT_SENTINEL_PORT}")
            };
            if host.is_empty() || host.starts_with(':') {
                return Err(bad("a redis+sentinel:// URL has an empty host"));
            }
            let info = format!("{scheme}://{address}/{fragment}")
                .into_connection_info()
                .map_err(|e| {
                    bad(format!(
                        "invalid sentinel address {address:?}: {}",
                        e.detail().unwrap_or("unparsable")
                    ))
                })?
                .set_redis_settings(sentinel_auth.clone());
            sentinels.push(info);
        }
        let mode = tls.then_some(if insecure {
            TlsMode::Insecure
        } else {
            TlsMode::Secure
        });
        Ok(SentinelTarget {
            sentinels,
            master_name,
            node: node_info(mode, &auth),
        })
    }
}

fn node_info(tls: Option<TlsMode>, auth: &MasterAuth) -> SentinelNodeConnectionInfo {
    let mut redis = RedisConnectionInfo::default().set_db(auth.db);
    if let Some(user) = &auth.username {
        redis = redis.set_username(user);
    }
    if let Some(password) = &auth.password {
        redis = redis.set_password(password);
    }
    let node = SentinelNodeConnectionInfo::default().set_redis_connection_info(redis);
    match tls {
        Some(mode) => node.set_tls_mode(mode),
        None => node,
    }
}

/// Percent-decoding of one URL part; `what` names it in the error.
fn decode(part: &str, what: &str) -> Result<String> {
    let bytes = part.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = part
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    bad(format!(
                        "a bad %-escape in the redis+sentinel:// URL's {what}"
                    ))
                })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map_err(|_| bad(format!("the redis+sentinel:// URL's {what} is not UTF-8")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(t: &SentinelTarget) -> Vec<String> {
        t.sentinels.iter().map(|s| s.addr().to_string()).collect()
    }

    #[test]
    fn parses_the_sentinel_url_form() {
        let t =
            SentinelTarget::parse("redis+sentinel://:p%40ss@10.0.0.1,10.0.0.2:26380/mymaster/2")
                .unwrap();
        assert_eq!(hosts(&t), ["10.0.0.1:26379", "10.0.0.2:26380"]);
        assert_eq!(t.master_name, "mymaster");
        let debug = format!("{:?}", t.node);
        assert!(debug.contains("db: 2"), "{debug}");
        let t = SentinelTarget::parse(
            "REDIS+SENTINEL://u:p@[::1]:26379/m?sentinel_username=s&sentinel_password=x",
        )
        .unwrap();
        assert_eq!(t.master_name, "m");
        assert_eq!(t.sentinels.len(), 1);
        assert!(is_sentinel_url("rediss+sentinel://h/m"));
        assert!(!is_sentinel_url("redis://h/"));
    }

    #[test]
    fn bad_sentinel_urls_say_what_is_wrong() {
        for (url, says) in [
            ("redis+sentinel://h1,h2", "names the master"),
            ("redis+sentinel://h1/", "needs the master name"),
            ("redis+sentinel://h1/m/x", "must be a number"),
            ("redis+sentinel://h1/m/1/2", "path is"),
            ("redis+sentinel://h1,/m", "empty host"),
            (
                "redis+sentinel://h1/m?timeout=1",
                "unknown redis+sentinel:// option \"timeout\"",
            ),
            ("redis+sentinel://:%zz@h1/m", "%-escape"),
        ] {
            let e = SentinelTarget::parse(url).unwrap_err().to_string();
            assert!(e.contains(says), "{url}: {e}");
            assert!(!e.contains("zz"), "no secret echoed: {e}");
        }
    }
}

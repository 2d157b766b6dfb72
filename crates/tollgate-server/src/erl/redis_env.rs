//! ERL's Redis variables (`src/settings/settings.go`, the URL forms of
//! `src/redis/driver_impl.go`): where ERL mode keeps its counters.
//!
//! `REDIS_TYPE` is `single` (one `host:port`, or a socket path with
//! `REDIS_SOCKET_TYPE=unix`), `cluster` (comma-separated seed nodes) or
//! `sentinel`: `REDIS_URL` is then the master's name and at least one
//! sentinel, `mastername,host1:port1,host2:port2`. `REDIS_AUTH`
//! (`password` or `user:password`) is the master's, or every node's;
//! `REDIS_SENTINEL_AUTH`, in the same form, the sentinels' own; `REDIS_TLS`
//! puts TLS on every connection, the sentinels' included, as ERL does.

/// Where ERL mode counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RedisTarget {
    /// One server (one URL, or one `redis+sentinel://` URL from `--redis`)
    /// or a cluster's seed nodes.
    Urls(Vec<String>),
    /// The master the sentinels know as `master_name`.
    Sentinel {
        master_name: String,
        /// `redis://` or `rediss://`, each with the sentinels' credentials.
        sentinels: Vec<String>,
        user: Option<String>,
        password: Option<String>,
    },
}

impl RedisTarget {
    /// For the start-up line: no credentials.
    pub(crate) fn describe(&self) -> String {
        match self {
            RedisTarget::Urls(urls) => format!("redis ({})", crate::store::redact(&urls[0])),
            RedisTarget::Sentinel {
                master_name,
                sentinels,
                ..
            } => format!(
                "redis sentinel (master {master_name:?}, {} sentinels, first {})",
                sentinels.len(),
                crate::store::redact(&sentinels[0])
            ),
        }
    }
}

/// Reads `REDIS_URL` and the variables that say how to reach it; `None`
/// without `REDIS_URL`. Errors are pushed to `errors`.
pub(crate) fn read<'a>(
    get: impl Fn(&str) -> Option<&'a str>,
    tls: bool,
    insecure: bool,
    errors: &mut Vec<String>,
) -> Option<RedisTarget> {
    let url = get("REDIS_URL").filter(|v| !v.is_empty())?;
    let value =
        |name: &str, default: &'a str| get(name).filter(|v| !v.is_empty()).unwrap_or(default);
    let auth = value("REDIS_AUTH", "");
    let socket = value("REDIS_SOCKET_TYPE", "tcp");
    let redis_type = value("REDIS_TYPE", "single").to_ascii_lowercase();
    let tcp = |u: &str, auth: &str| redis_url(u.trim(), auth, tls, insecure);
    // ERL gives the socket type to a single server only; cluster nodes
    // and sentinels are always reached over TCP.
    let target = match (redis_type.as_str(), socket) {
        ("sentinel", _) => {
            let mut parts = url.split(',').map(str::trim);
            let master_name = parts.next().unwrap_or("");
            let sentinels: Vec<&str> = parts.collect();
            if master_name.is_empty()
                || sentinels.is_empty()
                || sentinels.iter().any(|s| s.is_empty())
            {
                errors.push(format!(
                    "REDIS_URL={url}: with REDIS_TYPE=sentinel, the master's name and the sentinels: mastername,host1:port1,host2:port2"
                ));
                return None;
            }
            let sentinel_auth = value("REDIS_SENTINEL_AUTH", "");
            let (user, password) = match auth.split_once(':') {
                _ if auth.is_empty() => (None, None),
                Some((user, password)) => (Some(user.to_string()), Some(password.to_string())),
                None => (None, Some(auth.to_string())),
            };
            RedisTarget::Sentinel {
                master_name: master_name.to_string(),
                sentinels: sentinels.iter().map(|s| tcp(s, sentinel_auth)).collect(),
                user,
                password,
            }
        }
        ("cluster", _) => RedisTarget::Urls(url.split(',').map(|u| tcp(u, auth)).collect()),
        ("single", "unix") => RedisTarget::Urls(vec![format!("redis+unix://{url}")]),
        ("single", "tcp") => RedisTarget::Urls(vec![tcp(url, auth)]),
        ("single", other) => {
            errors.push(format!("REDIS_SOCKET_TYPE={other}: not tcp or unix"));
            return None;
        }
        (other, _) => {
            errors.push(format!(
                "REDIS_TYPE={other}: not single, cluster or sentinel"
            ));
            return None;
        }
    };
    Some(target)
}

/// ERL's `host:port` (with its `user:password` or `password` and
/// `REDIS_TLS`) as a Redis URL.
fn redis_url(host_port: &str, auth: &str, tls: bool, insecure: bool) -> String {
    let scheme = if tls { "rediss" } else { "redis" };
    let credentials = match auth.split_once(':') {
        _ if auth.is_empty() => String::new(),
        Some((user, password)) => format!("{}:{}@", encode(user), encode(password)),
        None => format!(":{}@", encode(auth)),
    };
    let fragment = if tls && insecure { "#insecure" } else { "" };
    format!("{scheme}://{credentials}{host_port}{fragment}")
}

/// Percent-encodes all but unreserved characters.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(vars: &[(&str, &str)], tls: bool) -> Result<Option<RedisTarget>, Vec<String>> {
        let get = |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
        let mut errors = Vec::new();
        let t = read(get, tls, false, &mut errors);
        if errors.is_empty() {
            Ok(t)
        } else {
            Err(errors)
        }
    }

    #[test]
    fn sentinel_takes_the_master_name_then_the_sentinels() {
        let t = target(
            &[
                ("REDIS_TYPE", "SENTINEL"),
                ("REDIS_URL", "mymaster, s1:26379,s2:26380"),
                ("REDIS_AUTH", "app:p@ss"),
                ("REDIS_SENTINEL_AUTH", "sentinel-pw"),
                // sentinels are reached over TCP whatever this says, as in ERL
                ("REDIS_SOCKET_TYPE", "unix"),
            ],
            true,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            t,
            RedisTarget::Sentinel {
                master_name: "mymaster".to_string(),
                sentinels: vec![
                    "rediss://:sentinel-pw@s1:26379".to_string(),
                    "rediss://:sentinel-pw@s2:26380".to_string()
                ],
                user: Some("app".to_string()),
                password: Some("p@ss".to_string()),
            }
        );
        assert!(!t.describe().contains("sentinel-pw"), "{}", t.describe());
        for bad in ["mymaster", "mymaster,", ",s1:26379", "m,s1:1,,s2:2"] {
            let e = target(&[("REDIS_TYPE", "sentinel"), ("REDIS_URL", bad)], false).unwrap_err();
            assert!(e[0].contains("mastername,host1:port1"), "{bad}: {e:?}");
        }
    }

    #[test]
    fn single_and_cluster_urls() {
        let one = target(&[("REDIS_URL", "r:6379"), ("REDIS_AUTH", "u:p")], false);
        assert_eq!(
            one.unwrap(),
            Some(RedisTarget::Urls(vec!["redis://u:p@r:6379".into()]))
        );
        let unix = target(
            &[("REDIS_URL", "/run/r.sock"), ("REDIS_SOCKET_TYPE", "unix")],
            false,
        );
        assert_eq!(
            unix.unwrap(),
            Some(RedisTarget::Urls(vec!["redis+unix:///run/r.sock".into()]))
        );
        assert_eq!(target(&[], false).unwrap(), None);
        let e = target(&[("REDIS_URL", "r:1"), ("REDIS_TYPE", "ring")], false).unwrap_err();
        assert_eq!(e, ["REDIS_TYPE=ring: not single, cluster or sentinel"]);
    }
}

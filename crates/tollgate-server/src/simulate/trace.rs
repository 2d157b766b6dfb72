//! The requests a simulation replays, read from a trace file: the CSV trace
//! (`t_ms,policy,key,cost`) or an access log (see [`access_log`]).
//!
//! [`access_log`]: super::access_log

use std::collections::HashSet;
use std::sync::Arc;

use indicatif::ProgressBar;

use tollgate::MAX_KEY_LEN;

use super::access_log;
use super::log_line::{KeySpec, LogFormat, TimeCache};
use crate::config::{PolicySet, clip_message, excerpt};

/// The file formats `--trace` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// `t_ms,policy,key,cost`, one request a line, in time order.
    Csv,
    /// nginx's and Apache's combined (or common) access log.
    Combined,
    /// One JSON object a line with a timestamp field (Envoy's JSON access
    /// log, nginx `escape=json`, …).
    Json,
}

impl Format {
    /// The format a file's name or first line shows: `.csv` is a CSV trace,
    /// a line starting with `{` a JSON-lines log, anything else a combined
    /// log.
    pub(crate) fn detect(file: &str, text: &str) -> Format {
        if file.ends_with(".csv") {
            return Format::Csv;
        }
        match without_bom(text).lines().find(|l| !l.trim().is_empty()) {
            Some(l) if l.trim().starts_with('{') => Format::Json,
            Some(l) if l.trim() == CSV_HEADER => Format::Csv,
            _ => Format::Combined,
        }
    }
}

const CSV_HEADER: &str = "t_ms,policy,key,cost";

/// The largest trace read (the requests are held in memory).
pub(crate) const MAX_TRACE_BYTES: u64 = 1 << 30;

/// The largest time a CSV trace may give: its microseconds fit 64 bits.
const MAX_T_MS: u64 = u64::MAX / 1_000;

/// `text` without the byte-order mark some editors put at its start.
fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// One request under one policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    /// Microseconds since the epoch (or since the trace's zero).
    pub(crate) t_us: u64,
    /// The policy's index in the file.
    pub(crate) policy: usize,
    pub(crate) key: Arc<str>,
    pub(crate) cost: u64,
}

/// What a log's lines are replayed against: a CSV trace names the policy
/// on each line instead.
#[derive(Debug, Clone)]
pub(crate) struct LogRoute {
    pub(crate) format: LogFormat,
    pub(crate) key: KeySpec,
    /// Every line goes to each of these policies.
    pub(crate) policies: Vec<usize>,
    /// The JSON field holding the time, when not one of the usual names.
    pub(crate) time_field: Option<String>,
}

/// The requests of a trace, in time order.
#[derive(Debug, Default)]
pub(crate) struct Trace {
    pub(crate) requests: Vec<Request>,
    /// Times are wall-clock times (a log), not offsets from zero (a CSV
    /// trace), so plots label them as times of day.
    pub(crate) absolute: bool,
    /// Lines skipped by `--skip-bad-lines`, and the first one's error.
    pub(crate) skipped: usize,
    pub(crate) first_skipped: Option<String>,
    /// Log lines whose time was before an earlier line's (logs are written
    /// when requests end); the trace is sorted by time.
    pub(crate) out_of_order: usize,
}

/// Reads the trace `text` of the file named `file` (for messages). A bad
/// line is an error naming the file, line and field, unless `skip_bad`
/// counts it instead.
pub(crate) fn read(
    file: &str,
    text: &str,
    route: Option<&LogRoute>,
    policies: &PolicySet,
    skip_bad: bool,
    progress: &ProgressBar,
) -> Result<Trace, String> {
    let mut trace = Trace {
        absolute: route.is_some(),
        ..Trace::default()
    };
    let mut keys = Interner::default();
    let mut lines = without_bom(text).lines().enumerate();
    if route.is_none() {
        match lines.next() {
            Some((_, header)) if header.trim() == CSV_HEADER => {}
            Some((_, header)) => {
                return Err(format!(
                    "{file}:1: the header must be `{CSV_HEADER}`, got `{}`",
                    excerpt(&header.escape_debug().to_string())
                ));
            }
            None => {
                return Err(format!(
                    "{file}:1: the trace is empty; it needs the header `{CSV_HEADER}`"
                ));
            }
        }
    }
    let mut times = TimeCache::default();
    let mut last = 0;
    let mut read_bytes = 0u64;
    for (i, line) in lines {
        let n = i + 1;
        read_bytes += line.len() as u64 + 1;
        if n.is_multiple_of(16_384) {
            progress.set_position(read_bytes);
        }
        if line.trim().is_empty() {
            continue;
        }
        let parsed = match route {
            None => csv_line(line, last, policies).map(|(t_us, policy, key, cost)| {
                last = t_us;
                let key = keys.get(key);
                trace.requests.push(Request {
                    t_us,
                    policy,
                    key,
                    cost,
                });
            }),
            Some(route) => access_log::parse_line(
                route.format,
                line,
                &route.key,
                route.time_field.as_deref(),
                &mut times,
            )
            .and_then(|(t_us, key)| {
                if key.len() > MAX_KEY_LEN {
                    return Err(format!(
                        "the key is {} bytes long; the maximum is {MAX_KEY_LEN}",
                        key.len()
                    ));
                }
                if t_us < last {
                    trace.out_of_order += 1;
                }
                last = last.max(t_us);
                let key = keys.get(&key);
                for &policy in &route.policies {
                    trace.requests.push(Request {
                        t_us,
                        policy,
                        key: key.clone(),
                        cost: 1,
                    });
                }
                Ok(())
            }),
        };
        if let Err(message) = parsed {
            let message = format!("{file}:{n}: {}", clip_message(&message));
            if !skip_bad {
                return Err(message);
            }
            trace.skipped += 1;
            trace.first_skipped.get_or_insert(message);
        }
    }
    progress.set_position(read_bytes);
    if trace.out_of_order > 0 {
        // Stable, so one line's requests under several policies keep their
        // order.
        trace.requests.sort_by_key(|r| r.t_us);
    }
    Ok(trace)
}

/// One line of a CSV trace: time (µs), policy index, key, cost. Time may
/// not go back: a CSV trace is written by hand or by a script, so a line
/// out of order is a mistake. Numbers are digits only (no sign, no
/// spaces); the policy and key are trimmed.
fn csv_line<'a>(
    line: &'a str,
    last: u64,
    policies: &PolicySet,
) -> Result<(u64, usize, &'a str, u64), String> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let fields: Vec<&str> = line.split(',').collect();
    let [t, policy, key, cost] = fields[..] else {
        return Err(format!(
            "expected 4 fields `{CSV_HEADER}`, got {} in `{}`",
            fields.len(),
            excerpt(line)
        ));
    };
    let (policy, key) = (policy.trim(), key.trim());
    let t_ms = number(t).ok_or_else(|| {
        format!(
            "field `t_ms` must be a non-negative integer of milliseconds (digits only), got `{}`",
            excerpt(t)
        )
    })?;
    if t_ms > MAX_T_MS {
        return Err(format!(
            "field `t_ms` must be at most {MAX_T_MS} (its microseconds fit 64 bits), got {t_ms}"
        ));
    }
    let t_us = t_ms * 1_000;
    if t_us < last {
        return Err(format!(
            "field `t_ms`: time goes backwards: {t} is before the previous line's {}",
            last / 1_000
        ));
    }
    let Some(index) = policies.policies.iter().position(|p| p.name() == policy) else {
        return Err(format!(
            "field `policy`: unknown policy `{}`",
            excerpt(policy)
        ));
    };
    if key.is_empty() {
        return Err("field `key` is empty".to_string());
    }
    if key.len() > MAX_KEY_LEN {
        return Err(format!(
            "field `key` is {} bytes long; the maximum is {MAX_KEY_LEN}",
            key.len()
        ));
    }
    let cost = number(cost).ok_or_else(|| {
        format!(
            "field `cost` must be a non-negative integer (digits only), got `{}`",
            excerpt(cost)
        )
    })?;
    Ok((t_us, index, key, cost))
}

/// A number written as digits only (`u64::from_str` also takes `+3`);
/// `None` when it is not one or does not fit 64 bits.
fn number(field: &str) -> Option<u64> {
    if field.is_empty() || !field.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    field.parse().ok()
}

/// One shared copy of each key: a log repeats its clients on many lines.
#[derive(Debug, Default)]
struct Interner(HashSet<Arc<str>>);

impl Interner {
    fn get(&mut self, key: &str) -> Arc<str> {
        if let Some(k) = self.0.get(key) {
            return k.clone();
        }
        let k: Arc<str> = key.into();
        self.0.insert(k.clone());
        k
    }
}

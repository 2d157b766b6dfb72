//! Access logs as traces: nginx's and Apache's combined (or common) format
//! (`combined_log.rs`) and JSON lines (`json_log.rs`: Envoy's JSON access
//! log, or any JSON object a line with a timestamp field), read with the
//! pieces both share (`log_line.rs`: `--key`, which picks what a line is
//! limited by, and the timestamp cache).

use super::log_line::{KeySpec, LogFormat, TimeCache};
use super::{combined_log, json_log};

/// One log line's time (µs since the epoch) and key. The error names the
/// field.
pub(crate) fn parse_line(
    format: LogFormat,
    line: &str,
    key: &KeySpec,
    time_field: Option<&str>,
    times: &mut TimeCache,
) -> Result<(u64, String), String> {
    match format {
        LogFormat::Combined => combined_log::parse_line(line, key, times),
        LogFormat::Json => json_log::parse_line(line, key, time_field, times),
    }
}

//! `tollgate simulate`: replay a trace on a manual clock.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::PathBuf;

use tollgate::{Decision, ManualClock, MemoryStore, Policy};

use crate::config::{self, PolicySet};

/// Replays a trace of requests against the policies of a file, on a virtual
/// clock, and prints every decision as CSV.
#[derive(Debug, clap::Args)]
pub(crate) struct SimulateArgs {
    /// The policy file (`[[policy]]` tables).
    #[arg(long)]
    config: PathBuf,
    /// The trace: CSV with header `t_ms,policy,key,cost`.
    #[arg(long)]
    trace: PathBuf,
    /// Print, per policy, the requests, admitted, denied and the largest
    /// cost admitted in any interval of one window, instead of every decision.
    #[arg(long)]
    summary: bool,
    /// Replay on Redis instead of in memory (client-time mode, under a fresh
    /// key prefix). Repeat to name a cluster's seed nodes.
    #[arg(
        long = "redis",
        value_name = "URL",
        env = "TOLLGATE_REDIS",
        value_delimiter = ','
    )]
    redis: Vec<String>,
}

/// One line of the trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TraceLine {
    pub(crate) t_ms: u64,
    pub(crate) policy: String,
    pub(crate) key: String,
    pub(crate) cost: u64,
}

/// Reads a trace, checking every line; the error names the file and line.
pub(crate) fn parse_trace(
    file: &str,
    text: &str,
    policies: &PolicySet,
) -> Result<Vec<TraceLine>, String> {
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, header)) if header.trim() == "t_ms,policy,key,cost" => {}
        Some((_, header)) => {
            return Err(format!(
                "{file}:1: the header must be `t_ms,policy,key,cost`, got `{header}`"
            ));
        }
        None => {
            return Err(format!(
                "{file}:1: the trace is empty; it needs the header `t_ms,policy,key,cost`"
            ));
        }
    }
    let mut out = Vec::new();
    let mut last = 0;
    for (i, line) in lines {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let [t, policy, key, cost] = fields[..] else {
            return Err(format!(
                "{file}:{n}: expected 4 fields `t_ms,policy,key,cost`, got {} in `{line}`",
                fields.len()
            ));
        };
        let t_ms: u64 = t.parse().map_err(|_| {
            format!("{file}:{n}: field `t_ms` must be a non-negative integer, got `{t}`")
        })?;
        if t_ms < last {
            return Err(format!(
                "{file}:{n}: time goes backwards: t_ms {t_ms} is before the previous line's {last}"
            ));
        }
        last = t_ms;
        if policies.get(policy).is_none() {
            return Err(format!("{file}:{n}: unknown policy `{policy}`"));
        }
        if key.is_empty() {
            return Err(format!("{file}:{n}: field `key` is empty"));
        }
        let cost: u64 = cost.parse().map_err(|_| {
            format!("{file}:{n}: field `cost` must be a non-negative integer, got `{cost}`")
        })?;
        out.push(TraceLine {
            t_ms,
            policy: policy.to_string(),
            key: key.to_string(),
            cost,
        });
    }
    Ok(out)
}

/// The answer to one line: a decision or an error code.
pub(crate) type Outcome = Result<Decision, tollgate::Error>;

/// Replays `trace` on a fresh memory store with a manual clock.
pub(crate) fn replay_memory(policies: &PolicySet, trace: &[TraceLine]) -> Vec<Outcome> {
    let clock = ManualClock::new(0);
    let store = MemoryStore::with_clock(clock.clone());
    trace
        .iter()
        .map(|line| {
            clock.set(line.t_ms * 1_000);
            let policy = policies.get(&line.policy).expect("checked by parse_trace");
            store.check_sync(policy, line.key.as_bytes(), line.cost)
        })
        .collect()
}

fn ms_up(d: std::time::Duration) -> u128 {
    d.as_micros().div_ceil(1_000)
}

/// Writes the decisions as CSV.
pub(crate) fn write_csv(
    out: &mut impl Write,
    trace: &[TraceLine],
    outcomes: &[Outcome],
) -> io::Result<()> {
    writeln!(
        out,
        "t_ms,policy,key,cost,allowed,remaining,retry_after_ms,reset_after_ms,delay_ms,error"
    )?;
    for (line, outcome) in trace.iter().zip(outcomes) {
        let TraceLine {
            t_ms,
            policy,
            key,
            cost,
        } = line;
        match outcome {
            Ok(d) => writeln!(
                out,
                "{t_ms},{policy},{key},{cost},{},{},{},{},{},",
                d.allowed,
                d.remaining,
                ms_up(d.retry_after),
                ms_up(d.reset_after),
                ms_up(d.delay)
            )?,
            Err(e) => writeln!(out, "{t_ms},{policy},{key},{cost},false,,,,,{}", e.code())?,
        }
    }
    Ok(())
}

/// Per policy: requests, admitted, denied, and the largest cost admitted in
/// any half-open interval of one window (or one `per`).
pub(crate) fn write_summary(
    out: &mut impl Write,
    policies: &PolicySet,
    trace: &[TraceLine],
    outcomes: &[Outcome],
) -> io::Result<()> {
    writeln!(
        out,
        "policy,algorithm,requests,admitted,denied,max_admitted_in_window,window"
    )?;
    let mut by_policy: BTreeMap<&str, Vec<(&TraceLine, &Outcome)>> = BTreeMap::new();
    for (line, outcome) in trace.iter().zip(outcomes) {
        by_policy
            .entry(&line.policy)
            .or_default()
            .push((line, outcome));
    }
    for policy in &policies.policies {
        let rows = by_policy.get(policy.name()).map_or(&[][..], |v| &v[..]);
        let admitted: Vec<(u64, u64)> = rows
            .iter()
            .filter(|(_, o)| matches!(o, Ok(d) if d.allowed))
            .map(|(l, _)| (l.t_ms * 1_000, l.cost))
            .collect();
        writeln!(
            out,
            "{},{},{},{},{},{},{}",
            policy.name(),
            policy.algorithm().name(),
            rows.len(),
            admitted.len(),
            rows.len() - admitted.len(),
            max_in_window(&admitted, policy),
            tollgate::format_duration(policy.window()),
        )?;
    }
    Ok(())
}

/// The largest sum of costs in any interval `[t, t + window)`, over
/// admissions sorted by time (µs).
fn max_in_window(admitted: &[(u64, u64)], policy: &Policy) -> u64 {
    let window = policy.window().as_micros() as u64;
    let (mut best, mut sum, mut end) = (0, 0, 0);
    for (start, &(t, _)) in admitted.iter().enumerate() {
        while end < admitted.len() && admitted[end].0 < t + window {
            sum += admitted[end].1;
            end += 1;
        }
        best = best.max(sum);
        sum -= admitted[start].1;
    }
    best
}

/// Replays `trace` on Redis in client-time mode, under a fresh key prefix
/// that is deleted afterwards (every key also carries its own TTL).
pub(crate) async fn replay_redis(
    urls: &[String],
    policies: &PolicySet,
    trace: &[TraceLine],
) -> Result<Vec<Outcome>, tollgate::Error> {
    use std::sync::Arc;
    use tollgate::Store;
    use tollgate::store::redis::{RedisStore, TimeSource};

    let clock = ManualClock::new(0);
    let prefix = format!("tollgate-sim:{:016x}:", fastrand::u64(..));
    let store = RedisStore::builder(urls.iter().cloned())
        .prefix(prefix)
        .time_source(TimeSource::Client(Arc::new(clock.clone())))
        .connect()
        .await?;
    let mut outcomes = Vec::with_capacity(trace.len());
    for line in trace {
        clock.set(line.t_ms * 1_000);
        let policy = policies.get(&line.policy).expect("checked by parse_trace");
        let outcome = store.check(policy, line.key.as_bytes(), line.cost).await;
        if let Err(e @ tollgate::Error::Store { .. }) = &outcome {
            return Err(e.clone());
        }
        outcomes.push(outcome);
    }
    for line in trace {
        let policy = policies.get(&line.policy).expect("checked by parse_trace");
        store.reset(policy, line.key.as_bytes()).await?;
    }
    Ok(outcomes)
}

/// Runs the subcommand; bad input is exit code 2.
pub(crate) fn run(args: SimulateArgs) -> i32 {
    let policies = match config::load(&args.config) {
        Ok(p) => p,
        Err(errors) => {
            for e in errors {
                eprintln!("error: {e}");
            }
            return 2;
        }
    };
    let trace_name = args.trace.display().to_string();
    let text = match std::fs::read_to_string(&args.trace) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {trace_name}: cannot read the file: {e}");
            return 2;
        }
    };
    let trace = match parse_trace(&trace_name, &text, &policies) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let outcomes = if args.redis.is_empty() {
        replay_memory(&policies, &trace)
    } else {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: cannot start the async runtime: {e}");
                return 1;
            }
        };
        match runtime.block_on(replay_redis(&args.redis, &policies, &trace)) {
            Ok(o) => o,
            Err(e) => {
                eprintln!("error: Redis: {e}");
                return 1;
            }
        }
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let written = if args.summary {
        write_summary(&mut out, &policies, &trace, &outcomes)
    } else {
        write_csv(&mut out, &trace, &outcomes)
    };
    match written.and_then(|_| out.flush()) {
        Ok(()) => 0,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("error: writing the output: {e}");
            1
        }
    }
}

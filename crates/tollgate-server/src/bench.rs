//! `tollgate bench`: drives a running service's `POST /v1/check` from
//! several keep-alive connections and reports decisions per second and
//! latency percentiles; with `--timeline`, writes every decision's times
//! and answer to a file (see [`Record`]).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use clap::Args;
use hdrhistogram::Histogram;
use http_body_util::BodyExt;
use indicatif::{ProgressBar, ProgressStyle};
use tollgate::parse_duration;

use crate::client;

/// Arguments of `tollgate bench`.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// The service.
    #[arg(long, env = "TOLLGATE_URL", default_value = "http://127.0.0.1:8080")]
    url: String,
    /// The policy to check.
    #[arg(long, default_value = "books")]
    policy: String,
    /// How many distinct keys the requests cycle through.
    #[arg(long, default_value_t = 1000)]
    keys: u64,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// How long to run (`10s`, `1m`).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// The cost of each check.
    #[arg(long, default_value_t = 1)]
    cost: u64,
    /// The bearer token, if the service wants one.
    #[arg(long, env = "TOLLGATE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Writes every decision to FILE, a line each: `A` (allowed) or `D`
    /// (denied), the Unix time in µs the request was sent and its answer
    /// received, the answer's `reset_after_ms` and `source`; first a line
    /// `# start END` with the run's own times (µs).
    #[arg(long, value_name = "FILE")]
    timeline: Option<PathBuf>,
}

/// One decision of a `--timeline`: when it was sent and answered (µs since
/// the run started), and what the answer said.
#[derive(Debug, Clone, Copy)]
struct Record {
    sent: u64,
    received: u64,
    allowed: bool,
    reset_after_ms: u64,
    /// The first letter of the answer's `source` (`l`ease, `s`tore,
    /// `c`ache, `f`allback), `?` when it has none.
    source: u8,
}

impl Record {
    /// The record of an answer `body` (a `/v1/check` JSON object).
    fn new(sent: u64, received: u64, allowed: bool, body: &[u8]) -> Record {
        let reset_after_ms = field(body, b"\"reset_after_ms\":")
            .map(|v| {
                v.iter()
                    .take_while(|c| c.is_ascii_digit())
                    .fold(0u64, |n, c| n.saturating_mul(10) + u64::from(c - b'0'))
            })
            .unwrap_or(0);
        let source = field(body, b"\"source\":\"")
            .and_then(|v| v.first().copied())
            .unwrap_or(b'?');
        Record {
            sent,
            received,
            allowed,
            reset_after_ms,
            source,
        }
    }
}

/// What follows `name` in `body`, if it is there.
fn field<'a>(body: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    body.windows(name.len())
        .position(|w| w == name)
        .map(|at| &body[at + name.len()..])
}

#[derive(Debug, Default)]
struct Counts {
    allowed: AtomicU64,
    denied: AtomicU64,
    errors: AtomicU64,
}

/// Prints the figures; exit 0, or 2 when no request succeeded.
pub(crate) fn run(args: BenchArgs) -> i32 {
    let authority = match client::authority(&args.url) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    if args.connections == 0 || args.keys == 0 {
        eprintln!("error: --connections and --keys must be at least 1");
        return 2;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    // Made before the run, so that a path that cannot be written fails
    // at once.
    let mut timeline = match &args.timeline {
        None => None,
        Some(path) => match std::fs::File::create(path) {
            Ok(f) => Some(std::io::BufWriter::new(f)),
            Err(e) => {
                eprintln!("error: --timeline {}: {e}", path.display());
                return 2;
            }
        },
    };
    let args = Arc::new(args);
    let counts = Arc::new(Counts::default());
    let epoch = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    let started = Instant::now();
    let histograms = runtime.block_on(async {
        let bar = ProgressBar::new(args.duration.as_secs().max(1));
        bar.set_style(
            ProgressStyle::with_template("{spinner} {elapsed}/{len}s {bar:30} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let tasks: Vec<_> = (0..args.connections)
            .map(|c| {
                let (args, counts, authority) = (args.clone(), counts.clone(), authority.clone());
                tokio::spawn(
                    async move { connection(c, &args, &authority, &counts, started).await },
                )
            })
            .collect();
        while started.elapsed() < args.duration {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let done =
                counts.allowed.load(Ordering::Relaxed) + counts.denied.load(Ordering::Relaxed);
            bar.set_position(started.elapsed().as_secs());
            bar.set_message(format!(
                "{:.0} decisions/s",
                done as f64 / started.elapsed().as_secs_f64()
            ));
        }
        bar.finish_and_clear();
        let mut all = Vec::new();
        for t in tasks {
            if let Ok(h) = t.await {
                all.push(h);
            }
        }
        all
    });
    let elapsed = started.elapsed().as_secs_f64();
    let mut total = Histogram::<u64>::new(3).expect("a histogram");
    let mut records = Vec::new();
    for (h, r) in histograms {
        let _ = total.add(h);
        records.extend(r);
    }
    if let (Some(out), Some(path)) = (timeline.as_mut(), &args.timeline) {
        let end = epoch + started.elapsed().as_micros() as u64;
        if let Err(e) = write_timeline(out, epoch, end, &mut records) {
            eprintln!("error: --timeline {}: {e}", path.display());
            return 2;
        }
    }
    let (allowed, denied, errors) = (
        counts.allowed.load(Ordering::Relaxed),
        counts.denied.load(Ordering::Relaxed),
        counts.errors.load(Ordering::Relaxed),
    );
    let us = |q: f64| total.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "{:.0} decisions/s over {elapsed:.1} s with {} connections ({allowed} allowed, {denied} denied, {errors} errors)",
        (allowed + denied) as f64 / elapsed,
        args.connections
    );
    println!(
        "latency µs: p50 {:.0}  p99 {:.0}  p999 {:.0}  max {:.0}",
        us(0.5),
        us(0.99),
        us(0.999),
        total.max() as f64 / 1000.0
    );
    if allowed + denied == 0 { 2 } else { 0 }
}

/// Writes the `--timeline`: the run's times, then the decisions in the
/// order they were received, times as Unix µs.
fn write_timeline(
    out: &mut impl Write,
    epoch: u64,
    end: u64,
    records: &mut [Record],
) -> std::io::Result<()> {
    records.sort_unstable_by_key(|r| r.received);
    writeln!(out, "# {epoch} {end}")?;
    for r in records.iter() {
        writeln!(
            out,
            "{} {} {} {} {}",
            if r.allowed { 'A' } else { 'D' },
            epoch + r.sent,
            epoch + r.received,
            r.reset_after_ms,
            char::from(r.source)
        )?;
    }
    out.flush()
}

/// One keep-alive connection sending checks until the time is up; the
/// latencies it saw, in ns, and with `--timeline` its decisions.
async fn connection(
    c: usize,
    args: &BenchArgs,
    authority: &str,
    counts: &Counts,
    started: Instant,
) -> (Histogram<u64>, Vec<Record>) {
    let mut latencies = Histogram::<u64>::new(3).expect("a histogram");
    let mut records = Vec::new();
    let mut n = c as u64;
    while started.elapsed() < args.duration {
        let Ok(mut sender) = client::connect(authority).await else {
            counts.errors.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        while started.elapsed() < args.duration {
            let body = format!(
                "{{\"policy\":{},\"key\":\"bench-{}\",\"cost\":{}}}",
                serde_json::Value::from(args.policy.as_str()),
                n % args.keys,
                args.cost
            );
            n += args.connections as u64;
            let Ok(request) = client::check_request(authority, args.token.as_deref(), body) else {
                counts.errors.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let t = Instant::now();
            let response = match sender.send_request(request).await {
                Ok(r) => r,
                Err(_) => {
                    counts.errors.fetch_add(1, Ordering::Relaxed);
                    break;
                }
            };
            let status = response.status().as_u16();
            let body = response.into_body().collect().await;
            let _ = latencies.record(t.elapsed().as_nanos() as u64);
            if args.timeline.is_some()
                && matches!(status, 200 | 429)
                && let Ok(body) = body
            {
                let micros = |i: Instant| i.duration_since(started).as_micros() as u64;
                let body = body.to_bytes();
                records.push(Record::new(
                    micros(t),
                    micros(Instant::now()),
                    status == 200,
                    &body,
                ));
            }
            match status {
                200 => counts.allowed.fetch_add(1, Ordering::Relaxed),
                429 => counts.denied.fetch_add(1, Ordering::Relaxed),
                _ => counts.errors.fetch_add(1, Ordering::Relaxed),
            };
        }
    }
    (latencies, records)
}

//! `tollgate simulate`: replay a trace (a CSV of requests, or an access
//! log) against the policies of a file on a manual clock, and print every
//! decision, a summary, the keys denied most, or a plot; in memory, on
//! Redis, or as several regions sharing each limit.
//!
//! `trace.rs` reads a trace (CSV, or an access log: `access_log.rs`, with
//! `combined_log.rs` and `json_log.rs` one format each and `log_line.rs`
//! what they share, `--key` among it) into time-ordered
//! requests; `replay.rs` decides them on memory or Redis on a manual
//! clock; `regions.rs` models several regions sharing each limit;
//! `report.rs` gathers what is printed; `plot/` draws it.
//!
//! Over 400 lines: the subcommand's arguments with their help, and the one
//! flow that reads, replays and reports, read best as one.

mod access_log;
mod combined_log;
mod json_log;
mod log_line;
mod plot;
mod regions;
mod replay;
mod report;
mod trace;

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::config::{self, PolicySet};
use log_line::{KeySpec, LogFormat};
use report::{Bins, Outcome, Tally};
pub(crate) use trace::Format;
use trace::{LogRoute, Request, Trace};

/// Replays a trace of requests against the policies of a file, on a virtual
/// clock, and prints every decision as CSV (or a summary, the keys denied
/// most, or a plot).
#[derive(Debug, clap::Args)]
pub(crate) struct SimulateArgs {
    /// The policy file (`[[policy]]` tables).
    #[arg(long)]
    config: PathBuf,
    /// The trace: a CSV with header `t_ms,policy,key,cost`, an nginx or
    /// Apache combined access log, or JSON lines (Envoy's JSON access log,
    /// or any JSON object a line with a timestamp field).
    #[arg(long)]
    trace: PathBuf,
    /// The trace's format; by default `.csv` files are CSV traces, a file
    /// whose first line starts with `{` is JSON lines, and any other is a
    /// combined log.
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// For a log: the policy every line is checked against.
    #[arg(long, value_name = "NAME")]
    policy: Option<String>,
    /// For a log: what a line is limited by: `client` (its address),
    /// `path`, `path:N` (the first N segments), `field:NAME` (a JSON field,
    /// `a.b` nested) or `header:NAME` (a header the log records); several,
    /// comma-separated, make one key.
    #[arg(long, value_name = "KEY", default_value = "client")]
    key: KeySpec,
    /// For a JSON-lines log: the field holding the request's time (RFC 3339
    /// or seconds since the epoch); by default the first of `start_time`,
    /// `timestamp`, `time`, `@timestamp`, `ts`, `time_iso8601`.
    #[arg(long, value_name = "FIELD")]
    time_field: Option<String>,
    /// Count bad lines and report them on stderr instead of stopping at
    /// the first.
    #[arg(long)]
    skip_bad_lines: bool,
    /// Print, per policy, the requests, admitted, denied and the largest
    /// cost admitted in any interval of one window, instead of every decision.
    #[arg(long)]
    summary: bool,
    /// Print the N keys denied most, with their counts, instead of every
    /// decision.
    #[arg(long, value_name = "N")]
    top: Option<usize>,
    /// Draw what each policy did into an .svg or .png file, instead of
    /// printing every decision.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Draw every policy in one panel over the same trace; with a log,
    /// check every line against every policy of the file.
    #[arg(long)]
    compare: bool,
    /// Replay on Redis instead of in memory (client-time mode, under a fresh
    /// key prefix). Repeat to name a cluster's seed nodes.
    #[arg(
        long = "redis",
        value_name = "URL",
        env = "TOLLGATE_REDIS",
        value_delimiter = ','
    )]
    redis: Vec<String>,
    /// Replay as N regions sharing each policy's limit (docs/regions.md):
    /// requests dealt to them round-robin in time order; with `--summary`,
    /// each policy's worst excess over its limit beside the docs' bound
    /// (on stderr otherwise). Fixed windows of a fixed length only.
    #[arg(long, value_name = "N",
        value_parser = clap::value_parser!(u16).range(2..=tollgate::store::redis::regions::MAX_REGIONS as i64))]
    regions: Option<u16>,
    /// With `--regions`: how often each region sends its counts to the
    /// others (as `[regions] sync_interval`; 100ms by default).
    #[arg(long, value_name = "DURATION", value_parser = tollgate::parse_duration)]
    sync_interval: Option<Duration>,
    /// With `--regions`: the time a region's counts take to reach another,
    /// one way (0 by default).
    #[arg(long, value_name = "DURATION", value_parser = tollgate::parse_duration)]
    link_latency: Option<Duration>,
}

/// A failure: bad input (exit 2) or a failure while running (exit 1).
enum Failure {
    Input(String),
    Run(String),
}

/// Runs the subcommand; bad input is exit code 2.
pub(crate) fn run(args: SimulateArgs) -> i32 {
    match simulate(&args) {
        Ok(()) => 0,
        Err(Failure::Input(message)) => {
            eprintln!("error: {message}");
            2
        }
        Err(Failure::Run(message)) => {
            eprintln!("error: {message}");
            1
        }
    }
}

fn simulate(args: &SimulateArgs) -> Result<(), Failure> {
    let policies = config::load(&args.config).map_err(|errors| {
        Failure::Input(
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\nerror: "),
        )
    })?;
    if let Some(path) = &args.plot {
        plot::ImageFormat::of(path).map_err(Failure::Input)?;
    }
    let trace_name = args.trace.display().to_string();
    let text = config::read_text(&args.trace, trace::MAX_TRACE_BYTES, "traces").map_err(|e| {
        Failure::Input(match e.line {
            0 => format!("{trace_name}: {}", e.message),
            line => format!("{trace_name}:{line}: {}", e.message),
        })
    })?;
    let format = args
        .format
        .unwrap_or_else(|| Format::detect(&trace_name, &text));
    let route = log_route(args, format, &policies).map_err(Failure::Input)?;
    let layout = regions::Layout::of(
        args.regions,
        args.sync_interval,
        args.link_latency,
        !args.redis.is_empty(),
    )
    .map_err(Failure::Input)?;

    let started = Instant::now();
    let reading = progress(text.len() as u64, "reading");
    let trace = trace::read(
        &trace_name,
        &text,
        route.as_ref(),
        &policies,
        args.skip_bad_lines,
        &reading,
    )
    .map_err(Failure::Input)?;
    reading.finish_and_clear();
    drop(text);
    report_trace(&trace_name, &trace);
    if let Some(layout) = &layout {
        let checked = layout.check(&policies.policies, &trace.requests);
        checked.map_err(Failure::Input)?;
    }

    let replaying = progress(trace.requests.len() as u64, "replaying");
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let tallied = args.summary || args.top.is_some() || args.plot.is_some();
    let bins = match (trace.requests.first(), trace.requests.last()) {
        (Some(first), Some(last)) => Bins::for_span(first.t_us, last.t_us),
        _ => Bins::for_span(0, 0),
    };
    let mut tally = Tally::new(&policies.policies, bins, args.top.is_some());
    let mut written = if tallied {
        Ok(())
    } else {
        writeln!(out, "{}", report::CSV_HEADER)
    };
    let mut each = |request: &Request, outcome: &Outcome| {
        if tallied {
            tally.add(request, outcome);
        } else if written.is_ok() {
            written = report::write_csv_line(&mut out, &policies.policies, request, outcome);
        }
    };
    let mut mesh = layout.map(|l| regions::Mesh::new(l, &policies.policies));
    if let Some(mesh) = &mut mesh {
        replay::regions(mesh, &trace.requests, &replaying, &mut each);
    } else if args.redis.is_empty() {
        replay::memory(&policies.policies, &trace.requests, &replaying, &mut each);
    } else {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Failure::Run(format!("cannot start the async runtime: {e}")))?;
        runtime
            .block_on(replay::redis(
                &args.redis,
                &policies.policies,
                &trace.requests,
                &replaying,
                &mut each,
            ))
            .map_err(|e| Failure::Run(format!("Redis: {e}")))?;
    }
    replaying.finish_and_clear();
    if progress_shown() {
        eprintln!(
            "replayed {} requests in {:.2?}",
            trace.requests.len(),
            started.elapsed()
        );
    }

    if args.summary {
        written = written.and_then(|_| tally.write_summary(&mut out, &policies.policies));
    }
    if let Some(n) = args.top {
        if args.summary {
            written = written.and_then(|_| writeln!(out));
        }
        written = written.and_then(|_| tally.write_top(&mut out, &policies.policies, n));
    }
    if let Some(mesh) = mesh {
        written = written.and_then(|_| {
            if args.summary {
                writeln!(out)?;
                mesh.write_report(&mut out)
            } else {
                mesh.write_report(&mut io::stderr().lock())
            }
        });
    }
    match written.and_then(|_| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
        Err(e) => return Err(Failure::Run(format!("writing the output: {e}"))),
    }
    if let Some(path) = &args.plot {
        let drawing = plot::Plot {
            tally: &tally,
            policies: &policies.policies,
            absolute: trace.absolute,
            compare: args.compare,
        };
        plot::draw(path, &drawing).map_err(Failure::Run)?;
    }
    Ok(())
}

/// Reads `text` as a trace of `format` (a log's lines keyed by `key`, a
/// `--key` value) and replays it on the memory store against `policies`:
/// what `simulate` does with a file, for the fuzz targets and property
/// tests. The number of decisions made, or the first bad line's error.
pub(crate) fn replay_text(
    text: &str,
    format: Format,
    key: &str,
    policies: &PolicySet,
) -> Result<usize, String> {
    let route = match format {
        Format::Csv => None,
        Format::Combined | Format::Json => Some(LogRoute {
            format: if format == Format::Json {
                LogFormat::Json
            } else {
                LogFormat::Combined
            },
            key: key.parse()?,
            policies: (0..policies.policies.len()).collect(),
            time_field: None,
        }),
    };
    let hidden = ProgressBar::hidden();
    let trace = trace::read("trace", text, route.as_ref(), policies, false, &hidden)?;
    let mut decisions = 0;
    replay::memory(&policies.policies, &trace.requests, &hidden, |_, _| {
        decisions += 1;
    });
    Ok(decisions)
}

/// For a log, which policies its lines go to and what their key is; a CSV
/// trace names both on each line, so the log options are refused for it.
fn log_route(
    args: &SimulateArgs,
    format: Format,
    policies: &PolicySet,
) -> Result<Option<LogRoute>, String> {
    let format = match format {
        Format::Csv => {
            if args.compare && args.plot.is_none() {
                return Err(
                    "--compare draws a CSV trace's policies in one panel: give --plot FILE too"
                        .into(),
                );
            }
            for (given, option) in [
                (args.policy.is_some(), "--policy"),
                (args.key != KeySpec::default(), "--key"),
                (args.time_field.is_some(), "--time-field"),
            ] {
                if given {
                    return Err(format!(
                        "{option} is for access logs; a CSV trace names the policy and key on each line"
                    ));
                }
            }
            return Ok(None);
        }
        Format::Combined => LogFormat::Combined,
        Format::Json => LogFormat::Json,
    };
    if args.time_field.is_some() && format == LogFormat::Combined {
        return Err("--time-field is for JSON-lines logs; a combined log has one time".into());
    }
    args.key.check(format)?;
    let chosen = match (&args.policy, args.compare) {
        (Some(name), false) => {
            let index = policies
                .policies
                .iter()
                .position(|p| p.name() == name)
                .ok_or_else(|| {
                    format!(
                        "--policy {name}: no such policy in {} (it has {})",
                        args.config.display(),
                        policies
                            .policies
                            .iter()
                            .map(|p| p.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })?;
            vec![index]
        }
        (None, true) => (0..policies.policies.len()).collect(),
        (Some(_), true) => {
            return Err(
                "--policy picks one policy and --compare checks every line against all of them: give one"
                    .into(),
            );
        }
        (None, false) => {
            return Err(
                "an access log names no policy: give --policy NAME, or --compare for all of them"
                    .into(),
            );
        }
    };
    if chosen.is_empty() {
        return Err(format!("{} has no policies", args.config.display()));
    }
    Ok(Some(LogRoute {
        format,
        key: args.key.clone(),
        policies: chosen,
        time_field: args.time_field.clone(),
    }))
}

/// Tells on stderr what was skipped or reordered.
fn report_trace(file: &str, trace: &Trace) {
    if trace.skipped > 0 {
        eprintln!(
            "warning: {file}: skipped {} bad line{}; the first: {}",
            trace.skipped,
            if trace.skipped == 1 { "" } else { "s" },
            trace.first_skipped.as_deref().unwrap_or("")
        );
    }
    if trace.out_of_order > 0 {
        eprintln!(
            "note: {file}: {} lines were earlier than a line before them (logs are written as requests end); replayed in time order",
            trace.out_of_order
        );
    }
}

fn progress_shown() -> bool {
    io::stderr().is_terminal()
}

/// A progress bar on stderr when stderr is a terminal, hidden otherwise.
fn progress(len: u64, what: &'static str) -> ProgressBar {
    if !progress_shown() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{msg:10} [{bar:40}] {percent:>3}% {elapsed} (eta {eta})")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what);
    bar
}

//! `simulate --plot`: what each policy did to the trace, as SVG or PNG.
//!
//! One panel per policy: the cost admitted and denied in each time bin,
//! stacked; the policy's limit scaled to one bin; the busiest window-long
//! interval shaded with its count. `--compare` draws the policies in one
//! panel instead: the cost offered per bin in grey, each policy's admitted
//! cost as a line, and each policy's busiest interval as a bracket.
//!
//! Text is laid out with DejaVu Sans compiled into the binary, so the
//! output depends on no system font and is the same on every machine.
//!
//! `panel.rs` one policy's panel, `compare.rs` `--compare`'s, `chart.rs`
//! what both draw with (the chart, lines, the legend), `axis.rs` the time
//! axis; this file the output file and the labels.

use std::ops::Range;
use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use tollgate::Policy;
use tollgate::algorithm::Algorithm;

use super::report::{Bins, PolicyTally, ROUND_US, Tally};
use crate::palette::{self, Rgb};

mod axis;
mod chart;
mod compare;
mod panel;

use self::axis::TimeAxis;
use self::chart::{Swatch, chart_on, draw_legend, line, mesh};
use self::compare::compare_panel;
use self::panel::policy_panel;

/// The image formats `--plot` writes, by the file's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ImageFormat {
    Svg,
    Png,
}

impl ImageFormat {
    pub(crate) fn of(path: &Path) -> Result<ImageFormat, String> {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("svg") => Ok(ImageFormat::Svg),
            Some(e) if e.eq_ignore_ascii_case("png") => Ok(ImageFormat::Png),
            _ => Err(format!(
                "--plot {}: the file name must end in .svg or .png",
                path.display()
            )),
        }
    }
}

const WIDTH: u32 = 960;
const PANEL_HEIGHT: u32 = 350;
const COMPARE_HEIGHT: u32 = 470;
const FONT: &str = "sans-serif";
const TITLE_SIZE: f64 = 26.0;
const TEXT_SIZE: f64 = 20.0;

/// What to draw: the tallies of a replay and how its times read.
#[derive(Debug)]
pub(crate) struct Plot<'a> {
    pub(crate) tally: &'a Tally,
    pub(crate) policies: &'a [Policy],
    /// Times are wall-clock (a log) rather than offsets from zero.
    pub(crate) absolute: bool,
    pub(crate) compare: bool,
}

/// Draws `plot` into the file at `path`.
pub(crate) fn draw(path: &Path, plot: &Plot<'_>) -> Result<(), String> {
    let format = ImageFormat::of(path)?;
    register_font()?;
    let shown: Vec<usize> = (0..plot.policies.len())
        .filter(|&i| plot.tally.policies[i].requests > 0)
        .collect();
    if shown.is_empty() {
        return Err("--plot: the trace has no requests to draw".to_string());
    }
    let height = if plot.compare {
        COMPARE_HEIGHT
    } else {
        PANEL_HEIGHT * shown.len() as u32
    };
    let failed = |e: String| format!("--plot {}: {e}", path.display());
    match format {
        ImageFormat::Svg => {
            let root = SVGBackend::new(path, (WIDTH, height)).into_drawing_area();
            render(&root, plot, &shown).map_err(failed)?;
            root.present().map_err(|e| failed(e.to_string()))
        }
        ImageFormat::Png => {
            let root = BitMapBackend::new(path, (WIDTH, height)).into_drawing_area();
            render(&root, plot, &shown).map_err(failed)?;
            root.present().map_err(|e| failed(e.to_string()))
        }
    }
}

fn register_font() -> Result<(), String> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        for (style, bytes) in [
            (FontStyle::Normal, dejavu::sans::regular()),
            (FontStyle::Bold, dejavu::sans::bold()),
        ] {
            if plotters::style::register_font(FONT, style, bytes).is_err() {
                result = Err("the embedded font does not load".to_string());
            }
        }
    });
    result
}

type Drawn = Result<(), String>;

fn render<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    plot: &Plot<'_>,
    shown: &[usize],
) -> Drawn {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    if plot.compare {
        return compare_panel(root, plot, shown);
    }
    let panels = root.split_evenly((shown.len(), 1));
    for (area, &i) in panels.iter().zip(shown) {
        policy_panel(area, plot, i)?;
    }
    Ok(())
}

fn color(c: Rgb) -> RGBColor {
    RGBColor(c.0, c.1, c.2)
}

fn text(size: f64) -> TextStyle<'static> {
    (FONT, size).into_font().color(&BLACK)
}

/// The cost per bin a policy lets through at its sustained rate; none for
/// a concurrency policy, whose limit is not a rate.
fn limit_per_bin(policy: &Policy, bin_us: u64) -> Option<f64> {
    let (amount, per) = match policy.algorithm() {
        Algorithm::FixedWindow(_) | Algorithm::SlidingWindow(_) | Algorithm::SlidingLog(_) => {
            (policy.limit(), policy.time_span().as_micros() as u64)
        }
        Algorithm::TokenBucket(a) => (a.rate().rate, a.rate().per),
        Algorithm::Gcra(a) => (a.rate().rate, a.rate().per),
        Algorithm::LeakyBucket(a) => (a.rate().rate, a.rate().per),
        _ => return None,
    };
    Some(amount as f64 * bin_us as f64 / per as f64)
}

/// The policy's parameters as a reader says them.
fn describe(policy: &Policy) -> String {
    let d = tollgate::format_duration;
    match policy.algorithm() {
        Algorithm::TokenBucket(a) => format!(
            "{} per {}, burst {}",
            a.rate().rate,
            d(policy.time_span()),
            a.burst()
        ),
        Algorithm::Gcra(a) => format!(
            "{} per {}, burst {}",
            a.rate().rate,
            d(policy.time_span()),
            a.burst()
        ),
        Algorithm::LeakyBucket(a) => format!(
            "{} per {}, capacity {}",
            a.rate().rate,
            d(policy.time_span()),
            a.capacity()
        ),
        Algorithm::Concurrency(_) => {
            format!(
                "{} at once, lease {}",
                policy.limit(),
                d(policy.time_span())
            )
        }
        _ => format!("{} per {}", policy.limit(), d(policy.time_span())),
    }
}

/// A number of requests as a label: whole numbers without a point, others
/// with up to two decimals.
fn count_label(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// What one bin holds: requests when every cost was 1, cost otherwise.
fn unit(tallies: &[&PolicyTally], bins: &Bins) -> String {
    let what = if tallies.iter().all(|t| t.unit_cost) {
        "requests"
    } else {
        "cost"
    };
    format!("{what} per {}", bin_name(bins.width))
}

fn bin_name(width_us: u64) -> String {
    tollgate::format_duration(std::time::Duration::from_micros(width_us))
}

/// The top of the y axis: room above the data for labels.
fn y_top(data_max: f64, headroom: f64) -> f64 {
    (data_max.max(1.0) * headroom).ceil()
}

/// Where a busiest interval is shaded: light enough for the bars to show
/// through in every colour.
const BAND: Rgb = Rgb(0xe8, 0xe8, 0xe8);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_line_is_the_rate_over_one_bin() {
        let minute = std::time::Duration::from_secs(60);
        let second = std::time::Duration::from_secs(1);
        let books = Policy::fixed_window("b", 120, minute).unwrap();
        assert_eq!(limit_per_bin(&books, 2_000_000), Some(4.0));
        let api = Policy::gcra("a", 10, second, 50).unwrap();
        assert_eq!(limit_per_bin(&api, 500_000), Some(5.0));
        let jobs = Policy::concurrency("j", 3, minute).unwrap();
        assert_eq!(limit_per_bin(&jobs, 1_000_000), None);
        assert_eq!(describe(&api), "10 per 1s, burst 50");
    }

    #[test]
    fn ticks_fall_on_round_times() {
        let axis = TimeAxis::new(&Bins::for_span(0, 119_700_000), false);
        assert_eq!(axis.ticks, [0.0, 30.0, 60.0, 90.0, 120.0]);
        assert_eq!(axis.label(90.0), "1:30");
        // 12:00:00.250 UTC on a day in 2024, for 20 minutes.
        let start = 1_714_564_800_250_000;
        let axis = TimeAxis::new(&Bins::for_span(start, start + 1_200_000_000), true);
        assert_eq!(axis.label(axis.ticks[1]), "12:05");
        assert!(axis.description().contains("2024-05-01 12:00:00"));
    }
}

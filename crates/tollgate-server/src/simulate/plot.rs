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

fn policy_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    plot: &Plot<'_>,
    index: usize,
) -> Drawn {
    let policy = &plot.policies[index];
    let t = &plot.tally.policies[index];
    let bins = &plot.tally.bins;
    let axis = TimeAxis::new(bins, plot.absolute);
    let limit = limit_per_bin(policy, bins.width);
    let stacked = t.bins.iter().map(|[a, d]| a + d).max().unwrap_or(0) as f64;
    let top = y_top(stacked.max(limit.unwrap_or(0.0)), 1.3);
    let title = format!(
        "{}: {}, {}",
        policy.name(),
        policy.algorithm().name(),
        describe(policy)
    );
    let (chart_area, legend_area) = area.split_vertically(area.dim_in_pixel().1 - 34);
    let mut chart = chart_on(&chart_area, title, &axis, top)?;
    let y_desc = unit(&[t], bins);
    mesh(&mut chart, &axis, &y_desc)?;

    let window = policy.time_span().as_micros() as u64;
    let mut legend = vec![
        (Swatch::Bar(palette::ADMITTED), "admitted".to_string()),
        (Swatch::Bar(palette::DENIED), "denied".to_string()),
    ];
    if t.busiest > 0 {
        let x0 = axis.seconds(t.busiest_at);
        let x1 = (x0 + window as f64 / 1e6).min(axis.end);
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(x0, 0.0), (x1, top)],
                color(BAND).filled(),
            )))
            .map_err(|e| e.to_string())?;
        let label = format!(
            "busiest {}: {} admitted",
            tollgate::format_duration(policy.time_span()),
            t.busiest
        );
        let (x, anchor) = if x0 < axis.end / 2.0 {
            (x0, HPos::Left)
        } else {
            (x1, HPos::Right)
        };
        let pad = axis.end * 0.006 * if x == x0 { 1.0 } else { -1.0 };
        chart
            .draw_series(std::iter::once(Text::new(
                label,
                (x + pad, top),
                text(TEXT_SIZE).pos(Pos::new(anchor, VPos::Top)),
            )))
            .map_err(|e| e.to_string())?;
        legend.push((Swatch::Band, "busiest window".to_string()));
    }
    let step = axis.bin_seconds;
    let gap = step * 0.12;
    chart
        .draw_series(t.bins.iter().enumerate().flat_map(|(i, &[a, d])| {
            let x0 = i as f64 * step + gap;
            let x1 = (i + 1) as f64 * step - gap;
            let (a, d) = (a as f64, d as f64);
            [
                Rectangle::new([(x0, 0.0), (x1, a)], color(palette::ADMITTED).filled()),
                Rectangle::new([(x0, a), (x1, a + d)], color(palette::DENIED).filled()),
            ]
        }))
        .map_err(|e| e.to_string())?;
    if let Some(limit) = limit {
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, limit), (axis.end, limit)],
                10,
                6,
                BLACK.stroke_width(2),
            ))
            .map_err(|e| e.to_string())?;
        legend.push((
            Swatch::Dashed(Rgb(0, 0, 0)),
            format!(
                "limit per key: {} per {}",
                count_label(limit),
                bin_name(bins.width)
            ),
        ));
    }
    draw_legend(&legend_area, &legend)
}

/// Where a busiest interval is shaded: light enough for the bars to show
/// through in every colour.
const BAND: Rgb = Rgb(0xe8, 0xe8, 0xe8);

/// Dash patterns that tell the compared policies apart without colour:
/// solid, long dashes, short dashes.
const DASHES: [(u32, u32); 3] = [(0, 0), (14, 6), (5, 5)];

fn compare_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    plot: &Plot<'_>,
    shown: &[usize],
) -> Drawn {
    let bins = &plot.tally.bins;
    let axis = TimeAxis::new(bins, plot.absolute);
    let tallies: Vec<&PolicyTally> = shown.iter().map(|&i| &plot.tally.policies[i]).collect();
    let offered: Vec<u64> = (0..bins.count)
        .map(|b| {
            tallies
                .iter()
                .map(|t| t.bins[b][0] + t.bins[b][1])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let limits: Vec<Option<f64>> = shown
        .iter()
        .map(|&i| limit_per_bin(&plot.policies[i], bins.width))
        .collect();
    let data_max = offered
        .iter()
        .map(|&o| o as f64)
        .chain(limits.iter().flatten().copied())
        .fold(0.0, f64::max);
    // The brackets of the busiest intervals stack above the data.
    let bracket_room = 0.11 * shown.len() as f64 + 0.07;
    let top = y_top(data_max, 1.08 / (1.0 - bracket_room));
    let legend_rows = shown.len().div_ceil(2) + 1;
    let (chart_area, legend_area) =
        area.split_vertically(area.dim_in_pixel().1 - 30 * legend_rows as u32 - 8);
    let title = "The same trace under each policy";
    let mut chart = chart_on(&chart_area, title, &axis, top)?;
    mesh(&mut chart, &axis, &unit(&tallies, bins))?;

    let step = axis.bin_seconds;
    let gap = step * 0.12;
    chart
        .draw_series(offered.iter().enumerate().map(|(i, &o)| {
            Rectangle::new(
                [
                    (i as f64 * step + gap, 0.0),
                    ((i + 1) as f64 * step - gap, o as f64),
                ],
                color(palette::OFFERED).filled(),
            )
        }))
        .map_err(|e| e.to_string())?;
    let mut legend = vec![(Swatch::Bar(palette::OFFERED), "offered".to_string())];

    // One limit line when the policies share it, drawn under their lines.
    let same_limit = limits.windows(2).all(|w| w[0] == w[1]);
    let mut shared_limit = None;
    if same_limit && let Some(limit) = limits[0] {
        line(
            &mut chart,
            vec![(0.0, limit), (axis.end, limit)],
            Rgb(0, 0, 0),
            2,
            (10, 6),
        )?;
        shared_limit = Some((
            Swatch::Dashed(Rgb(0, 0, 0)),
            format!(
                "limit per key: {} per {}",
                count_label(limit),
                bin_name(bins.width)
            ),
        ));
    }
    for (n, (&i, t)) in shown.iter().zip(&tallies).enumerate() {
        let policy = &plot.policies[i];
        let c = palette::SERIES[n % palette::SERIES.len()];
        let dash = DASHES[n % DASHES.len()];
        // Each bin's admitted cost, at the bin's middle.
        let points: Vec<(f64, f64)> = t
            .bins
            .iter()
            .enumerate()
            .map(|(b, &[a, _])| ((b as f64 + 0.5) * step, a as f64))
            .collect();
        line(&mut chart, points, c, 3, dash)?;
        if !same_limit && let Some(limit) = limits[n] {
            line(
                &mut chart,
                vec![(0.0, limit), (axis.end, limit)],
                c,
                1,
                (10, 6),
            )?;
        }
        legend.push((
            Swatch::Line(c, dash),
            format!(
                "{}: {}, {}",
                policy.name(),
                policy.algorithm().name(),
                describe(policy)
            ),
        ));
        if t.busiest > 0 {
            let y = top * (1.0 - 0.1 - 0.11 * n as f64);
            let tick = top * 0.025;
            let x0 = axis.seconds(t.busiest_at);
            let x1 = (x0 + policy.time_span().as_micros() as f64 / 1e6).min(axis.end);
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(x0, y - tick), (x0, y), (x1, y), (x1, y - tick)],
                    color(c).stroke_width(3),
                )))
                .map_err(|e| e.to_string())?;
            chart
                .draw_series(std::iter::once(Text::new(
                    format!(
                        "{}: {} admitted in its busiest {}",
                        policy.name(),
                        t.busiest,
                        tollgate::format_duration(policy.time_span())
                    ),
                    ((x0 + x1) / 2.0, y + tick * 0.3),
                    text(TEXT_SIZE).pos(Pos::new(HPos::Center, VPos::Bottom)),
                )))
                .map_err(|e| e.to_string())?;
        }
    }
    if let Some(entry) = shared_limit {
        legend.push(entry);
    }
    draw_legend(&legend_area, &legend)
}

fn chart_on<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    title: impl AsRef<str>,
    axis: &TimeAxis,
    top: f64,
) -> Result<Chart<'a, DB>, String> {
    ChartBuilder::on(area)
        .caption(title, (FONT, TITLE_SIZE).into_font().style(FontStyle::Bold))
        .margin_left(12)
        .margin_right(28)
        .margin_top(10)
        .x_label_area_size(60)
        .y_label_area_size(64)
        .build_cartesian_2d(axis.clone(), 0f64..top)
        .map_err(|e| e.to_string())
}

type Chart<'a, DB> =
    ChartContext<'a, DB, Cartesian2d<TimeAxis, plotters::coord::types::RangedCoordf64>>;

fn mesh<DB: DrawingBackend>(chart: &mut Chart<'_, DB>, axis: &TimeAxis, y_desc: &str) -> Drawn {
    let y_label = |y: &f64| count_label(*y);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_labels(6)
        .bold_line_style(BLACK.mix(0.12))
        .light_line_style(TRANSPARENT)
        .axis_style(BLACK.mix(0.6))
        .y_label_formatter(&y_label)
        .x_desc(axis.description())
        .y_desc(y_desc)
        .label_style(text(TEXT_SIZE - 1.0))
        .axis_desc_style(text(TEXT_SIZE))
        .draw()
        .map_err(|e| e.to_string())
}

fn line<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    points: Vec<(f64, f64)>,
    c: Rgb,
    width: u32,
    (dash, gap): (u32, u32),
) -> Drawn {
    let style = color(c).stroke_width(width);
    let drawn = if dash == 0 {
        chart
            .draw_series(LineSeries::new(points, style))
            .map(|_| ())
    } else {
        chart
            .draw_series(DashedLineSeries::new(points, dash, gap, style))
            .map(|_| ())
    };
    drawn.map_err(|e| e.to_string())
}

/// A legend entry's sample.
#[derive(Debug, Clone, Copy)]
enum Swatch {
    Bar(Rgb),
    Band,
    Line(Rgb, (u32, u32)),
    Dashed(Rgb),
}

/// The legend as rows of samples and labels below the chart, where it
/// never covers data.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[(Swatch, String)],
) -> Drawn {
    let font = text(TEXT_SIZE);
    let (width, _) = area.dim_in_pixel();
    let (left, row_height, sample) = (78, 30, 28);
    let (mut x, mut y) = (left, 4);
    for (swatch, label) in entries {
        let label_width = font
            .font
            .box_size(label)
            .map_err(|e| format!("laying out `{label}`: {e:?}"))?
            .0 as i32;
        let needed = sample + 8 + label_width + 28;
        if x > left && x + needed > width as i32 - 12 {
            x = left;
            y += row_height;
        }
        let mid = y + row_height / 2 - 4;
        let drawn = match *swatch {
            Swatch::Bar(c) => area.draw(&Rectangle::new(
                [(x + 6, mid - 8), (x + sample - 6, mid + 8)],
                color(c).filled(),
            )),
            Swatch::Band => area.draw(&Rectangle::new(
                [(x, mid - 9), (x + sample, mid + 9)],
                color(BAND).filled(),
            )),
            Swatch::Line(c, (0, _)) => area.draw(&PathElement::new(
                vec![(x, mid), (x + sample, mid)],
                color(c).stroke_width(3),
            )),
            Swatch::Line(c, (dash, gap)) => area.draw(&DashedPathElement::new(
                vec![(x, mid), (x + sample, mid)],
                dash,
                gap,
                color(c).stroke_width(3),
            )),
            Swatch::Dashed(c) => area.draw(&DashedPathElement::new(
                vec![(x, mid), (x + sample, mid)],
                8,
                5,
                color(c).stroke_width(2),
            )),
        };
        drawn.map_err(|e| e.to_string())?;
        area.draw(&Text::new(
            label.clone(),
            (x + sample + 8, mid),
            font.pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(|e| e.to_string())?;
        x += needed;
    }
    Ok(())
}

/// The time axis: seconds from the first bin's start, with ticks at round
/// times (of day, for a log).
#[derive(Debug, Clone)]
struct TimeAxis {
    /// µs since the epoch (or the trace's zero) of x = 0.
    origin: u64,
    absolute: bool,
    end: f64,
    bin_seconds: f64,
    /// The tick step, µs.
    step: u64,
    ticks: Vec<f64>,
}

impl TimeAxis {
    fn new(bins: &Bins, absolute: bool) -> TimeAxis {
        let span = bins.width * bins.count as u64;
        let step = ROUND_US
            .iter()
            .copied()
            .find(|s| span / s <= 6)
            .unwrap_or_else(|| (span / 6).div_ceil(86_400_000_000) * 86_400_000_000);
        let first = bins.origin.div_ceil(step) * step;
        let ticks = (0..)
            .map(|k| first + k * step)
            .take_while(|&t| t <= bins.origin + span)
            .map(|t| (t - bins.origin) as f64 / 1e6)
            .collect();
        TimeAxis {
            origin: bins.origin,
            absolute,
            end: span as f64 / 1e6,
            bin_seconds: bins.width as f64 / 1e6,
            step,
            ticks,
        }
    }

    fn seconds(&self, t_us: u64) -> f64 {
        t_us.saturating_sub(self.origin) as f64 / 1e6
    }

    fn label(&self, x: f64) -> String {
        let t = self.origin + (x * 1e6).round() as u64;
        if self.absolute {
            let format = if self.step < 1_000_000 {
                "%H:%M:%S%.3f"
            } else if self.step < 60_000_000 {
                "%H:%M:%S"
            } else if self.step < 86_400_000_000 {
                "%H:%M"
            } else {
                "%Y-%m-%d"
            };
            return jiff::Timestamp::from_microsecond(t as i64)
                .map(|ts| ts.strftime(format).to_string())
                .unwrap_or_default();
        }
        let (s, us) = (t / 1_000_000, t % 1_000_000);
        if self.step < 1_000_000 {
            count_label(t as f64 / 1e6)
        } else if self.step < 60_000_000 && s < 3_600 {
            format!("{}:{:02}", s / 60, s % 60)
        } else if us == 0 && s < 86_400 * 2 {
            format!("{}:{:02}", s / 3_600, s / 60 % 60)
        } else {
            format!("{}d {}h", s / 86_400, s / 3_600 % 24)
        }
    }

    fn description(&self) -> String {
        if self.absolute {
            let start = jiff::Timestamp::from_microsecond(self.origin as i64)
                .map(|ts| ts.strftime("%Y-%m-%d %H:%M:%S").to_string())
                .unwrap_or_default();
            return format!("time (UTC) from {start}");
        }
        let unit = if self.step < 1_000_000 {
            "seconds"
        } else if self.step < 60_000_000 && self.end < 3_600.0 {
            "m:ss"
        } else if self.end < 172_800.0 {
            "h:mm"
        } else {
            "days and hours"
        };
        format!("time from the trace's start ({unit})")
    }
}

impl ValueFormatter<f64> for TimeAxis {
    fn format(value: &f64) -> String {
        count_label(*value)
    }

    fn format_ext(&self, value: &f64) -> String {
        self.label(*value)
    }
}

impl Ranged for TimeAxis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = f64::from(limit.1 - limit.0);
        limit.0 + (value / self.end * span).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() && hint.max_num_points() < self.ticks.len() {
            return Vec::new();
        }
        self.ticks.clone()
    }

    fn range(&self) -> Range<f64> {
        0.0..self.end
    }
}

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

//! `simulate --plot --compare`: the policies in one panel, the cost offered
//! per bin in grey, each policy's admitted cost as a line, each policy's
//! busiest interval as a bracket.

use super::*;

/// Dash patterns that tell the compared policies apart without colour:
/// solid, long dashes, short dashes.
const DASHES: [(u32, u32); 3] = [(0, 0), (14, 6), (5, 5)];

pub(super) fn compare_panel<DB: DrawingBackend>(
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

//! `simulate --plot`'s panel for one policy: the cost admitted and denied
//! per bin, stacked, its limit scaled to one bin, its busiest interval
//! shaded.

use super::*;

pub(super) fn policy_panel<DB: DrawingBackend>(
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

//! What both kinds of panel draw with: the chart and its mesh, a line,
//! and the legend below the chart.

use super::*;

pub(super) fn chart_on<'a, DB: DrawingBackend>(
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

pub(super) type Chart<'a, DB> =
    ChartContext<'a, DB, Cartesian2d<TimeAxis, plotters::coord::types::RangedCoordf64>>;

pub(super) fn mesh<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    axis: &TimeAxis,
    y_desc: &str,
) -> Drawn {
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

pub(super) fn line<DB: DrawingBackend>(
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
pub(super) enum Swatch {
    Bar(Rgb),
    Band,
    Line(Rgb, (u32, u32)),
    Dashed(Rgb),
}

/// The legend as rows of samples and labels below the chart, where it
/// never covers data.
pub(super) fn draw_legend<DB: DrawingBackend>(
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

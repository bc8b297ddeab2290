//! Drawing a [`Chart`] with plotters into an RGB buffer, then encoding it as a PNG with
//! the `image` crate (plotters' own encoder would pull in a second `image`).

use std::sync::Once;

use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

use super::{Chart, Kind, SHOWN};

/// The series' colours, in order: the Okabe-Ito palette, told apart with the common
/// colour-vision deficiencies.
pub const PALETTE: [(u8, u8, u8); 8] = [
    (0, 114, 178),
    (230, 159, 0),
    (0, 158, 115),
    (204, 121, 167),
    (213, 94, 0),
    (86, 180, 233),
    (240, 228, 66),
    (0, 0, 0),
];

/// A drawn chart: the PNG's bytes and its size in pixels.
#[derive(Debug, Clone)]
pub struct Png {
    pub bytes: Vec<u8>,
    pub width: u32,
    pub height: u32,
}

/// The font family every text of a chart is set in.
const FONT: &str = "sans-serif";
/// Labels along the bottom at most; more points show every n-th label.
const MAX_LABELS: usize = 8;
/// Characters of a label at most.
const LABEL_CHARS: usize = 12;

fn fonts() {
    static FONTS: Once = Once::new();
    FONTS.call_once(|| {
        for (style, bytes) in [(FontStyle::Normal, dejavu::sans::regular()), (FontStyle::Bold, dejavu::sans::bold())] {
            if register_font(FONT, style, bytes).is_err() {
                tracing::error!("the chart font does not load; charts are drawn without text");
            }
        }
    });
}

fn colour(i: usize) -> RGBColor {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    RGBColor(r, g, b)
}

/// The values' range, padded; bars and areas stand on zero. Refused when there is nothing
/// drawable: no finite value, or a value beyond [`MAX_VALUE`] (the block check refuses
/// those, so only a chart built elsewhere gets here). A span too narrow for its values'
/// magnitude (equal values, one ULP apart, or subnormal) is widened around its middle,
/// since plotters steps its axis from one end to the other by a fraction of the span, and
/// a step that does not move a double is a loop without end.
fn range(chart: &Chart) -> Result<(f64, f64), String> {
    let values = chart.series.iter().flat_map(|s| s.values.iter().copied()).filter(|v| v.is_finite());
    let (mut lo, mut hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        return Err("it has no finite value".into());
    }
    let magnitude = lo.abs().max(hi.abs());
    if magnitude > MAX_VALUE {
        return Err(format!("a value is beyond ±{MAX_VALUE:e}"));
    }
    if chart.kind != Kind::Line {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    if hi - lo <= (magnitude * 1e-9).max(1e-12) {
        let (mid, half) = (lo / 2.0 + hi / 2.0, (magnitude * 1e-6).max(1.0));
        return Ok((mid - half, mid + half));
    }
    let pad = (hi - lo) * 0.08;
    Ok((if lo == 0.0 { 0.0 } else { lo - pad }, if hi == 0.0 { 0.0 } else { hi + pad }))
}

/// The largest value drawn, either way (the catalogue's bound for chart values).
pub const MAX_VALUE: f64 = crate::blocks::CHART_MAX;

/// `chart` as a PNG, drawn at twice [`SHOWN`].
pub fn draw(chart: &Chart) -> Result<Png, String> {
    fonts();
    let (width, height) = (SHOWN.0 * 2, SHOWN.1 * 2);
    let mut rgb = vec![255u8; width as usize * height as usize * 3];
    plot(chart, &mut rgb, width, height).map_err(|e| format!("the chart could not be drawn: {e}"))?;
    let mut bytes = Vec::new();
    let encoder = image::codecs::png::PngEncoder::new(&mut bytes);
    image::ImageEncoder::write_image(encoder, &rgb, width, height, image::ExtendedColorType::Rgb8)
        .map_err(|e| format!("the chart could not be encoded: {e}"))?;
    Ok(Png { bytes, width, height })
}

type Drawn = Result<(), Box<dyn std::error::Error>>;

fn plot(chart: &Chart, rgb: &mut [u8], width: u32, height: u32) -> Drawn {
    let root = BitMapBackend::with_buffer(rgb, (width, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let n = chart.points().max(1);
    let (lo, hi) = range(chart)?;
    let mut builder = ChartBuilder::on(&root);
    builder.margin(24).x_label_area_size(56).y_label_area_size(if chart.unit.is_some() { 120 } else { 96 });
    if let Some(title) = &chart.title {
        builder.caption(crate::blocks::cut(title, 60), (FONT, 40).into_font().style(FontStyle::Bold));
    }
    let mut plot = builder.build_cartesian_2d(-0.5f64..(n as f64 - 0.5), lo..hi)?;
    let step = n.div_ceil(MAX_LABELS).max(1);
    let label = |x: &f64| {
        let i = x.round();
        let at = i as usize;
        match (x - i).abs() < 1e-6 && i >= 0.0 && at < n && at.is_multiple_of(step) {
            true => crate::blocks::cut(&chart.label(at), LABEL_CHARS),
            false => String::new(),
        }
    };
    let value = |y: &f64| super::format_number(*y);
    let mut mesh = plot.configure_mesh();
    mesh.x_labels(n.min(MAX_LABELS * step).min(500))
        .x_label_formatter(&label)
        .y_label_formatter(&value)
        .disable_x_mesh()
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(225, 225, 225))
        .label_style((FONT, 26));
    if let Some(unit) = &chart.unit {
        mesh.y_desc(crate::blocks::cut(unit, 20)).axis_desc_style((FONT, 28));
    }
    mesh.draw()?;
    let count = chart.series.len().max(1);
    for (i, s) in chart.series.iter().enumerate() {
        let c = colour(i);
        let points = || s.values.iter().enumerate().filter(|(_, v)| !v.is_nan()).map(|(x, v)| (x as f64, *v));
        let drawn = match chart.kind {
            Kind::Line => plot.draw_series(LineSeries::new(points(), c.stroke_width(5)))?,
            Kind::Area => {
                plot.draw_series(AreaSeries::new(points(), 0.0, c.mix(0.3)).border_style(c.stroke_width(4)))?
            }
            Kind::Bar => {
                let width = 0.8 / count as f64;
                plot.draw_series(points().map(|(x, v)| {
                    let left = x - 0.4 + width * i as f64;
                    Rectangle::new([(left, 0.0), (left + width * 0.92, v)], c.filled())
                }))?
            }
        };
        drawn
            .label(crate::blocks::cut(&s.name, 24))
            .legend(move |(x, y)| Rectangle::new([(x, y - 8), (x + 24, y + 8)], c.filled()));
    }
    if chart.series.len() > 1 {
        plot.configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FONT, 26))
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(200, 200, 200))
            .draw()?;
    }
    root.present()?;
    Ok(())
}

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

/// The values' range, padded; bars and areas stand on zero.
fn range(chart: &Chart) -> (f64, f64) {
    let values = chart.series.iter().flat_map(|s| s.values.iter().copied()).filter(|v| !v.is_nan());
    let (mut lo, mut hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if chart.kind != Kind::Line {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    if hi <= lo {
        (lo - 1.0, hi + 1.0)
    } else {
        let pad = (hi - lo) * 0.08;
        (if lo == 0.0 { 0.0 } else { lo - pad }, if hi == 0.0 { 0.0 } else { hi + pad })
    }
}

/// `chart` as a PNG, drawn at twice [`SHOWN`].
pub fn draw(chart: &Chart) -> Result<Png, String> {
    fonts();
    let (width, height) = (SHOWN.0 * 2, SHOWN.1 * 2);
    let mut rgb = vec![255u8; width as usize * height as usize * 3];
    plot(chart, &mut rgb, (width, height)).map_err(|e| format!("the chart could not be drawn: {e}"))?;
    let mut bytes = Vec::new();
    let encoder = image::codecs::png::PngEncoder::new(&mut bytes);
    image::ImageEncoder::write_image(encoder, &rgb, width, height, image::ExtendedColorType::Rgb8)
        .map_err(|e| format!("the chart could not be encoded: {e}"))?;
    Ok(Png { bytes, width, height })
}

type Drawn = Result<(), Box<dyn std::error::Error>>;

fn plot(chart: &Chart, rgb: &mut [u8], size: (u32, u32)) -> Drawn {
    let root = BitMapBackend::with_buffer(rgb, size).into_drawing_area();
    root.fill(&WHITE)?;
    let n = chart.points().max(1);
    let (lo, hi) = range(chart);
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

//! A `chart` block drawn as a picture: clients that draw no blocks (Element, nheko,
//! FluffyChat) would otherwise show a chart as its numbers at best. Pure: the block's
//! fields in, a PNG out (`draw`), with the font compiled into the binary (DejaVu Sans,
//! from the `dejavu` crate): no system fonts, no network, the same picture on every
//! machine. The turn uploads it once and the message shows it (`turn::media::pictures`); the
//! numbers stay in the text as well (`render::complete`), and the picture's `alt` says
//! the data in words ([`describe`]), so no client is left without them.
//!
//! What is drawn: line, bar and area, up to the catalogue's 8 series of 500 points, with
//! the labels along the bottom (thinned to stay readable), the unit beside the values,
//! the title above, and a legend when there are several series. It is drawn at twice the
//! size it is shown at ([`SHOWN`]), so it stays sharp on a phone, where a client shrinks
//! it to the screen's width.
//!
//! What a chart can cost is bounded whatever its values (a model's call may be an
//! attacker's): the block check keeps values within ±1e15, `draw` refuses a range it
//! cannot step through (none finite, beyond the bound) and widens one too narrow for its
//! magnitude, and [`draw_bounded`] draws at most [`AT_ONCE`] charts in the process at a
//! time, each within [`TIME_LIMIT`].

mod bounded;
mod draw;

use serde_json::{Map, Value};

pub use bounded::{AT_ONCE, TIME_LIMIT, draw_bounded};
pub use draw::{MAX_VALUE, PALETTE, Png, draw};

/// The size a chart is shown at (`<img width height>`); drawn at twice that.
pub const SHOWN: (u32, u32) = (480, 300);

/// How a chart's values are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Line,
    Bar,
    Area,
}

/// One named row of values.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub values: Vec<f64>,
}

/// A chart block's data, as drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub kind: Kind,
    pub title: Option<String>,
    pub unit: Option<String>,
    pub labels: Vec<String>,
    pub series: Vec<Series>,
}

/// A number as the catalogue carries it: a JSON number, or a decimal string (floats are
/// sent as strings, see `blocks::canonicalize`).
fn number(v: &Value) -> Option<f64> {
    v.as_f64().or_else(|| v.as_str()?.trim().parse().ok()).filter(|n: &f64| n.is_finite())
}

fn text(fields: &Map<String, Value>, key: &str) -> Option<String> {
    fields.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned)
}

impl Chart {
    /// The chart a block's fields describe (`None` when it has no values to draw).
    pub fn from_block(fields: &Map<String, Value>) -> Option<Chart> {
        let raw = fields.get("series")?.as_array()?;
        let values = |items: &[Value]| items.iter().map(|v| number(v).unwrap_or(f64::NAN)).collect::<Vec<_>>();
        let series: Vec<Series> = if raw.iter().all(Value::is_object) {
            raw.iter()
                .enumerate()
                .map(|(i, s)| Series {
                    name: s
                        .get("name")
                        .and_then(Value::as_str)
                        .map_or_else(|| format!("Series {}", i + 1), str::to_owned),
                    values: values(s.get("values").and_then(Value::as_array).map_or(&[], Vec::as_slice)),
                })
                .collect()
        } else {
            vec![Series { name: text(fields, "unit").unwrap_or_else(|| "Value".into()), values: values(raw) }]
        };
        if series.iter().all(|s| s.values.iter().all(|v| v.is_nan())) {
            return None;
        }
        let kind = match fields.get("kind").and_then(Value::as_str) {
            Some("bar") => Kind::Bar,
            Some("area") => Kind::Area,
            _ => Kind::Line,
        };
        let labels = fields
            .get("labels")
            .and_then(Value::as_array)
            .map(|l| l.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)).collect())
            .unwrap_or_default();
        Some(Chart { kind, title: text(fields, "title"), unit: text(fields, "unit"), labels, series })
    }

    /// How many points the longest series has.
    pub fn points(&self) -> usize {
        self.series.iter().map(|s| s.values.len()).max().unwrap_or(0)
    }

    /// The label of point `i` (its number from 1 when the chart has no label for it).
    pub fn label(&self, i: usize) -> String {
        self.labels.get(i).cloned().unwrap_or_else(|| (i + 1).to_string())
    }
}

/// Most characters of a picture's description.
const ALT_CHARS: usize = 1_000;

/// The chart in words, for the picture's `alt`: what it is, then each series' points.
pub fn describe(chart: &Chart) -> String {
    let kind = match chart.kind {
        Kind::Line => "Line chart",
        Kind::Bar => "Bar chart",
        Kind::Area => "Area chart",
    };
    let mut out = kind.to_owned();
    if let Some(title) = &chart.title {
        out.push_str(": ");
        out.push_str(title);
    }
    if let Some(unit) = &chart.unit {
        out.push_str(&format!(" ({unit})"));
    }
    out.push('.');
    for s in &chart.series {
        let points: Vec<String> = s
            .values
            .iter()
            .enumerate()
            .filter(|(_, v)| !v.is_nan())
            .map(|(i, v)| format!("{} {}", chart.label(i), format_number(*v)))
            .collect();
        out.push_str(&format!(" {}: {}.", s.name, points.join(", ")));
    }
    crate::blocks::cut(&out, ALT_CHARS)
}

/// A value as people write it: no trailing `.0`, at most 4 decimals.
pub fn format_number(v: f64) -> String {
    let s = format!("{v:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.to_owned() }
}

#[cfg(test)]
mod tests;

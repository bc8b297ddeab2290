//! Renderings of the blocks about a moment, a place or a live figure: countdown, event,
//! place, ticker, weather and tracker.

use serde_json::Value;

use super::Rendered;
use super::display::steps;
use super::doc::{Node, Span};
use super::fields::{Fields, list, num, number, text};

/// A title, linked when the block has a `url`.
fn title(f: &Fields, key: &str) -> Node {
    let t = Span::fact(text(f, key).unwrap_or_default());
    Node::Title(vec![match text(f, "url") {
        Some(url) => t.link(url),
        None => t,
    }])
}

fn line(icon: &str, spans: Vec<Span>) -> Node {
    Node::Line(std::iter::once(Span::deco(format!("{icon} "))).chain(spans).collect())
}

pub fn countdown(f: &Fields) -> Rendered {
    let mut spans: Vec<Span> = text(f, "label").map(|l| vec![Span::fact(l), Span::deco(": ")]).unwrap_or_default();
    spans.push(Span::deco("until "));
    spans.push(Span::time(text(f, "until").unwrap_or_default()).strong());
    Rendered::shown(vec![line("⏳", spans)])
}

pub fn event(f: &Fields) -> Rendered {
    let mut when = vec![Span::time(text(f, "start").unwrap_or_default())];
    if let Some(end) = text(f, "end") {
        when.extend([Span::deco(" – "), Span::time(end)]);
    }
    let mut shown = vec![title(f, "title"), line("🗓️", when)];
    shown.extend(text(f, "location").map(|l| line("📍", vec![Span::fact(l)])));
    shown.extend(text(f, "description").map(|d| Node::Line(vec![Span::fact(d)])));
    Rendered::shown(shown)
}

pub fn place(f: &Fields) -> Rendered {
    let mut shown = vec![title(f, "name")];
    shown.extend(text(f, "address").map(|a| line("📍", vec![Span::fact(a)])));
    shown.extend(num(f, "rating").map(|r| line("★", vec![Span::fact(r)])));
    if let (Some(lat), Some(lon)) = (num(f, "lat"), num(f, "lon")) {
        let map = format!("https://www.openstreetmap.org/?mlat={lat}&mlon={lon}");
        shown.push(line("🗺️", vec![Span::fact(format!("{lat}, {lon}")).link(&map)]));
    }
    Rendered::shown(shown)
}

pub fn ticker(f: &Fields) -> Rendered {
    let mut spans = vec![Span::fact(text(f, "symbol").unwrap_or_default()).strong(), Span::deco(" ")];
    spans.push(Span::fact(num(f, "price").unwrap_or_default()));
    if let Some(currency) = text(f, "currency") {
        spans.extend([Span::deco(" "), Span::fact(currency)]);
    }
    if let Some(change) = num(f, "change") {
        let (arrow, sign) = if change.starts_with('-') { ("▼", "") } else { ("▲", "+") };
        spans.extend([Span::deco(format!(" {arrow} {sign}")), Span::fact(change)]);
    }
    let mut shown = vec![Node::Line(spans)];
    let series: Vec<String> = list(f, "series").iter().filter_map(number).collect();
    if !series.is_empty() {
        let mut recent = vec![Span::deco("Recent: ")];
        for (i, v) in series.into_iter().enumerate() {
            if i > 0 {
                recent.push(Span::deco(", "));
            }
            recent.push(Span::fact(v));
        }
        shown.push(Node::Line(recent));
    }
    Rendered::shown(shown)
}

pub fn weather(f: &Fields) -> Rendered {
    let unit = match text(f, "unit") {
        Some(u) if u.eq_ignore_ascii_case("f") => " °F",
        _ => " °C",
    };
    let mut spans = vec![Span::fact(text(f, "location").unwrap_or_default()).strong(), Span::deco(": ")];
    spans.extend([Span::fact(num(f, "temp").unwrap_or_default()), Span::deco(unit)]);
    if let Some(c) = text(f, "condition") {
        spans.extend([Span::deco(", "), Span::fact(c)]);
    }
    let range: Vec<(&str, String)> =
        [("high", num(f, "high")), ("low", num(f, "low"))].into_iter().filter_map(|(k, v)| Some((k, v?))).collect();
    for (i, (k, v)) in range.iter().enumerate() {
        spans.push(Span::deco(if i == 0 { format!(" ({k} ") } else { format!(", {k} ") }));
        spans.push(Span::fact(v.clone()));
    }
    if !range.is_empty() {
        spans.push(Span::deco(")"));
    }
    Rendered::shown(vec![line("🌡️", spans)])
}

pub fn tracker(f: &Fields) -> Rendered {
    let mut shown =
        vec![title(f, "title"), Node::Line(vec![Span::fact(text(f, "state").unwrap_or_default()).strong()])];
    if f.get("steps").is_some_and(Value::is_array) {
        shown.push(steps(list(f, "steps")));
    }
    shown.extend(text(f, "eta").map(|eta| Node::Line(vec![Span::deco("ETA "), Span::time(eta)])));
    shown.extend(text(f, "detail").map(|d| Node::Line(vec![Span::fact(d)])));
    Rendered::shown(shown)
}

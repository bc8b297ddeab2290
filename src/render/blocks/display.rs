//! Renderings of the blocks that show data laid out: table, chart, sources, card(s),
//! progress, details, code, diff, math, gallery and file.

use serde_json::Value;

use super::Rendered;
use super::actions;
use super::doc::{Node, Span};
use super::fields::{Fields, cell, list, num, number, object, size, text};

pub fn table(f: &Fields) -> Rendered {
    let columns = list(f, "columns");
    let key = |c: &Value| c.as_str().or_else(|| c.get("key")?.as_str()).unwrap_or_default().to_owned();
    let head: Vec<String> = columns
        .iter()
        .map(|c| c.as_str().or_else(|| c.get("label")?.as_str()).or_else(|| c.get("key")?.as_str()).unwrap_or_default())
        .map(|s| s.trim().to_owned())
        .collect();
    let rows: Vec<Vec<String>> = list(f, "rows")
        .iter()
        .map(|row| match row {
            Value::Array(cells) => cells.iter().map(cell).collect(),
            Value::Object(o) => columns.iter().map(|c| o.get(&key(c)).map(cell).unwrap_or_default()).collect(),
            other => vec![cell(other)],
        })
        .collect();
    let right = (0..head.len())
        .map(|i| {
            let aligned = columns[i].get("align").and_then(Value::as_str);
            aligned == Some("right")
                || (aligned.is_none()
                    && rows
                        .iter()
                        .all(|r| r.get(i).is_none_or(|c| number(&Value::String(c.clone())).is_some() || c.is_empty())))
        })
        .collect();
    let caption = text(f, "caption").map(str::to_owned);
    Rendered::shown(vec![Node::Table { caption, head, rows, right }])
}

/// The data in words and as a table: one row per point, one column per series.
pub fn chart(f: &Fields) -> Rendered {
    let series = list(f, "series");
    let (names, values): (Vec<String>, Vec<Vec<String>>) = if series.iter().all(Value::is_object) {
        series
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let s = object(s);
                let name = text(&s, "name").map_or_else(|| format!("Series {}", i + 1), str::to_owned);
                (name, list(&s, "values").iter().map(|v| number(v).unwrap_or_default()).collect())
            })
            .unzip()
    } else {
        (
            vec![text(f, "unit").unwrap_or("Value").to_owned()],
            vec![series.iter().map(|v| number(v).unwrap_or_default()).collect()],
        )
    };
    let labels: Vec<String> = list(f, "labels").iter().map(cell).collect();
    let points = values.iter().map(Vec::len).max().unwrap_or(0);
    let rows = (0..points)
        .map(|i| {
            let label = labels.get(i).cloned().unwrap_or_else(|| (i + 1).to_string());
            std::iter::once(label).chain(values.iter().map(|v| v.get(i).cloned().unwrap_or_default())).collect()
        })
        .collect();
    let mut title = vec![Span::deco("📈 ")];
    title.extend(text(f, "title").map(Span::fact));
    if let Some(unit) = text(f, "unit") {
        title.push(Span::deco(" ("));
        title.push(Span::fact(unit));
        title.push(Span::deco(")"));
    }
    let head = std::iter::once(String::new()).chain(names).collect::<Vec<_>>();
    let right = std::iter::once(false).chain(head.iter().skip(1).map(|_| true)).collect();
    Rendered::shown(vec![Node::Title(title), Node::Table { caption: None, head, rows, right }])
}

pub fn sources(f: &Fields) -> Rendered {
    let items = list(f, "sources")
        .iter()
        .map(|s| {
            let s = object(s);
            let url = text(&s, "url").unwrap_or_default();
            vec![Span::fact(text(&s, "title").unwrap_or(url)).link(url)]
        })
        .collect();
    Rendered::shown(vec![Node::Line(vec![Span::deco("Sources").strong()]), Node::List { ordered: false, items }])
}

pub fn card(f: &Fields) -> Rendered {
    let title = Span::fact(text(f, "title").unwrap_or_default());
    let mut shown = vec![Node::Title(vec![match text(f, "url") {
        Some(url) => title.link(url),
        None => title,
    }])];
    if let Some(sub) = text(f, "subtitle") {
        shown.push(Node::Line(vec![Span::fact(sub).em()]));
    }
    if let Some(price) = num(f, "price") {
        let mut line = vec![Span::fact(price)];
        if let Some(currency) = text(f, "currency") {
            line.extend([Span::deco(" "), Span::fact(currency)]);
        }
        shown.push(Node::Line(line));
    }
    let fields: Vec<Vec<Span>> = list(f, "fields")
        .iter()
        .map(|x| {
            let x = object(x);
            let value = x.get("value").map(cell).unwrap_or_default();
            vec![Span::fact(text(&x, "label").unwrap_or_default()), Span::deco(": "), Span::fact(value)]
        })
        .collect();
    if !fields.is_empty() {
        shown.push(Node::List { ordered: false, items: fields });
    }
    Rendered { shown, always: actions::line(list(f, "actions")) }
}

pub fn cards(f: &Fields) -> Rendered {
    let mut out = Rendered::default();
    for c in list(f, "cards") {
        let one = card(&object(c));
        out.shown.extend(one.shown);
        out.always.extend(one.always);
    }
    out
}

const STATES: &[(&str, &str)] =
    &[("done", "✅"), ("active", "▶️"), ("pending", "⬜"), ("failed", "❌"), ("skipped", "⏭️")];

/// Steps with their state as an icon (progress and tracker).
pub fn steps(values: &[Value]) -> Node {
    let items = values
        .iter()
        .map(|s| {
            let s = object(s);
            let state = text(&s, "state").unwrap_or("pending");
            let icon = STATES.iter().find(|(k, _)| *k == state).map_or("•", |(_, i)| *i);
            vec![Span::deco(format!("{icon} ")), Span::fact(text(&s, "label").unwrap_or_default())]
        })
        .collect();
    Node::Lines(items)
}

pub fn progress(f: &Fields) -> Rendered {
    let mut shown: Vec<Node> = text(f, "title").map(|t| Node::Title(vec![Span::fact(t)])).into_iter().collect();
    shown.push(steps(list(f, "steps")));
    Rendered::shown(shown)
}

pub fn details(f: &Fields) -> Rendered {
    let summary = text(f, "summary").unwrap_or_default().to_owned();
    Rendered::shown(vec![Node::Details { summary, body: text(f, "body").unwrap_or_default().to_owned() }])
}

fn code_of(f: &Fields, field: &str, lang: Option<&str>) -> Rendered {
    let mut shown: Vec<Node> =
        text(f, "filename").map(|n| Node::Line(vec![Span::fact(n).code()])).into_iter().collect();
    let code = f.get(field).and_then(Value::as_str).unwrap_or_default().trim_end().to_owned();
    shown.push(Node::Code { lang: lang.map(str::to_owned), text: code });
    Rendered::shown(shown)
}

pub fn code(f: &Fields) -> Rendered {
    code_of(f, "code", text(f, "language"))
}

pub fn diff(f: &Fields) -> Rendered {
    code_of(f, "diff", Some("diff"))
}

pub fn math(f: &Fields) -> Rendered {
    let tex = text(f, "tex").unwrap_or_default().to_owned();
    let display = f.get("display").and_then(Value::as_bool).unwrap_or(true);
    let mut shown = vec![Node::Math { tex, display }];
    shown.extend(text(f, "caption").map(|c| Node::Line(vec![Span::fact(c).em()])));
    Rendered::shown(shown)
}

/// The pictures' descriptions; the pictures themselves go as pictures.
pub fn gallery(f: &Fields) -> Rendered {
    let images = list(f, "images");
    let alts: Vec<Vec<Span>> =
        images.iter().filter_map(|i| i.get("alt")?.as_str()).map(|a| vec![Span::fact(a.trim())]).collect();
    let mut shown = vec![Node::Line(vec![Span::deco(format!("🖼️ {} pictures", images.len()))])];
    if !alts.is_empty() {
        shown.push(Node::List { ordered: false, items: alts });
    }
    Rendered::shown(shown)
}

pub fn file(f: &Fields) -> Rendered {
    let mut line = vec![Span::deco("📎 "), Span::fact(text(f, "name").unwrap_or_default()).strong()];
    let about: Vec<String> = [f.get("size").and_then(Value::as_u64).map(size), text(f, "mimetype").map(str::to_owned)]
        .into_iter()
        .flatten()
        .collect();
    if !about.is_empty() {
        line.push(Span::deco(format!(" ({})", about.join(", "))));
    }
    Rendered::shown(vec![Node::Line(line)])
}

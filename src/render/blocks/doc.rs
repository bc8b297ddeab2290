//! The small document model every block renders to, and its two writers: Matrix HTML
//! (only tags the spec lists, everything escaped) and plain text. One model for both, so
//! the HTML and the plain text of a block always say the same things, and the facts the
//! completion rule looks for are read off the same spans.

use std::fmt::Write;

/// A piece of a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub text: String,
    pub style: Style,
    /// The block's own words (a label, a value, a title), as opposed to what richbot adds
    /// around them (icons, "React ✅ for"): only these must be in the text.
    pub fact: bool,
    /// Other ways of writing the same fact that also count as carrying it (a time's
    /// clock or date).
    pub alts: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Style {
    Plain,
    Strong,
    Em,
    Code,
    Link(String),
}

impl Span {
    pub fn fact(text: impl Into<String>) -> Self {
        Self { text: text.into(), style: Style::Plain, fact: true, alts: Vec::new() }
    }
    pub fn deco(text: impl Into<String>) -> Self {
        Self { text: text.into(), style: Style::Plain, fact: false, alts: Vec::new() }
    }
    /// An ISO 8601 time, shown as "2026-12-01 18:00 UTC"; carried by a text that has the
    /// time as sent, its date or its clock.
    pub fn time(iso: &str) -> Self {
        let (date, rest) = iso.split_once(['T', 't', ' ']).unwrap_or((iso, ""));
        let clock: String = rest.chars().take(5).collect();
        let zone = match rest.find(['Z', 'z', '+', '-']) {
            Some(i) if rest[i..].eq_ignore_ascii_case("z") => "UTC".to_owned(),
            Some(i) => format!("UTC{}", &rest[i..]),
            None => String::new(),
        };
        let text = [date, &clock, &zone].iter().filter(|p| !p.is_empty()).copied().collect::<Vec<_>>().join(" ");
        Self { text, style: Style::Plain, fact: true, alts: vec![iso.to_owned(), date.to_owned(), clock] }
    }
    pub fn strong(self) -> Self {
        Self { style: Style::Strong, ..self }
    }
    pub fn em(self) -> Self {
        Self { style: Style::Em, ..self }
    }
    pub fn code(self) -> Self {
        Self { style: Style::Code, ..self }
    }
    pub fn link(self, url: &str) -> Self {
        Self { style: Style::Link(url.to_owned()), ..self }
    }
}

/// A block-level piece.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// The block's title: a line of its own, bold in HTML.
    Title(Vec<Span>),
    Line(Vec<Span>),
    List {
        ordered: bool,
        items: Vec<Vec<Span>>,
    },
    /// Lines that each start with their own icon (a step's state): no bullets.
    Lines(Vec<Vec<Span>>),
    /// Every cell a fact; `right` per column (numbers).
    Table {
        caption: Option<String>,
        head: Vec<String>,
        rows: Vec<Vec<String>>,
        right: Vec<bool>,
    },
    Code {
        lang: Option<String>,
        text: String,
    },
    /// TeX, marked as maths the way the spec says (`data-mx-maths`, MSC2191).
    Math {
        tex: String,
        display: bool,
    },
    Details {
        summary: String,
        body: String,
    },
    /// A picture shown inline (`src` an `mxc://` URL); nothing in plain text, where its
    /// block's facts say what it shows.
    Image {
        src: String,
        alt: String,
        width: Option<u32>,
        height: u32,
    },
}

/// A fact and the other ways of writing it: a text carries it if it has any of them.
pub type Fact = Vec<String>;

/// The facts of `nodes`: every span marked as one (and a link's address), every cell,
/// caption, code and TeX.
pub fn facts(nodes: &[Node]) -> Vec<Fact> {
    let mut out: Vec<Fact> = Vec::new();
    let spans = |out: &mut Vec<Fact>, spans: &[Span]| {
        for s in spans.iter().filter(|s| s.fact) {
            out.push(std::iter::once(s.text.clone()).chain(s.alts.iter().cloned()).collect());
            if let Style::Link(url) = &s.style {
                out.push(vec![url.clone()]);
            }
        }
    };
    for node in nodes {
        match node {
            Node::Title(s) | Node::Line(s) => spans(&mut out, s),
            Node::List { items, .. } | Node::Lines(items) => items.iter().for_each(|s| spans(&mut out, s)),
            Node::Table { caption, head, rows, .. } => {
                let cells = caption.iter().chain(head).chain(rows.iter().flatten());
                out.extend(cells.map(|c| vec![c.clone()]));
            }
            Node::Code { text, .. } => out.push(vec![text.clone()]),
            Node::Math { tex, .. } => out.push(vec![tex.clone()]),
            Node::Details { summary, body } => out.extend([vec![summary.clone()], vec![body.clone()]]),
            Node::Image { .. } => {}
        }
    }
    out.iter_mut().for_each(|f| f.retain(|alt| !alt.trim().is_empty()));
    out.retain(|f| !f.is_empty());
    out
}

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn spans_html(spans: &[Span]) -> String {
    let mut out = String::new();
    for s in spans {
        let t = escape(&s.text);
        match &s.style {
            Style::Plain => out.push_str(&t),
            Style::Strong => write!(out, "<strong>{t}</strong>").unwrap_or(()),
            Style::Em => write!(out, "<em>{t}</em>").unwrap_or(()),
            Style::Code => write!(out, "<code>{t}</code>").unwrap_or(()),
            Style::Link(url) => write!(out, "<a href=\"{}\">{t}</a>", escape(url)).unwrap_or(()),
        }
    }
    out
}

fn spans_plain(spans: &[Span]) -> String {
    let mut out = String::new();
    for s in spans {
        match &s.style {
            Style::Link(url) if *url != s.text => write!(out, "{} ({url})", s.text).unwrap_or(()),
            _ => out.push_str(&s.text),
        }
    }
    out
}

/// Matrix HTML.
pub fn html(nodes: &[Node]) -> String {
    let mut out = String::new();
    for node in nodes {
        match node {
            Node::Title(s) => write!(out, "<p><strong>{}</strong></p>", spans_html(s)).unwrap_or(()),
            Node::Line(s) => write!(out, "<p>{}</p>", spans_html(s)).unwrap_or(()),
            Node::List { ordered, items } => {
                let tag = if *ordered { "ol" } else { "ul" };
                out.push_str(&format!("<{tag}>"));
                for item in items {
                    write!(out, "<li>{}</li>", spans_html(item)).unwrap_or(());
                }
                out.push_str(&format!("</{tag}>"));
            }
            Node::Lines(lines) => {
                let lines: Vec<String> = lines.iter().map(|l| spans_html(l)).collect();
                write!(out, "<p>{}</p>", lines.join("<br>")).unwrap_or(());
            }
            Node::Table { caption, head, rows, .. } => table_html(&mut out, caption.as_deref(), head, rows),
            Node::Code { lang, text } => {
                let class = lang.as_deref().map(|l| format!(" class=\"language-{}\"", escape(l))).unwrap_or_default();
                write!(out, "<pre><code{class}>{}</code></pre>", escape(text)).unwrap_or(());
            }
            Node::Math { tex, display: true } => {
                write!(out, "<div data-mx-maths=\"{0}\"><code>{0}</code></div>", escape(tex)).unwrap_or(())
            }
            Node::Math { tex, display: false } => {
                write!(out, "<p><span data-mx-maths=\"{0}\"><code>{0}</code></span></p>", escape(tex)).unwrap_or(())
            }
            Node::Details { summary, body } => {
                let paras: String = body.split("\n\n").map(|p| format!("<p>{}</p>", escape(p.trim()))).collect();
                write!(out, "<details><summary>{}</summary>{paras}</details>", escape(summary)).unwrap_or(());
            }
            Node::Image { src, alt, width, height } => {
                let width = width.map(|w| format!(" width=\"{w}\"")).unwrap_or_default();
                let (src, alt) = (escape(src), escape(alt));
                write!(out, "<p><img src=\"{src}\" alt=\"{alt}\"{width} height=\"{height}\"></p>").unwrap_or(())
            }
        }
    }
    out
}

fn table_html(out: &mut String, caption: Option<&str>, head: &[String], rows: &[Vec<String>]) {
    out.push_str("<table>");
    if let Some(c) = caption {
        write!(out, "<caption>{}</caption>", escape(c)).unwrap_or(());
    }
    let cells =
        |tag: &str, row: &[String]| -> String { row.iter().map(|c| format!("<{tag}>{}</{tag}>", escape(c))).collect() };
    write!(out, "<thead><tr>{}</tr></thead><tbody>", cells("th", head)).unwrap_or(());
    for row in rows {
        write!(out, "<tr>{}</tr>", cells("td", row)).unwrap_or(());
    }
    out.push_str("</tbody></table>");
}

/// Plain text: lines, "• " and "1. " lists, tables as aligned columns.
pub fn plain(nodes: &[Node]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for node in nodes.iter().filter(|n| !matches!(n, Node::Image { .. })) {
        parts.push(match node {
            Node::Title(s) | Node::Line(s) => spans_plain(s),
            Node::List { ordered, items } => items
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    if *ordered { format!("{}. {}", i + 1, spans_plain(s)) } else { format!("• {}", spans_plain(s)) }
                })
                .collect::<Vec<_>>()
                .join("\n"),
            Node::Lines(lines) => lines.iter().map(|l| spans_plain(l)).collect::<Vec<_>>().join("\n"),
            Node::Table { caption, head, rows, right } => table_plain(caption.as_deref(), head, rows, right),
            Node::Code { text, .. } => text.trim_end().to_owned(),
            Node::Math { tex, .. } => tex.clone(),
            Node::Details { summary, body } => format!("{summary}\n{body}"),
            Node::Image { .. } => String::new(),
        });
    }
    parts.join("\n")
}

pub fn table_plain(caption: Option<&str>, head: &[String], rows: &[Vec<String>], right: &[bool]) -> String {
    let width = |s: &str| s.chars().count();
    let mut widths: Vec<usize> = head.iter().map(|h| width(h)).collect();
    for row in rows {
        for (i, c) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(width(c));
            }
        }
    }
    let line = |row: &[String]| -> String {
        let cells = widths.iter().enumerate().map(|(i, w)| {
            let c = row.get(i).map(String::as_str).unwrap_or("");
            let pad = " ".repeat(w - width(c).min(*w));
            if right.get(i).copied().unwrap_or(false) { format!("{pad}{c}") } else { format!("{c}{pad}") }
        });
        cells.collect::<Vec<_>>().join("  ").trim_end().to_owned()
    };
    let mut out: Vec<String> = caption.map(str::to_owned).into_iter().collect();
    out.push(line(head));
    out.push(widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("  "));
    out.extend(rows.iter().map(|r| line(r)));
    out.join("\n")
}

//! A message's `body` as plain text. Room-list previews, notifications, reply quotes and
//! clients without HTML show `body` as it is, so it carries no Markdown markers: headings
//! are lines, emphasis and code are their words, links read "text (url)", lists are
//! "• " and "1. " lines, quotes are "│ " lines, task lists ✅ / ⬜, and tables aligned
//! columns. The HTML (`formatted_body`) is rendered from the same Markdown.

use pulldown_cmark::{Alignment, Event, Parser, Tag, TagEnd};

use super::MARKDOWN;
use super::blocks::doc::table_plain;

/// A horizontal rule, as a line.
const RULE: &str = "──────────";

/// `markdown` as plain text (see the module docs).
pub fn plain_text(markdown: &str) -> String {
    let mut w = Writer::default();
    for event in Parser::new_ext(markdown, MARKDOWN) {
        w.event(event);
    }
    let lines: Vec<&str> = w.out.lines().map(str::trim_end).collect();
    lines.join("\n").trim().to_owned()
}

#[derive(Default)]
struct Writer {
    out: String,
    /// What each open quote or list item puts before its lines.
    indent: Vec<String>,
    /// Each open list's next number (`None`: bullets).
    lists: Vec<Option<u64>>,
    /// Each open link or image: where its text starts, and its address.
    links: Vec<(usize, String)>,
    table: Option<Table>,
    /// The current line has words (not only its indent).
    words: bool,
    /// A quote or list item was just opened: its first block needs no blank line.
    opened: bool,
}

#[derive(Default)]
struct Table {
    rows: Vec<Vec<String>>,
    right: Vec<bool>,
}

impl Writer {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) | Event::Code(t) | Event::InlineMath(t) | Event::DisplayMath(t) => self.text(&t),
            Event::Html(t) | Event::InlineHtml(t) => self.text(&untagged(&t)),
            Event::FootnoteReference(t) => self.text(&format!("[{t}]")),
            Event::SoftBreak | Event::HardBreak => self.newline(),
            Event::Rule => {
                self.block();
                self.text(RULE);
            }
            Event::TaskListMarker(done) => self.text(if done { "✅ " } else { "⬜ " }),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph | Tag::Heading { .. } | Tag::CodeBlock(_) | Tag::HtmlBlock => self.block(),
            Tag::BlockQuote(_) => {
                self.block();
                self.out.push_str("│ ");
                self.indent.push("│ ".to_owned());
                self.opened = true;
            }
            Tag::List(first) => {
                if self.lists.is_empty() {
                    self.block();
                } else if self.words {
                    self.newline();
                }
                self.lists.push(first);
            }
            Tag::Item => {
                self.fresh_line();
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        *n += 1;
                        format!("{}. ", *n - 1)
                    }
                    _ => "• ".to_owned(),
                };
                self.out.push_str(&marker);
                self.indent.push(" ".repeat(marker.chars().count()));
                self.opened = true;
            }
            Tag::Table(aligns) => {
                let right = aligns.iter().map(|a| *a == Alignment::Right).collect();
                self.table = Some(Table { rows: Vec::new(), right });
            }
            Tag::TableHead | Tag::TableRow => {
                if let Some(t) = &mut self.table {
                    t.rows.push(Vec::new());
                }
            }
            Tag::TableCell => {
                if let Some(row) = self.table.as_mut().and_then(|t| t.rows.last_mut()) {
                    row.push(String::new());
                }
            }
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                let at = self.sink().len();
                self.links.push((at, dest_url.into_string()));
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::BlockQuote(_) | TagEnd::Item => {
                self.indent.pop();
                self.opened = false;
            }
            TagEnd::List(_) => {
                self.lists.pop();
            }
            TagEnd::Table => {
                let Some(t) = self.table.take() else { return };
                let mut rows = t.rows.into_iter();
                let head = rows.next().unwrap_or_default();
                let rows: Vec<Vec<String>> = rows.collect();
                self.block();
                self.text(&table_plain(None, &head, &rows, &t.right));
            }
            TagEnd::Link | TagEnd::Image => {
                let Some((at, url)) = self.links.pop() else { return };
                let said = self.sink().get(at..).unwrap_or_default().trim().to_owned();
                let bare = url.strip_prefix("mailto:").unwrap_or(&url);
                if said.is_empty() {
                    self.text(&url);
                } else if !url.is_empty() && said != url && said != bare {
                    self.text(&format!(" ({url})"));
                }
            }
            _ => {}
        }
    }

    /// Where words go now: the open table cell, or the text.
    fn sink(&mut self) -> &mut String {
        match self.table.as_mut().and_then(|t| t.rows.last_mut()).and_then(|r| r.last_mut()) {
            Some(cell) => cell,
            None => &mut self.out,
        }
    }

    fn text(&mut self, text: &str) {
        if self.table.is_some() {
            self.sink().push_str(&text.replace('\n', " "));
            return;
        }
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                self.newline();
            }
            self.out.push_str(line);
            if !line.is_empty() {
                self.words = true;
                self.opened = false;
            }
        }
    }

    fn newline(&mut self) {
        if self.table.is_some() {
            self.sink().push(' ');
            return;
        }
        self.out.push('\n');
        for i in &self.indent {
            self.out.push_str(i);
        }
        self.words = false;
    }

    /// At the start of a line with the open containers' indent (a code block's last
    /// line break left one with a deeper indent).
    fn fresh_line(&mut self) {
        if self.words {
            return self.newline();
        }
        let start = self.out.rfind('\n').map_or(0, |i| i + 1);
        if self.out.len() > start && self.out[start..].trim().is_empty() {
            self.out.truncate(start);
            for i in &self.indent {
                self.out.push_str(i);
            }
        }
    }

    /// A new block: a blank line after what came before, but first in a quote or item.
    fn block(&mut self) {
        if std::mem::take(&mut self.opened) || self.out.is_empty() {
            return;
        }
        if self.words {
            self.newline();
        }
        self.newline();
    }
}

/// HTML's words, its tags dropped.
pub(super) fn untagged(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests;

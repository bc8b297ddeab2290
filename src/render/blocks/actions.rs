//! Renderings of what a member can act on: buttons, chips and card actions as one line
//! that says how to press each in any client ("React ✅ for *Yes* · or reply *Later*"),
//! a form's fields, and a stream's link.

use serde_json::Value;

use super::Rendered;
use super::doc::{Node, Span};
use super::fields::{Fields, list, object, text};
use crate::blocks::{Action, Button};

/// The line for `buttons` (empty when none parses): reactions first, then the replies.
pub fn line(buttons: &[Value]) -> Vec<Node> {
    let buttons: Vec<Button> = buttons.iter().filter_map(|b| serde_json::from_value(b.clone()).ok()).collect();
    let mut spans = Vec::new();
    for (i, b) in buttons.iter().filter(|b| matches!(b.action, Action::React { .. })).enumerate() {
        let Action::React { key } = &b.action else { continue };
        spans.push(Span::deco(if i == 0 { format!("React {key} for ") } else { format!(" · {key} for ") }));
        spans.push(Span::fact(b.label.trim()).em());
    }
    let sends: Vec<&Button> = buttons.iter().filter(|b| matches!(b.action, Action::Send { .. })).collect();
    for (i, b) in sends.iter().enumerate() {
        spans.push(Span::deco(match (i, spans.is_empty()) {
            (0, true) => "Reply ",
            (0, false) => " · or reply ",
            _ => " or ",
        }));
        spans.push(Span::fact(b.label.trim()).em());
    }
    if spans.is_empty() { Vec::new() } else { vec![Node::Line(spans)] }
}

pub fn buttons(f: &Fields) -> Rendered {
    Rendered { shown: Vec::new(), always: line(list(f, "buttons")) }
}

pub fn chips(f: &Fields) -> Rendered {
    Rendered { shown: Vec::new(), always: line(list(f, "chips")) }
}

/// The fields with their choices, and how to answer.
pub fn form(f: &Fields) -> Rendered {
    let items = list(f, "fields")
        .iter()
        .map(|x| {
            let x = object(x);
            let options: Vec<&str> = list(&x, "options").iter().filter_map(Value::as_str).collect();
            let mut spans = vec![Span::fact(text(&x, "label").unwrap_or_default()).strong()];
            let choices = match text(&x, "kind") {
                Some("bool") => vec!["yes".to_owned(), "no".to_owned()],
                _ => options.iter().map(|o| o.to_string()).collect(),
            };
            if !choices.is_empty() {
                spans.push(Span::deco(if text(&x, "kind") == Some("multi") { ": any of " } else { ": " }));
                for (i, c) in choices.into_iter().enumerate() {
                    if i > 0 {
                        spans.push(Span::deco(" / "));
                    }
                    spans.push(Span::fact(c));
                }
            }
            spans
        })
        .collect();
    let mut shown = vec![Node::List { ordered: true, items }];
    let how = Span::deco("reply with your answers, one line per question.");
    shown.push(Node::Line(match text(f, "submit") {
        Some(submit) => vec![Span::deco("To "), Span::fact(submit).em(), Span::deco(", "), how],
        None => vec![Span::deco("Reply with your answers, one line per question.")],
    }));
    Rendered::shown(shown)
}

/// A stream's link when it has one; its id and state are for renderers, not readers.
pub fn stream(f: &Fields) -> Rendered {
    let link = text(f, "url").map(|u| Node::Line(vec![Span::deco("Live: "), Span::fact(u).link(u)]));
    Rendered::shown(link.into_iter().collect())
}

//! Pictures shown inline in a message's HTML, where media may be shown by URL: a chart's
//! drawing (drawn and uploaded by the turn, `crate::chart`), a card's image, a gallery's
//! images. Each goes before its block's text, capped in height so one message cannot
//! fill a screen. Not in encrypted rooms: there a picture goes as an encrypted message
//! of its own after the message (`turn::media::pictures`), since an `<img>` can only point at
//! media stored in the clear.

use serde_json::Value;

use super::doc::Node;
use super::fields::{Fields, list, object, text};

/// A chart block's drawing, uploaded: for the block at index `block` of the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inline {
    pub block: usize,
    pub src: String,
    /// The data in words (`chart::describe`).
    pub alt: String,
    pub width: u32,
    pub height: u32,
}

/// How a message shows its pictures: inline or not, and the charts drawn for it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pictures<'a> {
    pub inline: bool,
    pub charts: &'a [Inline],
}

impl<'a> Pictures<'a> {
    /// Pictures inline, with `charts`.
    pub fn inline(charts: &'a [Inline]) -> Self {
        Self { inline: true, charts }
    }
}

/// Height of a card's or a gallery's picture as shown, in pixels.
pub const PICTURE_HEIGHT: u32 = 240;

/// The inline pictures of block `block` (of type `ty`).
pub(super) fn nodes(ty: &str, fields: &Fields, block: usize, pictures: Pictures<'_>) -> Vec<Node> {
    if !pictures.inline {
        return Vec::new();
    }
    let image = |src: Option<&str>, alt: Option<&str>| {
        let src = src.filter(|s| s.starts_with("mxc://"))?;
        Some(Node::Image {
            src: src.to_owned(),
            alt: alt.unwrap_or("picture").to_owned(),
            width: None,
            height: PICTURE_HEIGHT,
        })
    };
    match ty {
        "chart" => pictures
            .charts
            .iter()
            .filter(|c| c.block == block)
            .map(|c| Node::Image { src: c.src.clone(), alt: c.alt.clone(), width: Some(c.width), height: c.height })
            .collect(),
        "card" => image(text(fields, "image"), text(fields, "title")).into_iter().collect(),
        "cards" => list(fields, "cards")
            .iter()
            .filter_map(|c| {
                let c = object(c);
                image(text(&c, "image"), text(&c, "title"))
            })
            .collect(),
        "gallery" => list(fields, "images")
            .iter()
            .filter_map(|i| image(i.get("url")?.as_str(), i.get("alt").and_then(Value::as_str)))
            .collect(),
        _ => Vec::new(),
    }
}

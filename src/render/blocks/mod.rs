//! What a client that draws no blocks shows of them: every block type of the catalogue
//! has a rendering (one row of [`RENDERERS`]), built as a small document (`doc.rs`) and
//! written both as Matrix HTML and as plain text, so the two always say the same.
//!
//! The model's `fallback` leads: it is what the member reads first, as the model wrote
//! it. richbot then **completes** it, per block, in the order of the blocks:
//! - **Shown facts.** A block's facts are its own words: titles, labels, values, cells,
//!   names, the code, the TeX (not the icons and joining words richbot adds). When the
//!   fallback carries every fact of a block, nothing is added for it; when it misses any,
//!   richbot appends its whole rendering of that block. "Carries" is a loose match made
//!   the same way on both sides: case, Markdown markers (`*_`|#>~\`) and runs of white
//!   space are ignored, so `**21.5 °C**` carries `21.5`; a time is also carried by its
//!   date or its clock as written in ISO form (`2026-12-01`, `18:00`).
//! - **What text cannot carry** is always added: how to press the buttons, chips and a
//!   card's actions ("React ✅ for *Yes* · or reply *Later*").
//!
//! - **Pictures** go before their block's text where they can be shown inline
//!   (`pictures.rs`): a chart's drawing, a card's and a gallery's images.
//!
//! So the text says everything the blocks show whatever the model wrote, and repeats
//! nothing the model did write. Blocks that cannot load or are unknown get nothing.

mod actions;
mod display;
pub(super) mod doc;
mod fields;
mod pictures;
mod timely;

use serde_json::Value;

use crate::blocks::{Block, Rich};
use doc::Node;
pub(super) use doc::escape;
use fields::Fields;
pub use pictures::{Inline, PICTURE_HEIGHT, Pictures};

/// A block's rendering: what is shown only when the fallback misses one of its facts,
/// and what is always added.
#[derive(Debug, Default)]
pub struct Rendered {
    pub shown: Vec<Node>,
    pub always: Vec<Node>,
}

impl Rendered {
    fn shown(shown: Vec<Node>) -> Self {
        Self { shown, always: Vec::new() }
    }
}

type Render = fn(&Fields) -> Rendered;

/// One renderer per catalogue type (a test checks none is missing).
pub const RENDERERS: &[(&str, Render)] = &[
    ("buttons", actions::buttons),
    ("chips", actions::chips),
    ("table", display::table),
    ("chart", display::chart),
    ("sources", display::sources),
    ("card", display::card),
    ("cards", display::cards),
    ("progress", display::progress),
    ("details", display::details),
    ("code", display::code),
    ("diff", display::diff),
    ("countdown", timely::countdown),
    ("event", timely::event),
    ("place", timely::place),
    ("ticker", timely::ticker),
    ("weather", timely::weather),
    ("tracker", timely::tracker),
    ("math", display::math),
    ("gallery", display::gallery),
    ("file", display::file),
    ("form", actions::form),
    ("stream", actions::stream),
];

/// What richbot adds after the fallback, as HTML and as plain text (one part per block,
/// blank lines between).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Completion {
    pub html: String,
    pub plain: String,
}

impl Completion {
    pub fn is_empty(&self) -> bool {
        self.plain.is_empty() && self.html.is_empty()
    }
}

/// A block's whole rendering, HTML and plain (for the golden files and `!help`-like
/// displays), regardless of any fallback.
pub fn render_block(block: &Value) -> Option<(String, String)> {
    let fields = block.as_object()?;
    let render = renderer(fields.get("type")?.as_str()?)?;
    let r = render(fields);
    let nodes: Vec<Node> = r.shown.into_iter().chain(r.always).collect();
    Some((doc::html(&nodes), doc::plain(&nodes)))
}

fn renderer(ty: &str) -> Option<Render> {
    RENDERERS.iter().find(|(name, _)| *name == ty).map(|(_, r)| *r)
}

/// The completion of `fallback` for `payload`, with its `pictures` (see the module doc).
pub fn complete(fallback: &str, payload: &Value, pictures: Pictures<'_>) -> Completion {
    let Ok(rich) = Rich::from_value(payload) else { return Completion::default() };
    let carried = normalize(fallback);
    let mut html = String::new();
    let mut plain: Vec<String> = Vec::new();
    for (i, block) in rich.blocks().iter().enumerate() {
        let Block::Known { spec, fields } = block else { continue };
        let Some(render) = renderer(spec.name) else { continue };
        let r = render(fields);
        let missing = doc::facts(&r.shown).iter().any(|fact| !fact.iter().any(|alt| carried.contains(&normalize(alt))));
        let mut nodes = pictures::nodes(spec.name, fields, i, pictures);
        if missing {
            nodes.extend(r.shown);
        }
        nodes.extend(r.always);
        if !nodes.is_empty() {
            html.push_str(&doc::html(&nodes));
            // A picture alone says nothing in plain text.
            plain.extend(Some(doc::plain(&nodes)).filter(|p| !p.is_empty()));
        }
    }
    Completion { html, plain: plain.join("\n\n") }
}

/// Lower case, without Markdown markers, white space collapsed to one space.
fn normalize(s: &str) -> String {
    let cleaned: String = s
        .chars()
        .map(|c| if matches!(c, '*' | '_' | '`' | '|' | '#' | '>' | '~' | '\\') { ' ' } else { c })
        .flat_map(char::to_lowercase)
        .collect();
    cleaned.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests;

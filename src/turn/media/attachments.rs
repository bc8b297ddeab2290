//! What goes as messages of their own right after a rich message, in its thread
//! (`render::attachments`): each `file` block as an `m.file`, so every client offers the
//! download; and in an encrypted room each picture (a chart's drawing, a card's or a
//! gallery's image) as an `m.image` carrying its key, since there nothing is shown by a
//! clear URL. Each is a write of the turn's own, so it is posted once, a resumed turn
//! finding it.

use ruma::{EventId, RoomId};
use serde_json::Value;

use super::planned::Drawn;
use crate::blocks::{Block, Rich};
use crate::outbox::Write;
use crate::render::{self, Info, Relation};
use crate::turn::reach::Reach;
use crate::turn::stop::{Stop, outbox_error};

/// The pictures of a block that a client may not show: `(mxc, words)`.
fn pictures(ty: &str, fields: &serde_json::Map<String, Value>) -> Vec<(String, String)> {
    let text = |f: &serde_json::Map<String, Value>, k: &str| f.get(k).and_then(Value::as_str).map(str::to_owned);
    let card = |f: &serde_json::Map<String, Value>| Some((text(f, "image")?, text(f, "title").unwrap_or_default()));
    match ty {
        "card" => card(fields).into_iter().collect(),
        "cards" => fields
            .get("cards")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| card(c.as_object()?))
            .collect(),
        "gallery" => fields
            .get("images")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|i| Some((i.get("url")?.as_str()?.to_owned(), text(i.as_object()?, "alt").unwrap_or_default())))
            .collect(),
        _ => Vec::new(),
    }
}

/// Posts the messages that go with a rich message in `room` (and `thread`).
pub(in crate::turn) async fn post_companions(
    r: &Reach<'_>,
    room: &RoomId,
    thread: Option<&EventId>,
    payload: &Rich,
    drawn: &[Drawn],
    encrypted: bool,
) -> Result<(), Stop> {
    let rel = Relation { reply_to: None, thread };
    let mut contents = Vec::new();
    for (i, block) in payload.blocks().iter().enumerate() {
        let Block::Known { spec, fields } = block else { continue };
        let text = |key: &str| fields.get(key).and_then(Value::as_str);
        if let ("file", Some(url), Some(name)) = (spec.name, text("url"), text("name")) {
            let size = fields.get("size").and_then(|s| s.as_u64().or_else(|| s.as_str()?.parse().ok()));
            let info = Info { size, mimetype: text("mimetype"), dimensions: None };
            let held = super::pictures::held(r, url, encrypted).await?;
            contents.push(render::file_message(name, held.source(), info, rel));
        }
        if !encrypted {
            continue;
        }
        for d in drawn.iter().filter(|d| d.block == i) {
            let info = Info { mimetype: Some("image/png"), size: Some(d.bytes as u64), dimensions: Some(d.size) };
            // Drawn for this room: encrypted with it, its `file` at hand.
            let source = match &d.uploaded.file {
                Some(file) => render::Source::File(file),
                None => render::Source::Url(&d.uploaded.mxc),
            };
            contents.push(render::image_message(&d.alt, source, info, rel));
        }
        for (mxc, words) in pictures(spec.name, fields) {
            let name = if words.trim().is_empty() { "picture".to_owned() } else { words };
            let held = super::pictures::held(r, &mxc, encrypted).await?;
            contents.push(render::image_message(&name, held.source(), Info::default(), rel));
        }
    }
    for content in contents {
        let write = Write { id: r.take_write(), room, persona: &r.scope.persona };
        r.outbox.send(&write, &content, thread).await.map_err(outbox_error)?;
    }
    Ok(())
}

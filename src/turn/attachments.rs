//! A rich message's `file` blocks, each also posted as an `m.file` message right after
//! it (`render::file_message`), in the same thread: every client offers the download,
//! whether it draws blocks or not. Each is a write of the turn's own, so it is posted
//! once, a resumed turn finding it.

use ruma::{EventId, RoomId};
use serde_json::Value;

use super::runner::Runner;
use super::stop::{Stop, outbox_error};
use crate::blocks::{Block, Rich};
use crate::outbox::Write;
use crate::render::{self, Relation};

impl Runner<'_> {
    /// Posts an `m.file` message in `room` (and `thread`) for each file block of `payload`.
    pub(super) async fn post_files(&self, room: &RoomId, thread: Option<&EventId>, payload: &Rich) -> Result<(), Stop> {
        for block in payload.blocks() {
            let Block::Known { spec, fields } = block else { continue };
            let text = |key: &str| fields.get(key).and_then(Value::as_str);
            let (Some(url), Some(name)) = (text("url"), text("name")) else { continue };
            if spec.name != "file" {
                continue;
            }
            let size = fields.get("size").and_then(|s| s.as_u64().or_else(|| s.as_str()?.parse().ok()));
            let content = render::file_message(name, url, size, text("mimetype"), Relation { reply_to: None, thread });
            let write = Write { id: self.take_write(), room, persona: &self.scope.persona };
            self.outbox.send(&write, &content, thread).await.map_err(outbox_error)?;
        }
        Ok(())
    }
}

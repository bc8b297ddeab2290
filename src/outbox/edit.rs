//! Edits, at the pace: writes to one message land at least `interval` apart.
//!
//! Two things hold the pace. The slot is reserved in SQL (`reserve_edit_slot`), which
//! survives a restart and orders the edits. And within the process, one edit of a message
//! at a time, from its reservation to its landing ([`EditLocks`]): a slot reserved while
//! the edit before it was still on its way would be counted from that edit's slot, not
//! from when it landed, and an edit whose PUT took longer than the next one's landed less
//! than `interval` before it. Reserved after the one before landed, the slot is at least
//! that landing plus `interval` (`edit_landed`), and the homeserver stamps the write after
//! its slot.

use std::time::Duration;

use ruma::{EventId, OwnedEventId};
use serde_json::Value;

use super::{Error, Landed, MESSAGE, Outbox, Write};
use crate::clock::now_ms;
use crate::store::NewSent;

/// One lock per message being edited, kept only while an edit holds or awaits it.
pub(super) type EditLocks = crate::key_locks::Locks<OwnedEventId>;

impl Outbox {
    /// Edits `original` (a message `w.persona` sent), waiting for its slot. Returns the
    /// edit's event id and how long it waited.
    pub async fn edit(&self, w: &Write<'_>, original: &EventId, content: &Value) -> Result<(OwnedEventId, u64), Error> {
        self.edit_as(w, "edit", original, content).await
    }

    /// An intermediate edit of a live message (its content may differ from a crashed run's).
    pub async fn edit_live(&self, w: &Write<'_>, original: &EventId, content: &Value) -> Result<(), Error> {
        self.edit_as(w, "live-edit", original, content).await.map(drop)
    }

    async fn edit_as(
        &self,
        w: &Write<'_>,
        kind: &str,
        original: &EventId,
        content: &Value,
    ) -> Result<(OwnedEventId, u64), Error> {
        let (txn, done, sealed) = self.claim(w, kind, content).await?;
        if let Some(Landed { id, .. }) = done {
            // Landed already (now found, or recorded): make sure it is recorded.
            self.record_edit(w, &txn, &id, original, content, now_ms()).await?;
            return Ok((id, 0));
        }
        let asked = now_ms();
        let _held = self.edits.hold(original.to_owned()).await;
        let now = now_ms();
        let slot =
            self.store.reserve_edit_slot(original, w.persona, now, self.interval_ms).await?.ok_or(Error::NotOwner)?;
        if slot > now {
            tokio::time::sleep(Duration::from_millis(u64::try_from(slot - now).unwrap_or(0))).await;
        }
        let waited = u64::try_from(slot.max(now) - asked).unwrap_or(0);
        let (id, _) = self.put(&txn, w, MESSAGE, content, sealed).await?;
        self.record_edit(w, &txn, &id, original, content, now_ms()).await?;
        Ok((id, waited))
    }

    /// Records an edit that landed at `at`: the message's new content and next slot, then
    /// the edit, and its outbox write `txn` sent, last: each step can be done again, so a
    /// crash between them leaves the write unsent, found landed and recorded again.
    async fn record_edit(
        &self,
        w: &Write<'_>,
        txn: &str,
        id: &EventId,
        original: &EventId,
        content: &Value,
        at: i64,
    ) -> Result<(), Error> {
        let new_content = content.get("m.new_content").cloned().unwrap_or(Value::Null);
        self.store.edit_landed(original, &new_content, at, self.interval_ms).await?;
        let edit = NewSent {
            event_id: id,
            room_id: w.room,
            sender: w.persona,
            thread_root: None,
            replaces: Some(original),
            content,
            sent_at: at,
            next_edit_at: at,
        };
        Ok(self.store.record_landed(&edit, Some(txn)).await?)
    }
}

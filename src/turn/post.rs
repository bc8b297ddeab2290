//! Posting as a persona, exactly once. Each write of a turn has a transaction id fixed
//! before the first attempt (`rb.<instance>.<turn>.<seq>`, unique across personas, since
//! Synapse deduplicates per appservice, not per user) and persisted in the outbox; a
//! resumed turn finds writes that already landed and reuses their event ids.
//!
//! Edits are paced: the slot is reserved atomically in SQL, then waited for, so writes to
//! one message land at least `interval` apart, in the order they were reserved.

use std::time::Duration;

use ruma::{EventId, OwnedEventId, RoomId, UserId};
use serde_json::Value;

use crate::clock::now_ms;
use crate::matrix;
use crate::store::{self, NewSent, Store};

/// A write that did not land.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The homeserver refused it for good (recorded in the outbox with the reason).
    #[error("the homeserver refused the message: {0}")]
    Refused(String),
    /// The homeserver stayed unreachable through the retries.
    #[error("{0}")]
    Unavailable(String),
    /// Not a message this persona sent.
    #[error("not a message this persona sent")]
    NotOwner,
    #[error("store: {0}")]
    Store(#[from] store::Error),
}

/// Sends and edits through the outbox.
#[derive(Debug, Clone)]
pub struct Poster {
    pub matrix: matrix::Client,
    pub store: Store,
    pub instance: String,
    pub interval_ms: i64,
}

impl Poster {
    fn txn_id(&self, turn: i64, seq: i64) -> String {
        format!("rb.{}.{turn}.{seq}", self.instance)
    }

    /// Claims write `seq` of `turn`; `Ok(Some(id))` if it already landed.
    async fn claim(
        &self,
        turn: i64,
        seq: i64,
        room: &RoomId,
        persona: &UserId,
    ) -> Result<(String, Option<OwnedEventId>), Error> {
        let row = self
            .store
            .outbox_claim(&self.txn_id(turn, seq), turn, seq, room.as_str(), persona.as_str(), now_ms())
            .await?;
        match row.state.as_str() {
            "sent" => Ok((row.txn_id, row.event_id.and_then(|e| EventId::parse(e).ok()))),
            "failed" => Err(Error::Refused(row.error.unwrap_or_default())),
            _ => Ok((row.txn_id, None)),
        }
    }

    async fn put(&self, txn: &str, room: &RoomId, persona: &UserId, content: &Value) -> Result<OwnedEventId, Error> {
        self.store.outbox_attempt(txn).await?;
        match self.matrix.send(room, "m.room.message", txn, content, persona).await {
            Ok(id) => Ok(id),
            Err(matrix::Error::Refused { status, errcode, error }) => {
                let reason = format!("{errcode} ({status}): {error}");
                self.store.outbox_failed(txn, &reason).await?;
                Err(Error::Refused(reason))
            }
            Err(e @ matrix::Error::Unavailable(_)) => Err(Error::Unavailable(e.to_string())),
        }
    }

    /// Sends a new message as `persona`.
    pub async fn send(
        &self,
        turn: i64,
        seq: i64,
        room: &RoomId,
        persona: &UserId,
        content: &Value,
        thread_root: Option<&str>,
    ) -> Result<OwnedEventId, Error> {
        let (txn, done) = self.claim(turn, seq, room, persona).await?;
        if let Some(id) = done {
            return Ok(id);
        }
        let id = self.put(&txn, room, persona, content).await?;
        let now = now_ms();
        self.store
            .record_sent(&NewSent {
                event_id: id.as_str(),
                room_id: room.as_str(),
                sender: persona.as_str(),
                thread_root,
                replaces: None,
                content,
                sent_at: now,
                next_edit_at: now + self.interval_ms,
            })
            .await?;
        self.store.outbox_sent(&txn, id.as_str()).await?;
        Ok(id)
    }

    /// Edits `original` (a message `persona` sent), waiting for its slot. Returns the edit's
    /// event id and how long it waited.
    pub async fn edit(
        &self,
        turn: i64,
        seq: i64,
        room: &RoomId,
        persona: &UserId,
        original: &EventId,
        content: &Value,
    ) -> Result<(OwnedEventId, u64), Error> {
        let (txn, done) = self.claim(turn, seq, room, persona).await?;
        if let Some(id) = done {
            return Ok((id, 0));
        }
        let now = now_ms();
        let slot = self
            .store
            .reserve_edit_slot(original.as_str(), persona.as_str(), now, self.interval_ms)
            .await?
            .ok_or(Error::NotOwner)?;
        let waited = u64::try_from(slot - now).unwrap_or(0);
        if waited > 0 {
            tokio::time::sleep(Duration::from_millis(waited)).await;
        }
        let id = self.put(&txn, room, persona, content).await?;
        let done_at = now_ms();
        let new_content = content.get("m.new_content").cloned().unwrap_or(Value::Null);
        self.store.edit_landed(original.as_str(), &new_content, done_at, self.interval_ms).await?;
        self.store
            .record_sent(&NewSent {
                event_id: id.as_str(),
                room_id: room.as_str(),
                sender: persona.as_str(),
                thread_root: None,
                replaces: Some(original.as_str()),
                content,
                sent_at: done_at,
                next_edit_at: done_at,
            })
            .await?;
        self.store.outbox_sent(&txn, id.as_str()).await?;
        Ok((id, waited))
    }
}

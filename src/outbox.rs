//! The outbox: every write a persona makes, exactly once.
//!
//! Lifecycle of a write: its [`WriteId`] (turn, n-th write of the turn) is fixed by the
//! caller -> `claim` creates its outbox row with a transaction id
//! (`rb.<instance>.<turn>.<seq>`, unique across personas, since Synapse deduplicates per
//! appservice, not per user) before the first attempt, or finds the row a crashed run
//! left -> a write already `sent` returns its event id without a request, one `failed`
//! returns its reason -> otherwise it is PUT with that transaction id (retries reuse it)
//! -> the landed event is recorded in `sent_messages` (ownership and edit pace) and the
//! row becomes `sent`; a refusal for good becomes `failed` with the homeserver's reason.
//!
//! Edits are paced: the slot is reserved atomically in SQL, then waited for, so writes to
//! one message land at least `interval` apart, in the order they were reserved.
//!
//! Typing notices and opening a DM are here too: they are the other things a persona does
//! in a room on a turn's behalf.

use std::time::Duration;

use ruma::{EventId, OwnedEventId, OwnedRoomId, OwnedUserId, RoomId, UserId};
use serde_json::Value;

use crate::clock::now_ms;
use crate::matrix;
use crate::store::{self, NewSent, NewWrite, OutboxState, Store};

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

/// The n-th write (`seq`) of a turn: what its transaction id is derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteId {
    pub turn: i64,
    pub seq: i64,
}

/// One write: which, and as whom, where.
#[derive(Debug, Clone, Copy)]
pub struct Write<'a> {
    pub id: WriteId,
    pub room: &'a RoomId,
    pub persona: &'a UserId,
}

/// Sends and edits through the outbox.
#[derive(Debug, Clone)]
pub struct Outbox {
    matrix: matrix::Client,
    store: Store,
    instance: String,
    interval_ms: i64,
}

impl Outbox {
    /// `instance` is this installation's id (`Store::instance_id`); `interval_ms` the pace
    /// of writes to one message.
    pub fn new(matrix: matrix::Client, store: Store, instance: String, interval_ms: u64) -> Self {
        Self { matrix, store, instance, interval_ms: i64::try_from(interval_ms).unwrap_or(i64::MAX) }
    }

    /// The pace of writes to one message, in milliseconds.
    pub fn interval_ms(&self) -> u64 {
        self.interval_ms.unsigned_abs()
    }

    /// Claims a write; `Ok((txn, Some(id)))` if it already landed.
    async fn claim(&self, w: &Write<'_>) -> Result<(String, Option<OwnedEventId>), Error> {
        let txn_id = format!("rb.{}.{}.{}", self.instance, w.id.turn, w.id.seq);
        let new = NewWrite { txn_id: &txn_id, turn: w.id.turn, seq: w.id.seq, room: w.room, sender: w.persona };
        let row = self.store.outbox_claim(&new, now_ms()).await?;
        match row.state {
            OutboxState::Sent(id) => Ok((row.txn_id, Some(id))),
            OutboxState::Failed(reason) => Err(Error::Refused(reason)),
            OutboxState::Pending => Ok((row.txn_id, None)),
        }
    }

    async fn put(&self, txn: &str, w: &Write<'_>, content: &Value) -> Result<OwnedEventId, Error> {
        self.store.outbox_attempt(txn).await?;
        match self.matrix.send(w.room, "m.room.message", txn, content, w.persona).await {
            Ok(id) => Ok(id),
            Err(matrix::Error::Refused { status, errcode, error }) => {
                let reason = format!("{errcode} ({status}): {error}");
                self.store.outbox_failed(txn, &reason).await?;
                Err(Error::Refused(reason))
            }
            Err(e @ matrix::Error::Unavailable(_)) => Err(Error::Unavailable(e.to_string())),
        }
    }

    /// Sends a new message.
    pub async fn send(
        &self,
        w: &Write<'_>,
        content: &Value,
        thread_root: Option<&EventId>,
    ) -> Result<OwnedEventId, Error> {
        let (txn, done) = self.claim(w).await?;
        if let Some(id) = done {
            return Ok(id);
        }
        let id = self.put(&txn, w, content).await?;
        let now = now_ms();
        self.store
            .record_sent(&NewSent {
                event_id: &id,
                room_id: w.room,
                sender: w.persona,
                thread_root,
                replaces: None,
                content,
                sent_at: now,
                next_edit_at: now + self.interval_ms,
            })
            .await?;
        self.store.outbox_sent(&txn, &id).await?;
        Ok(id)
    }

    /// Edits `original` (a message `w.persona` sent), waiting for its slot. Returns the
    /// edit's event id and how long it waited.
    pub async fn edit(&self, w: &Write<'_>, original: &EventId, content: &Value) -> Result<(OwnedEventId, u64), Error> {
        let (txn, done) = self.claim(w).await?;
        if let Some(id) = done {
            return Ok((id, 0));
        }
        let now = now_ms();
        let slot =
            self.store.reserve_edit_slot(original, w.persona, now, self.interval_ms).await?.ok_or(Error::NotOwner)?;
        let waited = u64::try_from(slot - now).unwrap_or(0);
        if waited > 0 {
            tokio::time::sleep(Duration::from_millis(waited)).await;
        }
        let id = self.put(&txn, w, content).await?;
        let done_at = now_ms();
        let new_content = content.get("m.new_content").cloned().unwrap_or(Value::Null);
        self.store.edit_landed(original, &new_content, done_at, self.interval_ms).await?;
        self.store
            .record_sent(&NewSent {
                event_id: &id,
                room_id: w.room,
                sender: w.persona,
                thread_root: None,
                replaces: Some(original),
                content,
                sent_at: done_at,
                next_edit_at: done_at,
            })
            .await?;
        self.store.outbox_sent(&txn, &id).await?;
        Ok((id, waited))
    }

    /// Opens a direct chat from `persona` with `invitee` (an `is_direct` invite).
    pub async fn create_dm(&self, persona: &UserId, invitee: &UserId) -> Result<OwnedRoomId, matrix::Error> {
        self.matrix.create_dm(persona, invitee).await
    }

    /// Turns the persona's typing notice on until [`Typing::stop`] (renewed every 20 s).
    pub fn typing(&self, room: &RoomId, persona: &UserId) -> Typing {
        let (matrix, room, persona): (_, OwnedRoomId, OwnedUserId) =
            (self.matrix.clone(), room.to_owned(), persona.to_owned());
        let renew = {
            let (matrix, room, persona) = (matrix.clone(), room.clone(), persona.clone());
            tokio::spawn(async move {
                loop {
                    if let Err(e) = matrix.typing(&room, &persona, true, 30_000).await {
                        tracing::debug!(error = %e, "typing notice failed");
                    }
                    tokio::time::sleep(Duration::from_secs(20)).await;
                }
            })
        };
        Typing { renew, matrix, room, persona }
    }
}

/// A typing notice that is on; `stop` clears it.
#[derive(Debug)]
pub struct Typing {
    renew: tokio::task::JoinHandle<()>,
    matrix: matrix::Client,
    room: OwnedRoomId,
    persona: OwnedUserId,
}

impl Typing {
    pub async fn stop(self) {
        self.renew.abort();
        if let Err(e) = self.matrix.typing(&self.room, &self.persona, false, 0).await {
            tracing::debug!(error = %e, "clearing the typing notice failed");
        }
    }
}

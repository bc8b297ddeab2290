//! The outbox: every write a persona makes, exactly once.
//!
//! Lifecycle of a write: its [`WriteId`] (turn, n-th write of the turn) is fixed by the
//! caller -> `claim` creates its outbox row with a transaction id
//! (`rb.<instance>.<turn>.<seq>`, unique across personas, since Synapse deduplicates per
//! appservice, not per user), its kind and a hash of its content, before the first
//! attempt; or finds the row a crashed run left, and refuses a content that differs from
//! it -> a write already `sent` returns its event id without a request, one `failed`
//! returns its reason -> one attempted before whose outcome is unknown (a crash between
//! the send and its record) is looked for among the persona's recent events in the room,
//! by the marker every write carries (`org.richbot.write`: its transaction id), and
//! adopted if found: Synapse's own transaction-id cache forgets (after about 30 minutes,
//! and on restart) -> otherwise it is PUT with that transaction id (retries reuse it) ->
//! the landed event is recorded in `sent_messages` (ownership and edit pace) and the row
//! becomes `sent`; a refusal for good becomes `failed` with the homeserver's reason; a
//! homeserver that stays unreachable leaves the row pending, for the turn to resume.
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
    /// A write claimed before under this id had another room, kind or content.
    #[error("write {0} was first made with another content; it is not sent under its old id")]
    Mismatch(String),
    #[error("store: {0}")]
    Store(#[from] store::Error),
}

/// The content key every write carries: its transaction id, to find it again.
pub const MARKER: &str = "org.richbot.write";
/// How many of the room's recent events are searched for a write's marker.
const MARKER_LOOKBACK: u32 = 100;

/// A stable hash of a write's content (FNV-1a over its JSON text), to tell a replay that
/// differs from the first claim.
fn content_hash(content: &Value) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in content.to_string().bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
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

    /// Claims a write; `Ok((txn, Some(id)))` if it already landed (or is found to have).
    async fn claim(&self, w: &Write<'_>, kind: &str, content: &Value) -> Result<(String, Option<OwnedEventId>), Error> {
        let txn_id = format!("rb.{}.{}.{}", self.instance, w.id.turn, w.id.seq);
        let hash = content_hash(content);
        let new = NewWrite {
            txn_id: &txn_id,
            turn: w.id.turn,
            seq: w.id.seq,
            room: w.room,
            sender: w.persona,
            kind,
            content_hash: &hash,
        };
        let row = self.store.outbox_claim(&new, now_ms()).await?;
        if !row.same {
            tracing::error!(txn = row.txn_id, "a replayed write differs from the one first claimed; not sending it");
            return Err(Error::Mismatch(row.txn_id));
        }
        match row.state {
            OutboxState::Sent(id) => Ok((row.txn_id, Some(id))),
            OutboxState::Failed(reason) => Err(Error::Refused(reason)),
            OutboxState::Pending if row.attempts > 0 => {
                let found = self.find(w, &row.txn_id).await?;
                Ok((row.txn_id, found))
            }
            OutboxState::Pending => Ok((row.txn_id, None)),
        }
    }

    /// Looks for a write among the persona's recent events in its room, by its marker.
    async fn find(&self, w: &Write<'_>, txn: &str) -> Result<Option<OwnedEventId>, Error> {
        let events = self.matrix.recent_events(w.room, w.persona, MARKER_LOOKBACK).await.map_err(|e| match e {
            matrix::Error::Unavailable(_) => Error::Unavailable(e.to_string()),
            matrix::Error::Refused { .. } => Error::Refused(e.to_string()),
        })?;
        let found = events.iter().find(|e| {
            e.get("sender").and_then(Value::as_str) == Some(w.persona.as_str())
                && e.get("content").and_then(|c| c.get(MARKER)).and_then(Value::as_str) == Some(txn)
        });
        let id = found.and_then(|e| e.get("event_id")?.as_str()).and_then(|id| EventId::parse(id).ok());
        if let Some(id) = &id {
            tracing::info!(txn, event_id = %id, "a write of a crashed run had landed; adopting it, not sending again");
        }
        Ok(id)
    }

    async fn put(&self, txn: &str, w: &Write<'_>, content: &Value) -> Result<OwnedEventId, Error> {
        self.store.outbox_attempt(txn).await?;
        let mut content = content.clone();
        content[MARKER] = Value::String(txn.to_owned());
        match self.matrix.send(w.room, "m.room.message", txn, &content, w.persona).await {
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
        let (txn, done) = self.claim(w, "send", content).await?;
        let id = match done {
            Some(id) => id,
            None => self.put(&txn, w, content).await?,
        };
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
        let (txn, done) = self.claim(w, "edit", content).await?;
        if let Some(id) = done {
            // Landed already (now found, or recorded): make sure it is recorded.
            let landed = now_ms();
            let new_content = content.get("m.new_content").cloned().unwrap_or(Value::Null);
            self.store.edit_landed(original, &new_content, landed, self.interval_ms).await?;
            self.record_edit(w, &id, original, content, landed).await?;
            self.store.outbox_sent(&txn, &id).await?;
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
        self.record_edit(w, &id, original, content, done_at).await?;
        self.store.outbox_sent(&txn, &id).await?;
        Ok((id, waited))
    }

    async fn record_edit(
        &self,
        w: &Write<'_>,
        id: &EventId,
        original: &EventId,
        content: &Value,
        at: i64,
    ) -> Result<(), Error> {
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
        Ok(self.store.record_sent(&edit).await?)
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

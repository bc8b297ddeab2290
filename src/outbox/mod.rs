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
//! Edits are paced (`edit.rs`): writes to one message land at least `interval` apart, in
//! the order they were asked for.
//!
//! In an encrypted room a write is encrypted before its first attempt and the ciphertext
//! kept with its row (`seal.rs`): every attempt sends the same bytes, and the marker
//! search decrypts the persona's own messages to read their markers.
//!
//! Typing notices and opening a DM are here too: they are the other things a persona does
//! in a room on a turn's behalf.

use ruma::{EventId, OwnedEventId, RoomId, UserId};
use serde_json::Value;

mod dm;
mod edit;
mod error;
mod ids;
mod marker;
mod seal;
mod typing;

use crate::clock::now_ms;
use crate::crypto::Crypto;
use crate::matrix;
use crate::store::{NewSent, NewWrite, OutboxState, Store};

pub use error::Error;
pub use ids::{Write, WriteId};
pub use marker::MARKER;
use marker::content_hash;
pub use typing::Typing;

/// The event type of a message, which most writes are.
const MESSAGE: &str = "m.room.message";

/// A write found to have landed: its event, and (when found by its marker) the content
/// it landed with.
struct Landed {
    id: OwnedEventId,
    content: Option<Value>,
}

/// A claimed write: its transaction id, where it landed if it did, and what an earlier
/// run sealed it as (ciphertext, clear content).
type Claimed = (String, Option<Landed>, Option<(String, String)>);

/// Sends and edits through the outbox.
#[derive(Debug, Clone)]
pub struct Outbox {
    matrix: matrix::Client,
    store: Store,
    instance: String,
    interval_ms: i64,
    /// Among several instances: this one's lease holder name, checked before each write.
    fence: Option<std::sync::Arc<str>>,
    /// Encrypts writes to encrypted rooms (when encryption is on).
    crypto: Option<Crypto>,
    /// One DM opened at a time (`dm`), so two asking at once share it.
    opening: std::sync::Arc<tokio::sync::Mutex<()>>,
    /// One edit of a message at a time, from its slot's reservation to its landing.
    edits: std::sync::Arc<edit::EditLocks>,
}

impl Outbox {
    /// `instance` is this installation's id (`Store::instance_id`); `interval_ms` the pace
    /// of writes to one message.
    pub fn new(matrix: matrix::Client, store: Store, instance: String, interval_ms: u64) -> Self {
        let interval_ms = i64::try_from(interval_ms).unwrap_or(i64::MAX);
        Self {
            matrix,
            store,
            instance,
            interval_ms,
            fence: None,
            crypto: None,
            opening: Default::default(),
            edits: Default::default(),
        }
    }

    /// Writes to encrypted rooms are encrypted with `crypto`.
    pub fn with_crypto(self, crypto: Option<Crypto>) -> Self {
        Self { crypto, ..self }
    }

    /// Among several instances: writes of a turn whose room this instance (`holder`) no
    /// longer leases are not made (the turn is suspended, and the new holder resumes it).
    pub fn fenced(self, holder: &str) -> Self {
        Self { fence: Some(holder.into()), ..self }
    }

    /// Whether this instance may still act for `turn` (always, alone on a database, and
    /// for an agent client's write, which holds no room).
    pub async fn holds(&self, turn: i64) -> Result<(), Error> {
        let Some(holder) = self.fence.as_ref().filter(|_| turn >= 0) else { return Ok(()) };
        if self.store.holds_turn_room(turn, holder, now_ms()).await? {
            return Ok(());
        }
        tracing::warn!(turn, "this instance no longer holds the turn's room; stopping it here");
        Err(Error::Unavailable("this instance's lease on the room ended; another instance takes it over".to_owned()))
    }

    /// The pace of writes to one message, in milliseconds.
    pub fn interval_ms(&self) -> u64 {
        self.interval_ms.unsigned_abs()
    }

    /// The content recorded for a message we sent (its latest form), if it is ours.
    pub async fn sent(&self, event: &EventId) -> Result<Option<Value>, Error> {
        Ok(self.store.sent_message(event).await?.map(|m| m.content))
    }

    /// The persona's typing notice, on once the turn has taken a second, until
    /// [`Typing::stop`] (renewed every 20 s).
    pub fn typing(&self, room: &RoomId, persona: &UserId) -> Typing {
        Typing::start(self.matrix.clone(), room, persona)
    }

    /// Claims a write; `Ok((txn, Some(found), _))` if it already landed (or is found to have,
    /// with the content it landed with); the ciphertext and clear content an earlier run
    /// sealed it as, if it did.
    async fn claim(&self, w: &Write<'_>, kind: &str, content: &Value) -> Result<Claimed, Error> {
        self.holds(w.id.turn).await?;
        let txn_id = w.id.txn_id(&self.instance);
        // A live write (a streamed answer as it grows) differs run to run by nature: its id
        // alone says what it is.
        let hash = if kind.starts_with("live") { "live".to_owned() } else { content_hash(content) };
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
            OutboxState::Sent(id) => Ok((row.txn_id, Some(Landed { id, content: None }), None)),
            OutboxState::Failed(reason) => Err(Error::Refused(reason)),
            OutboxState::Pending if row.attempts > 0 => {
                let (crypto, at) = (self.crypto.as_ref(), row.created_at);
                let found = marker::find(&self.matrix, crypto, w.room, w.persona, &row.txn_id, at).await?;
                Ok((row.txn_id, found, row.sealed))
            }
            OutboxState::Pending => Ok((row.txn_id, None, row.sealed)),
        }
    }

    /// Sends a new message.
    pub async fn send(
        &self,
        w: &Write<'_>,
        content: &Value,
        thread_root: Option<&EventId>,
    ) -> Result<OwnedEventId, Error> {
        self.send_as(w, "send", MESSAGE, content, thread_root).await.map(|(id, _)| id)
    }

    /// Sends the first form of a live message (a streamed answer): its content may differ
    /// from a crashed run's. Returns the event and whether it was posted now (false: an
    /// earlier run's post, whose content may be older).
    pub async fn send_live(
        &self,
        w: &Write<'_>,
        content: &Value,
        thread_root: Option<&EventId>,
    ) -> Result<(OwnedEventId, bool), Error> {
        self.send_as(w, "live", MESSAGE, content, thread_root).await
    }

    /// Sends an event of another type than a message (a poll's start or end), once.
    pub async fn send_event(&self, w: &Write<'_>, event_type: &str, content: &Value) -> Result<OwnedEventId, Error> {
        self.send_as(w, event_type, event_type, content, None).await.map(|(id, _)| id)
    }

    /// Sends an event that its write id alone says (a poll's end, its result message),
    /// once: its content may differ from a crashed or failed attempt's, since a vote that
    /// arrived meanwhile changes the tally it states.
    pub async fn send_tally(&self, w: &Write<'_>, event_type: &str, content: &Value) -> Result<OwnedEventId, Error> {
        self.send_as(w, "live-tally", event_type, content, None).await.map(|(id, _)| id)
    }

    async fn send_as(
        &self,
        w: &Write<'_>,
        kind: &str,
        event_type: &str,
        content: &Value,
        thread_root: Option<&EventId>,
    ) -> Result<(OwnedEventId, bool), Error> {
        let (txn, done, sealed) = self.claim(w, kind, content).await?;
        let fresh = done.is_none() && sealed.is_none();
        let (id, landed_content) = match done {
            Some(Landed { id, content: found }) => (id, found),
            None => {
                // Posted at most once: its claim (and its turn) on disk first, not only in
                // the WAL, where a power cut could take them and a new turn post it again.
                self.store.sync().await?;
                self.put(&txn, w, event_type, content, sealed).await?
            }
        };
        let now = now_ms();
        self.store
            .record_landed(
                &NewSent {
                    event_id: &id,
                    room_id: w.room,
                    sender: w.persona,
                    thread_root,
                    replaces: None,
                    content: landed_content.as_ref().unwrap_or(content),
                    sent_at: now,
                    next_edit_at: now + self.interval_ms,
                },
                Some(&txn),
            )
            .await?;
        Ok((id, fresh))
    }
}

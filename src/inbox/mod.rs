//! The inbox: the durable hand-off between the HTTP edge and the turns.
//!
//! Lifecycle of an event: `accept` commits it (deduplicated by event id) and flushes it to
//! disk before the transaction is answered 200 -> its room is queued for a worker
//! (`queue`) -> a room worker claims the room's pending events in arrival order -> they
//! are handled (membership, a turn) and marked processed. A crash anywhere after the
//! commit leaves the events pending, and they are handled after restart.
//!
//! A reaction to an approval notice is decided at the door (`crate::approval`) and settled:
//! the turn that asked is waiting for it, and it starts nothing else.
//!
//! Triage starts at the door (`door.rs`): an event that can start nothing and change
//! nothing richbot keeps (in a room no persona is in; chatter that addresses no persona)
//! is stored already processed (history only), and no worker is queued for it. A busy
//! homeserver never delays a member's question with work that leads nowhere.
//!
//! A redaction by the redacted event's sender also scrubs, at the door, what a running
//! turn recorded for its resume (the model's replies, tool results); the event itself is
//! scrubbed by its room's worker, which also applies a moderator's (`room::redaction`).
//!
//! The event id is the dedup key, not the transaction id: Synapse on SQLite restarts its
//! transaction ids at 1 when it restarts, so a txn-id ledger would drop new events.

use std::sync::Arc;

use std::borrow::Cow;

use ruma::OwnedRoomId;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::approval::Approvals;
use crate::clock::now_ms;
use crate::crypto::{Crypto, Extensions, LastCounts};
use crate::metrics::Metrics;
use crate::personas::Personas;
use crate::queue::RoomQueue;
use crate::room::Policy;
use crate::store::{self, NewEvent, Store};

mod door;
mod keys;

/// What a transaction brought.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    /// Events stored for the first time.
    pub new: u64,
    /// Events seen before (a retried transaction, or overlap).
    pub duplicate: u64,
    /// Events too malformed to store (no id, room, sender or type); logged.
    pub malformed: u64,
    /// Events settled at the door (stored as history, no worker needed).
    pub settled: u64,
}

/// Accepts pushed events and queues their rooms for the workers.
#[derive(Debug, Clone)]
pub struct Inbox {
    store: Store,
    door: door::Door,
    approvals: Approvals,
    metrics: Arc<Metrics>,
    /// The personas' crypto, when encryption is on.
    crypto: Option<Crypto>,
    /// What the personas' devices were last given (`keys.rs`); held while a share is
    /// stored, so the stored order is the noted order.
    last_counts: Arc<tokio::sync::Mutex<LastCounts>>,
}

impl Inbox {
    /// `policy` and the personas decide what is settled at the door; `queue` gets the rest.
    pub fn new(store: Store, queue: Arc<RoomQueue>, personas: Personas, policy: Policy, metrics: Arc<Metrics>) -> Self {
        let approvals = Approvals::new(store.clone());
        let door = door::Door { store: store.clone(), queue, personas, policy, shared: false };
        Self { door, store, approvals, metrics, crypto: None, last_counts: Arc::default() }
    }

    /// Hands what transactions bring for the personas' devices to `crypto`.
    pub fn with_crypto(self, crypto: Option<Crypto>) -> Self {
        Self { crypto, ..self }
    }

    /// Other instances share the database: the door asks it about the rooms.
    pub fn sharing(mut self) -> Self {
        self.door.shared = true;
        self
    }

    /// Decides approvals through `approvals` (the turns' own, so a decision wakes the turn
    /// waiting for it at once).
    pub fn with_approvals(self, approvals: Approvals) -> Self {
        Self { approvals, ..self }
    }

    /// Whether the inbox can take transactions (its database answers): readiness.
    pub async fn ready(&self) -> Result<(), store::Error> {
        self.store.ping().await
    }

    /// Commits a transaction's events; idempotent. Returns once they are durable.
    pub async fn accept(&self, txn_id: &str, events: &[&RawValue]) -> Result<Accepted, store::Error> {
        self.accept_with(txn_id, events, Extensions::default()).await
    }

    /// [`Inbox::accept`] with what the transaction brought for the personas' devices
    /// (`keys.rs`), stored before it returns too.
    pub async fn accept_with(
        &self,
        txn_id: &str,
        events: &[&RawValue],
        extensions: Extensions,
    ) -> Result<Accepted, store::Error> {
        let total = events.len() as u64;
        let mut parsed: Vec<NewEvent> = events.iter().copied().filter_map(to_new_event).collect();
        // Reactions to approval notices are decided and settled first (before the events
        // are stored, so a retried transaction decides again; the first decision stands).
        self.approvals.at_door(&mut parsed).await?;
        let facts = self.door.facts(&parsed).await?;
        let mut rooms: Vec<OwnedRoomId> = Vec::new();
        for event in parsed.iter_mut().filter(|e| !e.processed) {
            event.processed = !self.door.needs_worker(event, &facts);
            if !event.processed && !rooms.contains(&event.room_id) {
                rooms.push(event.room_id.clone());
            }
        }
        let settled = parsed.iter().filter(|e| e.processed).count() as u64;
        let malformed = total - parsed.len() as u64;
        if malformed > 0 {
            // One line per transaction, whatever it holds: a flood of bad events is one line.
            tracing::warn!(
                txn_id,
                malformed,
                total,
                "skipped malformed events (need a valid event_id, room_id, sender and type)"
            );
        }
        let for_devices = self.keep_for_devices(extensions).await?;
        self.note_room_crypto(&parsed).await?;
        let new = self.store.insert_events(&parsed, now_ms()).await?;
        for (room, target, by) in parsed.iter().filter_map(redaction) {
            self.store.scrub_turn_records(room, &target, Some(by)).await?;
        }
        self.store.sync().await?;
        if let (true, Some(crypto)) = (for_devices, &self.crypto) {
            crypto.wake();
        }
        let accepted = Accepted { new, duplicate: parsed.len() as u64 - new, malformed, settled };
        tracing::debug!(txn_id, ?accepted, "transaction stored");
        Metrics::inc(&self.metrics.transactions);
        Metrics::add(&self.metrics.events_new, accepted.new);
        Metrics::add(&self.metrics.events_duplicate, accepted.duplicate);
        Metrics::add(&self.metrics.events_malformed, accepted.malformed);
        Metrics::add(&self.metrics.events_settled, accepted.settled);
        // Even with nothing new: a retry of a transaction whose first answer was lost.
        self.door.queue.push(rooms);
        Ok(accepted)
    }
}

/// A redaction's room, the event it redacts, and its sender.
fn redaction(e: &NewEvent) -> Option<(&ruma::RoomId, ruma::OwnedEventId, &ruma::UserId)> {
    if e.event_type != "m.room.redaction" {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&e.event).ok()?;
    let target = v.get("redacts").or_else(|| v.get("content")?.get("redacts"))?.as_str()?;
    Some((&e.room_id, ruma::OwnedEventId::try_from(target).ok()?, &e.sender))
}

/// The fields the inbox indexes an event by, borrowed from the body where they have no
/// escapes. Ids are read as text and parsed after, so an event with a bad id is counted
/// malformed rather than failing this read.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    event_id: Option<Text<'a>>,
    #[serde(borrow)]
    room_id: Option<Text<'a>>,
    #[serde(borrow)]
    sender: Option<Text<'a>>,
    #[serde(borrow, rename = "type")]
    event_type: Option<Text<'a>>,
    #[serde(borrow)]
    state_key: Option<&'a RawValue>,
    #[serde(borrow)]
    origin_server_ts: Option<&'a RawValue>,
}

/// A JSON string, borrowed unless it has escapes (serde borrows a `Cow` only as a field of
/// its own, not inside an `Option`).
#[derive(Deserialize)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

/// The event's ids as ruma types; an event without a valid `event_id`, `room_id`,
/// `sender` or `type` cannot be answered or deduplicated, and is counted malformed. So is
/// one whose ids, type or state key hold a control character or are over the spec's 255
/// bytes: those are indexed as text, and a NUL (which PostgreSQL refuses in text) would
/// fail the whole transaction, which the homeserver then retries for ever. And so is an
/// event of the type of schedules' occurrences, which only richbot makes.
fn to_new_event(event: &RawValue) -> Option<NewEvent> {
    let head: Head<'_> = serde_json::from_str(event.get()).ok()?;
    let texts = [&head.event_id, &head.room_id, &head.sender, &head.event_type];
    if !texts.iter().all(|t| t.as_ref().is_some_and(|t| well_formed(&t.0))) {
        return None;
    }
    // Only richbot makes schedules' occurrences; one from the homeserver is a forgery.
    if head.event_type.as_ref().is_some_and(|t| t.0 == crate::schedules::EVENT_TYPE) {
        return None;
    }
    let state_key = match head.state_key {
        Some(k) => Some(serde_json::from_str::<String>(k.get()).ok().filter(|k| k.is_empty() || well_formed(k))?),
        None => None,
    };
    Some(NewEvent {
        event_id: id(head.event_id)?,
        room_id: id(head.room_id)?,
        sender: id(head.sender)?,
        event_type: head.event_type?.0.into_owned(),
        state_key,
        origin_ts: head.origin_server_ts.and_then(|t| t.get().parse::<i64>().ok()).unwrap_or_else(now_ms),
        event: event.get().to_owned(),
        processed: false,
    })
}

/// Text fit for an indexed column: 1 to 255 bytes, no control character.
fn well_formed(s: &str) -> bool {
    (1..=255).contains(&s.len()) && !s.contains(char::is_control)
}

fn id<T>(s: Option<Text<'_>>) -> Option<T>
where
    T: TryFrom<String> + for<'b> TryFrom<&'b str>,
{
    match s?.0 {
        Cow::Borrowed(b) => T::try_from(b).ok(),
        Cow::Owned(o) => T::try_from(o).ok(),
    }
}

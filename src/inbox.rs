//! The inbox: the durable hand-off between the HTTP edge and the turns.
//!
//! Lifecycle of an event: `accept` commits it (deduplicated by event id) before the
//! transaction is answered 200 -> the scheduler is woken -> a room worker claims the
//! room's pending events in arrival order -> they are handled (membership, a turn) and
//! marked processed in the same transaction that records the outcome. A crash anywhere
//! after the commit leaves the events pending, and they are handled after restart.
//!
//! The event id is the dedup key, not the transaction id: Synapse on SQLite restarts its
//! transaction ids at 1 when it restarts, so a txn-id ledger would drop new events.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::Notify;

use crate::clock::now_ms;
use crate::metrics::Metrics;
use crate::store::{self, NewEvent, Store};

/// What a transaction brought.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    /// Events stored for the first time.
    pub new: u64,
    /// Events seen before (a retried transaction, or overlap).
    pub duplicate: u64,
    /// Events too malformed to store (no id, room, sender or type); logged.
    pub malformed: u64,
}

/// Accepts pushed events and wakes the scheduler.
#[derive(Debug, Clone)]
pub struct Inbox {
    store: Store,
    wake: Arc<Notify>,
    metrics: Arc<Metrics>,
}

impl Inbox {
    pub fn new(store: Store, wake: Arc<Notify>, metrics: Arc<Metrics>) -> Self {
        Self { store, wake, metrics }
    }

    /// Whether the inbox can take transactions (its database answers): readiness.
    pub async fn ready(&self) -> Result<(), store::Error> {
        self.store.ping().await
    }

    /// Commits a transaction's events; idempotent. Returns once they are durable.
    pub async fn accept(&self, txn_id: &str, events: Vec<Value>) -> Result<Accepted, store::Error> {
        let total = events.len() as u64;
        let parsed: Vec<NewEvent> = events.into_iter().filter_map(|e| to_new_event(txn_id, e)).collect();
        let malformed = total - parsed.len() as u64;
        let new = self.store.insert_events(&parsed, now_ms()).await?;
        let accepted = Accepted { new, duplicate: parsed.len() as u64 - new, malformed };
        tracing::debug!(txn_id, ?accepted, "transaction stored");
        Metrics::inc(&self.metrics.transactions);
        Metrics::add(&self.metrics.events_new, accepted.new);
        Metrics::add(&self.metrics.events_duplicate, accepted.duplicate);
        Metrics::add(&self.metrics.events_malformed, accepted.malformed);
        if new > 0 {
            self.wake.notify_one();
        }
        Ok(accepted)
    }
}

/// The event's ids as ruma types; an event without a valid `event_id`, `room_id`,
/// `sender` or `type` cannot be answered or deduplicated, and is counted malformed.
fn to_new_event(txn_id: &str, event: Value) -> Option<NewEvent> {
    let field = |k: &str| event.get(k).and_then(Value::as_str).map(str::to_owned);
    let (Some(event_id), Some(room_id), Some(sender), Some(event_type)) =
        (id(&event, "event_id"), id(&event, "room_id"), id(&event, "sender"), field("type"))
    else {
        tracing::warn!(txn_id, "skipping a malformed event (needs a valid event_id, room_id, sender and type)");
        return None;
    };
    let origin_ts = event.get("origin_server_ts").and_then(Value::as_i64).unwrap_or_else(now_ms);
    let state_key = field("state_key");
    Some(NewEvent { event_id, room_id, sender, event_type, state_key, origin_ts, event: event.to_string() })
}

fn id<T: TryFrom<String>>(event: &Value, key: &str) -> Option<T> {
    T::try_from(event.get(key)?.as_str()?.to_owned()).ok()
}

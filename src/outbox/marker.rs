//! Finding a write again: every write carries a marker (`org.richbot.write`: its
//! transaction id), so one whose outcome was lost (a crash between the send and its
//! record) is looked for among the persona's recent events before it is sent again;
//! Synapse's own transaction-id cache forgets (after about 30 minutes, and on restart).
//! And a stable hash of a write's content, to tell a replay that differs from the first.

use ruma::{EventId, RoomId, UserId};
use serde_json::Value;

use super::{Error, Landed};
use crate::matrix;

/// The content key every write carries: its transaction id, to find it again.
pub const MARKER: &str = "org.richbot.write";
/// How many of the room's recent events are searched for a write's marker.
const MARKER_LOOKBACK: u32 = 100;

/// A stable hash of a write's content (FNV-1a over its JSON text), to tell a replay that
/// differs from the first claim.
pub(super) fn content_hash(content: &Value) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in content.to_string().bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Looks for a write among `persona`'s recent events in `room`, by its marker.
pub(super) async fn find(
    matrix: &matrix::Client,
    room: &RoomId,
    persona: &UserId,
    txn: &str,
) -> Result<Option<Landed>, Error> {
    let events = matrix.recent_events(room, persona, MARKER_LOOKBACK).await.map_err(|e| match e {
        matrix::Error::Unavailable(_) => Error::Unavailable(e.to_string()),
        matrix::Error::Refused { .. } => Error::Refused(e.to_string()),
    })?;
    let found = events.iter().find(|e| {
        e.get("sender").and_then(Value::as_str) == Some(persona.as_str())
            && e.get("content").and_then(|c| c.get(MARKER)).and_then(Value::as_str) == Some(txn)
    });
    let landed = found.and_then(|e| {
        let id = EventId::parse(e.get("event_id")?.as_str()?).ok()?;
        let content = e.get("content").cloned();
        Some(Landed { id, content })
    });
    if let Some(l) = &landed {
        tracing::info!(txn, event_id = %l.id, "a write of a crashed run had landed; adopting it, not sending again");
    }
    Ok(landed)
}

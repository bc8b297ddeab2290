//! Finding a write again: every write carries a marker (`org.richbot.write`: its
//! transaction id), so one whose outcome was lost (a crash between the send and its
//! record) is looked for before it is sent again; Synapse's own transaction-id cache
//! forgets (after about 30 minutes, and on restart). The search is bounded by time, not
//! by a number of events, so a busy room cannot hide a write: the persona's own messages
//! (a sender filter, so others' chatter costs nothing) are read back page by page until
//! they are older than the write's first claim. In an encrypted room they are decrypted
//! to read their markers (the persona keeps its own room keys).
//! And a stable hash of a write's content, to tell a replay that differs from the first.

use futures::FutureExt;
use ruma::{EventId, RoomId, UserId};
use serde_json::Value;

use super::{Error, Landed};
use crate::crypto::Crypto;
use crate::matrix;

/// The content key every write carries: its transaction id, to find it again.
pub const MARKER: &str = "org.richbot.write";
/// Events per page of the search.
const PAGE: u32 = 100;
/// Pages read at most (a bound for a homeserver whose clock or pagination misleads).
const MAX_PAGES: usize = 100;
/// How much earlier than its claim a write's event may say it was sent (clock skew).
const SKEW_MS: i64 = 60_000;

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

/// Looks for a write of `persona` in `room` by its marker, among the persona's messages
/// since the write was first claimed (`since`, ms). In an encrypted room the persona's
/// messages are decrypted with `crypto` (its own room keys) to read their markers.
pub(super) async fn find(
    matrix: &matrix::Client,
    crypto: Option<&Crypto>,
    room: &RoomId,
    persona: &UserId,
    txn: &str,
    since: i64,
) -> Result<Option<Landed>, Error> {
    // A poll's start and end are writes too (`polls`).
    let types = ["m.room.message", "m.room.encrypted", "org.matrix.msc3381.poll.start", "org.matrix.msc3381.poll.end"];
    let filter = serde_json::json!({"senders": [persona], "types": types, "lazy_load_members": true});
    let mut from: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let (events, next) =
            matrix.events_back(room, persona, &filter, from.as_deref(), PAGE).await.map_err(|e| match e {
                matrix::Error::Unavailable(_) => Error::Unavailable(e.to_string()),
                matrix::Error::Refused { .. } => Error::Refused(e.to_string()),
            })?;
        let mut found = None;
        for e in events.iter().filter(|e| e.get("sender").and_then(Value::as_str) == Some(persona.as_str())) {
            let content = match (e.get("type").and_then(Value::as_str), crypto) {
                (Some("m.room.encrypted"), Some(crypto)) => {
                    crypto.unseal(persona, room, e).boxed().await.map_err(|e| Error::Unavailable(e.to_string()))?
                }
                _ => e.get("content").cloned(),
            };
            if content.as_ref().and_then(|c| c.get(MARKER)).and_then(Value::as_str) == Some(txn) {
                found = Some((e, content));
                break;
            }
        }
        if let Some((e, content)) = found {
            let landed = EventId::parse(e.get("event_id").and_then(Value::as_str).unwrap_or_default())
                .ok()
                .map(|id| Landed { id, content });
            if let Some(l) = &landed {
                tracing::info!(txn, event_id = %l.id, "a write of a crashed run had landed; adopting it, not sending again");
            }
            return Ok(landed);
        }
        let oldest = events.iter().filter_map(|e| e.get("origin_server_ts").and_then(Value::as_i64)).min();
        let past = oldest.is_some_and(|ts| ts < since - SKEW_MS);
        match next {
            Some(token) if !events.is_empty() && !past && Some(&token) != from.as_ref() => from = Some(token),
            _ => return Ok(None),
        }
    }
    tracing::warn!(txn, pages = MAX_PAGES, "gave up looking for a write's marker; it may be sent twice");
    Ok(None)
}

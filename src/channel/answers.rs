//! What people answered to a client's message: replies, thread messages and reactions,
//! with their senders, so an agent can wait for a person's answer or a ✅. Read from the
//! room's stored history after a cursor (`since`, the `next` of the previous read), a
//! bounded page at a time; richbot's own writes (the message's edits) are left out, and
//! in an encrypted room a read stops before a message still waiting for its key.

use ruma::EventId;
use serde_json::{Value, json};

use super::{Channel, Client, Failure};
use crate::relation::Relation;

/// Events of the room looked at per read, at most.
const PAGE: i64 = 500;
/// How long a read waits for an encrypted event to be decrypted (its key may come late)
/// before it reads past it; one never decrypted is left out.
const HOLD_MS: i64 = 10 * 60 * 1000;

impl Channel {
    /// The answers to `message` after `since` (default: since the message), and the
    /// cursor to read on from.
    pub async fn replies(&self, client: &Client, message: &EventId, since: Option<&str>) -> Result<Value, Failure> {
        let sent = self.own_message(client, message).await?;
        self.still_allowed(client, &sent.room_id).await?;
        let message: &EventId = sent.replaces.as_deref().unwrap_or(message);
        let since = match since.map(str::trim).filter(|s| !s.is_empty()) {
            Some(s) => s
                .parse::<i64>()
                .map_err(|_| Failure::invalid("since", "since must be the \"next\" of an earlier read"))?,
            None => self.store.event_seq(message).await.map_err(Failure::internal)?.unwrap_or(0),
        };
        let events = self.store.events_after(&sent.room_id, since, PAGE).await.map_err(Failure::internal)?;
        let mut next = since;
        let mut replies = Vec::new();
        let recent = crate::clock::now_ms() - HOLD_MS;
        for e in &events {
            // Not decrypted yet: the page ends before it, so the next read sees it clear.
            if e.event_type == "m.room.encrypted" && e.received_at > recent {
                break;
            }
            next = e.seq;
            if e.sender == client.persona || e.event_type == "m.room.encrypted" {
                continue;
            }
            let Some(relation) = e.relation() else { continue };
            let (kind, key) = match &relation {
                Relation::Annotation { target, key } if **target == *message => ("reaction", Some(key.clone())),
                r if r.thread_root() == Some(message) => ("thread", None),
                r if r.reply_to() == Some(message) => ("reply", None),
                _ => continue,
            };
            let mut item =
                json!({"event_id": e.event_id, "sender": e.sender, "kind": kind, "origin_server_ts": e.origin_ts});
            match key {
                Some(key) => item["key"] = key.into(),
                None => item["body"] = e.content().get("body").cloned().unwrap_or(Value::Null),
            }
            replies.push(item);
        }
        Ok(json!({"message_id": message, "room_id": sent.room_id, "replies": replies, "next": next.to_string()}))
    }
}

//! Applying a redaction to what richbot keeps: the redacted event's text (and its
//! edits') is scrubbed from the store and from what a running turn recorded. Only when
//! the redaction may take effect: its sender sent the event, or holds the room's redact
//! level in the state the homeserver returns now. A homeserver passes on any redaction a
//! remote server sends (servers check it when they serve the event), so richbot checks
//! it too: a member without the power cannot erase another's question from the model's
//! context.

use ruma::{EventId, RoomId};

use super::Error;
use super::commands::Commands;
use super::power::{power, redact_level};
use crate::store::StoredEvent;

impl Commands {
    /// Applies `event` (an `m.room.redaction` in `room`) if it may take effect.
    pub async fn redaction(&self, room: &RoomId, event: &StoredEvent) -> Result<(), Error> {
        let redacts = event.event.get("redacts").or_else(|| event.content().get("redacts"));
        let Some(target) = redacts.and_then(|r| r.as_str()).and_then(|r| EventId::parse(r).ok()) else { return Ok(()) };
        if !self.may_redact(room, event, &target).await? {
            tracing::warn!(%room, redacted = %target, sender = %event.sender, "a redaction by someone without the power to redact that event was not applied");
            return Ok(());
        }
        let scrubbed = self.store.redact(room, &target).await?;
        self.store.scrub_turn_records(room, &target, None).await?;
        tracing::info!(%room, redacted = %target, scrubbed, "redaction applied");
        Ok(())
    }

    async fn may_redact(&self, room: &RoomId, redaction: &StoredEvent, target: &EventId) -> Result<bool, Error> {
        // Who sent the target, as richbot keeps it (a room event, or a message of its own
        // whose echo has not come yet). One it never kept has nothing to scrub: no need
        // to ask the homeserver.
        let sender = match self.store.event(target).await? {
            Some(e) => Some((e.room_id, e.sender)),
            None => self.store.sent_message(target).await?.map(|m| (m.room_id, m.sender)),
        };
        let Some((_, sender)) = sender.filter(|(r, _)| r == room) else { return Ok(false) };
        if sender == redaction.sender {
            return Ok(true);
        }
        // Asked as a persona in the room (its state is theirs to read).
        let joined = self.store.joined_members(room).await?;
        let Some(viewer) = joined.iter().find(|u| self.personas.is_persona(u)) else {
            return Ok(false);
        };
        let state = self.matrix.room_state(room, viewer).await?;
        Ok(power(&state, &redaction.sender).at_least(redact_level(&state)))
    }
}

//! An interactive verification request to a persona (`m.key.verification.request`, a
//! message in a DM room, as Element and nheko send it to verify another user) is
//! answered at once with `m.key.verification.cancel` and a reason the member's client
//! shows: a persona's devices are cross-signed by its own identity when they are set up,
//! and there is no person at richbot's end to compare emoji with, so the member's client
//! never waits on a request nobody will answer. It starts no turn of the model.

use ruma::UserId;
use serde_json::{Value, json};

use super::Error;
use super::membership::Membership;
use crate::clock::now_ms;
use crate::outbox::{Write, WriteId};
use crate::store::StoredEvent;
use crate::strings;
use crate::turn::{Outcome, Turns};

/// The message type of an in-room verification request.
pub const REQUEST: &str = "m.key.verification.request";

/// Whether `event` is a verification request (to anyone).
pub fn is_request(event: &StoredEvent) -> bool {
    event.content().get("msgtype").and_then(Value::as_str) == Some(REQUEST)
}

impl Membership {
    /// Cancels `event` (a verification request) if it asks a persona of the room, as a
    /// turn of its own (sent once, its event settled with it).
    pub async fn refuse_verification(&self, event: &StoredEvent, turns: &Turns) -> Result<bool, Error> {
        let to = event.content().get("to").and_then(Value::as_str).and_then(|t| UserId::parse(t).ok());
        let Some(persona) = to.filter(|t| self.personas.is_persona(t)) else { return Ok(false) };
        let room = &event.room_id;
        if !self.store.joined_members(room).await?.contains(&persona) {
            return Ok(false);
        }
        let turn = self.store.start_turn(room, &persona, &event.sender, &[event.seq], None, now_ms()).await?;
        let write = Write { id: WriteId { turn: turn.id, seq: 0 }, room, persona: &persona };
        let cancel = json!({
            "code": "m.user",
            "reason": strings::NO_VERIFICATION,
            "m.relates_to": {"rel_type": "m.reference", "event_id": event.event_id},
        });
        let outcome = match self.outbox.send_event(&write, "m.key.verification.cancel", &cancel).await {
            Ok(_) => Outcome::Command("verification".to_owned()),
            Err(e) => Outcome::PostFailed(e.to_string()),
        };
        tracing::info!(%room, %persona, asker = %event.sender, "an interactive verification request was cancelled");
        turns.finish(&turn, outcome, Default::default()).await?;
        Ok(true)
    }
}

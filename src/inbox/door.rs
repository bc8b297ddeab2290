//! Triage at the door: whether a pushed event needs a room worker at all.
//!
//! - In a room no persona is (or was) in, an event that is not about a persona (its
//!   membership, or sent by one) and is not a redaction can start nothing and change
//!   nothing richbot keeps: stored as history, settled.
//! - In a room a persona is in, a plain message (no relation, no button id, not from a
//!   persona) that addresses no persona there is settled too, by the same pure decision the
//!   workers make (`room::triggers::trigger`, with the relation facts all false, which is
//!   what they are for a message without relations). Only when the room is idle: no event
//!   of it waits or is in a worker's hands, and its members are known in memory, so that
//!   membership the worker has not applied yet cannot change the answer.
//! - Everything else goes to the room's worker, and makes the room active until a step
//!   leaves it with nothing pending.
//!
//! A persona's membership or message makes its room watched from then on.
//!
//! With other instances on the same database (`shared`), what this process saw is not all
//! there is: a persona may have joined a room through a transaction another instance took.
//! So before deciding, the door asks the database which of the transaction's rooms are
//! watched there (a persona's membership, applied or still pending), and no chatter is
//! settled in a watched room (the members are not kept in memory then).

use ruma::{OwnedRoomId, OwnedUserId, UserId};
use serde_json::Value;

use crate::blocks::read_used_id;
use crate::personas::Personas;
use crate::queue::RoomQueue;
use crate::room::{Policy, triggers};
use crate::store::{self, NewEvent, Store};

/// What the door decides with.
#[derive(Debug, Clone)]
pub struct Door {
    pub(super) store: Store,
    pub(super) queue: std::sync::Arc<RoomQueue>,
    pub(super) personas: Personas,
    pub(super) policy: Policy,
    /// Other instances share the database.
    pub(super) shared: bool,
}

impl Door {
    /// Among other instances: learns which rooms of `events` are watched in the database.
    pub async fn learn_watched(&self, events: &[NewEvent]) -> Result<(), store::Error> {
        if !self.shared {
            return Ok(());
        }
        let mut rooms: Vec<OwnedRoomId> = Vec::new();
        for e in events.iter().filter(|e| !e.processed) {
            if !rooms.contains(&e.room_id) && !self.queue.watched(&e.room_id) {
                rooms.push(e.room_id.clone());
            }
        }
        let personas: Vec<OwnedUserId> = self.personas.all().iter().map(|p| p.user_id.clone()).collect();
        for room in self.store.watched_among(&rooms, &personas).await? {
            self.queue.watch(&room);
        }
        Ok(())
    }

    /// Whether a worker must see `event`; if so, its room is active from now on.
    pub fn needs_worker(&self, event: &NewEvent) -> bool {
        let room = &event.room_id;
        if self.queue.watched(room) {
            if !self.queue.is_active(room) && self.quiet_in_watched_room(event) {
                return false;
            }
            self.queue.activate(room);
            return true;
        }
        let about_persona = self.personas.is_persona(&event.sender)
            || (event.event_type == "m.room.member"
                && event
                    .state_key
                    .as_deref()
                    .and_then(|k| UserId::parse(k).ok())
                    .is_some_and(|u| self.personas.is_persona(&u)));
        if about_persona {
            self.queue.watch(room);
        }
        if about_persona || event.event_type == "m.room.redaction" {
            self.queue.activate(room);
            return true;
        }
        false
    }

    /// A plain message that addresses no persona of the (idle) room.
    fn quiet_in_watched_room(&self, event: &NewEvent) -> bool {
        if event.event_type != "m.room.message" || self.personas.is_persona(&event.sender) {
            return false;
        }
        let Some(members) = self.store.known_members(&event.room_id) else { return false };
        let Ok(value) = serde_json::from_str::<Value>(&event.event) else { return false };
        let Some(content) = value.get("content") else { return false };
        if content.get("m.relates_to").is_some() || read_used_id(content).is_some() {
            return false;
        }
        let allowed = self.policy.allowed(&event.sender);
        self.personas.all().iter().filter(|p| members.contains(&p.user_id)).all(|p| {
            let facts = triggers::Facts {
                persona_id: &p.user_id,
                display_name: &p.display_name,
                is_dm: members.len() == 2,
                sender_is_ours: false,
                sender_allowed: allowed,
                group_requires_mention: self.policy.group_requires_mention,
                used_button_posted: false,
                replies_to_persona: false,
                in_persona_thread: false,
                reacted_buttons: None,
            };
            triggers::trigger(&value, &facts).is_none()
        })
    }
}

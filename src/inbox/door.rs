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
//! there is: a persona may have joined a room through a transaction another instance took,
//! and another instance's worker may have its events in hand. So before deciding, the door
//! asks the database about the transaction's rooms (`store::RoomFacts`, three indexed
//! reads per transaction): which are watched (a persona's membership, applied or still
//! pending), which are busy (events not yet processed), and, for the idle ones, which
//! personas are joined and how many members. Idle means the same as in one process: no
//! membership waits to be applied, so the answer cannot change under the door (the
//! homeserver sends one transaction at a time, so no other door is deciding meanwhile).

use std::collections::HashMap;

use ruma::{OwnedRoomId, OwnedUserId, RoomId, UserId};
use serde_json::Value;

use crate::blocks::read_used_id;
use crate::personas::Personas;
use crate::queue::RoomQueue;
use crate::room::{Policy, triggers};
use crate::store::{self, NewEvent, RoomFacts, Store};

/// The database's facts about a transaction's rooms (none in one process).
pub type Facts = HashMap<OwnedRoomId, RoomFacts>;

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
    /// Among other instances: what the database says of the rooms of `events`.
    pub async fn facts(&self, events: &[NewEvent]) -> Result<Facts, store::Error> {
        if !self.shared {
            return Ok(Facts::new());
        }
        let mut rooms: Vec<OwnedRoomId> = Vec::new();
        for e in events.iter().filter(|e| !e.processed) {
            if !rooms.contains(&e.room_id) {
                rooms.push(e.room_id.clone());
            }
        }
        let personas: Vec<OwnedUserId> = self.personas.all().iter().map(|p| p.user_id.clone()).collect();
        let facts = self.store.door_facts(&rooms, &personas).await?;
        Ok(facts.into_iter().map(|f| (f.room.clone(), f)).collect())
    }

    /// Whether a worker must see `event`; if so, its room is active from now on.
    pub fn needs_worker(&self, event: &NewEvent, facts: &Facts) -> bool {
        let room = &event.room_id;
        let known = facts.get(room);
        if known.is_some() {
            self.queue.watch(room);
        }
        if self.queue.watched(room) {
            if !self.queue.is_active(room) && self.quiet_in_watched_room(event, known) {
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

    /// The personas joined to the idle `room`, and how many members it has: from memory
    /// in one process, from the database's `facts` among several. `None`: not known to be
    /// idle.
    fn members(&self, room: &RoomId, facts: Option<&RoomFacts>) -> Option<(Vec<OwnedUserId>, usize)> {
        if self.shared {
            let f = facts.filter(|f| !f.busy)?;
            return Some((f.personas.clone(), usize::try_from(f.joined).ok()?));
        }
        let members = self.store.known_members(room)?;
        let personas = self.personas.all().iter().map(|p| p.user_id.clone()).filter(|p| members.contains(p)).collect();
        Some((personas, members.len()))
    }

    /// A plain message that addresses no persona of the (idle) room.
    fn quiet_in_watched_room(&self, event: &NewEvent, facts: Option<&RoomFacts>) -> bool {
        if event.event_type != "m.room.message" || self.personas.is_persona(&event.sender) {
            return false;
        }
        let Some((joined, members)) = self.members(&event.room_id, facts) else { return false };
        let Ok(value) = serde_json::from_str::<Value>(&event.event) else { return false };
        let Some(content) = value.get("content") else { return false };
        // A verification request is answered (cancelled) by its room's worker.
        let verification = content.get("msgtype").and_then(Value::as_str) == Some("m.key.verification.request");
        if verification || content.get("m.relates_to").is_some() || read_used_id(content).is_some() {
            return false;
        }
        let allowed = self.policy.allowed(&event.sender);
        self.personas.all().iter().filter(|p| joined.contains(&p.user_id)).all(|p| {
            let facts = triggers::Facts {
                persona_id: &p.user_id,
                display_name: &p.display_name,
                is_dm: members == 2,
                sender_is_ours: false,
                sender_allowed: allowed,
                group_requires_mention: self.policy.group_requires_mention,
                used_button_posted: false,
                replies_to_persona: false,
                in_persona_thread: false,
                reacted_buttons: None,
                // A typed press is a DM message or a reply: answered anyway.
                typed_buttons: None,
                // A message without a relation answers nothing.
                answers_agent: false,
                // A vote is a reply, or a DM's message: answered anyway.
                poll: None,
            };
            triggers::trigger(&value, &facts).is_none()
        })
    }
}

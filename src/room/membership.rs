//! Member events: invites to a persona are accepted from allowed users (register, join,
//! learn the members, remember a DM, greet if configured) and declined from anyone else,
//! or past the room limits (`limits.rooms_per_inviter`, `limits.rooms_total`: declined
//! with a reason the inviter sees);
//! membership is kept in the store; a persona leaves a room where only personas remain.
//!
//! Encrypted rooms are read and answered when encryption is on (`crate::crypto`; an
//! invite's stripped state tells the room's key settings). When it is off, or the
//! homeserver does not support it, each persona there says once, as a notice, that it
//! cannot read them, then leaves (or, with `bot.encrypted_rooms = "stay"`, stays
//! silent). A room is judged by its state, never by a timeline event anyone can send: an invite's
//! stripped state or an `m.room.encryption` state event says so; an `m.room.encrypted`
//! message from an allowed member only makes richbot ask the homeserver for the room's
//! `m.room.encryption` state (once per room), and one from anyone else changes nothing.

use std::collections::HashSet;
use std::sync::Mutex;

use ruma::{OwnedRoomId, RoomId, UserId};
use serde_json::Value;

use super::Error;
use super::facts::Policy;
use crate::clock::now_ms;
use crate::crypto::Crypto;
use crate::matrix;
use crate::outbox::{Outbox, Write, WriteId};
use crate::personas::{Persona, Personas};
use crate::render;
use crate::store::{Rotation, Store, StoredEvent};
use crate::strings;
use crate::turn::{Outcome, Parties, Turns};

/// Applies member events.
#[derive(Debug)]
pub struct Membership {
    pub(super) store: Store,
    matrix: matrix::Client,
    pub(super) personas: Personas,
    pub(super) outbox: Outbox,
    policy: Policy,
    /// Encrypted rooms already told (for personas that stay).
    told_encrypted: Mutex<HashSet<OwnedRoomId>>,
    /// Rooms whose state was fetched and found unencrypted after an encrypted message
    /// (fetched once: a forged message does not cost a request each).
    checked_clear: Mutex<HashSet<OwnedRoomId>>,
    /// The personas' crypto, when encrypted rooms are read.
    pub(super) crypto: Option<Crypto>,
}

impl Membership {
    pub fn new(store: Store, matrix: matrix::Client, personas: Personas, outbox: Outbox, policy: Policy) -> Self {
        let (told_encrypted, checked_clear) = (Mutex::default(), Mutex::default());
        Self { store, matrix, personas, outbox, policy, told_encrypted, checked_clear, crypto: None }
    }

    /// `event` (an `m.room.encryption` state event, or an `m.room.encrypted` message) may
    /// show the room is encrypted: if its state says so, each persona in it says so once,
    /// then leaves unless configured to stay.
    pub async fn encrypted(&self, event: &StoredEvent, turns: &Turns) -> Result<(), Error> {
        let room = &event.room_id;
        if lock(&self.told_encrypted).contains(room) {
            return Ok(());
        }
        let joined = self.store.joined_members(room).await?;
        let Some(viewer) = joined.iter().find(|u| self.personas.get(u).is_some()) else { return Ok(()) };
        let by_state = event.event_type == "m.room.encryption" && event.state_key.as_deref() == Some("");
        if !by_state {
            if !self.policy.allowed(&event.sender) || lock(&self.checked_clear).contains(room) {
                return Ok(());
            }
            let Some(state) = self.matrix.state_event(room, viewer, "m.room.encryption", "").await? else {
                tracing::info!(%room, sender = %event.sender, "an encrypted message in a room whose state is not encrypted; ignored");
                lock(&self.checked_clear).insert(room.clone());
                return Ok(());
            };
            if let Some(algorithm) = state["algorithm"].as_str().filter(|a| !a.is_empty()) {
                self.store.set_room_encryption(room, algorithm, Rotation::of(&state)).await?;
            }
        }
        if !lock(&self.told_encrypted).insert(room.clone()) {
            return Ok(());
        }
        for persona in joined.iter().filter(|u| self.personas.get(u).is_some()) {
            self.say_encrypted(room, persona, &event.sender, turns).await?;
        }
        Ok(())
    }

    async fn say_encrypted(&self, room: &RoomId, persona: &UserId, asker: &UserId, turns: &Turns) -> Result<(), Error> {
        tracing::info!(%room, %persona, "the room is encrypted; saying so");
        Box::pin(turns.notice(
            Parties { room, persona, asker },
            &[],
            strings::ENCRYPTED.to_owned(),
            Outcome::Encrypted,
        ))
        .await?;
        if self.policy.leave_encrypted {
            self.matrix.leave(room, persona).await?;
            self.store.set_membership(room, persona, "leave").await?;
        }
        Ok(())
    }

    /// Applies a member event; `turns` records a greeting as a turn of its own.
    pub async fn apply(&self, event: &StoredEvent, turns: &Turns) -> Result<(), Error> {
        let Some(target) = event.state_key.as_deref().and_then(|k| ruma::UserId::parse(k).ok()) else {
            return Ok(());
        };
        let membership = event.content().get("membership").and_then(Value::as_str).unwrap_or("");
        let room = &event.room_id;
        if let Some(persona) = self.personas.get(&target) {
            if membership == "invite" && event.sender != target {
                return self.invited(room, persona, event, turns).await;
            }
            self.store.set_membership(room, &target, membership).await?;
            return Ok(());
        }
        self.store.set_membership(room, &target, membership).await?;
        if matches!(membership, "leave" | "ban") {
            let joined = self.store.joined_members(room).await?;
            if !joined.is_empty() && joined.iter().all(|u| self.personas.get(u).is_some()) {
                for user in joined.iter() {
                    tracing::info!(%room, %user, "leaving: only personas are left in the room");
                    self.matrix.leave(room, user).await?;
                    self.store.set_membership(room, user, "leave").await?;
                }
            }
        }
        Ok(())
    }

    async fn invited(&self, room: &RoomId, persona: &Persona, event: &StoredEvent, turns: &Turns) -> Result<(), Error> {
        let user = &persona.user_id;
        if !self.policy.allowed(&event.sender) {
            tracing::info!(%room, inviter = %event.sender, persona = %user, "declining an invite from a user who is not allowed");
            match self.matrix.leave(room, user).await {
                Ok(()) | Err(matrix::Error::Refused { .. }) => {}
                Err(e) => return Err(e.into()),
            }
            return Ok(());
        }
        if let Some(why) = self.over_limit(&event.sender).await? {
            tracing::info!(%room, inviter = %event.sender, persona = %user, why, "declining an invite over the room limits");
            match self.matrix.leave_saying(room, user, Some(&why)).await {
                Ok(()) | Err(matrix::Error::Refused { .. }) => {}
                Err(e) => return Err(e.into()),
            }
            return Ok(());
        }
        self.personas.ensure_registered(user).await?;
        match self.matrix.join(room, user).await {
            Ok(()) => {}
            Err(matrix::Error::Refused { errcode, error, .. }) => {
                // The invite was withdrawn or the room is gone: nothing to retry.
                tracing::warn!(%room, persona = %user, errcode, error, "could not join");
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        }
        self.store.record_inviter(room, user, &event.sender, now_ms()).await?;
        let members = self.matrix.joined_members(room, user).await?;
        self.store.set_joined_members(room, &members).await?;
        if event.content().get("is_direct").and_then(Value::as_bool) == Some(true) {
            self.store.set_dm_room(user, &event.sender, room).await?;
        }
        tracing::info!(%room, persona = %user, inviter = %event.sender, "joined");
        if let Some(encryption) = invite_encryption(&event.event) {
            // The room's key settings, known from the invite: its writes are encrypted,
            // or refused while richbot cannot encrypt (never sent clear).
            let rotation = Rotation::of(encryption);
            let algorithm = encryption["algorithm"].as_str().unwrap_or(crate::matrix::MEGOLM);
            self.store.set_room_encryption(room, algorithm, rotation).await?;
            if !self.crypto.as_ref().is_some_and(Crypto::active) {
                lock(&self.told_encrypted).insert(room.to_owned());
                return self.say_encrypted(room, user, &event.sender, turns).await;
            }
        }
        if let Some(greeting) = &persona.greeting {
            let content = match render::text(greeting, None) {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(persona = %user, error = %e, "the configured greeting cannot be sent");
                    return Ok(());
                }
            };
            let turn = self.store.start_turn(room, user, &event.sender, &[], None, now_ms()).await?;
            let write = Write { id: WriteId { turn: turn.id, seq: 0 }, room, persona: user };
            let outcome = match self.outbox.send(&write, &content, None).await {
                Ok(_) => Outcome::Greeted,
                Err(e) => Outcome::GreetingFailed(e.to_string()),
            };
            turns.finish(&turn, outcome, Default::default()).await?;
        }
        Ok(())
    }
}

impl Membership {
    /// Why one more room for an invite from `inviter` is over the limits, if it is.
    async fn over_limit(&self, inviter: &UserId) -> Result<Option<String>, Error> {
        let personas: Vec<_> = self.personas.all().iter().map(|p| p.user_id.clone()).collect();
        if self.store.rooms_joined(&personas).await? >= self.policy.rooms_total {
            return Ok(Some(strings::TOO_MANY_ROOMS.to_owned()));
        }
        let n = self.policy.rooms_per_inviter;
        Ok((self.store.rooms_invited_by(inviter).await? >= n).then(|| strings::too_many_rooms_from(n)))
    }
}

/// The `m.room.encryption` content of an invite's stripped state, if it holds one.
fn invite_encryption(invite: &Value) -> Option<&Value> {
    let stripped = invite.get("invite_room_state").or_else(|| invite.get("unsigned")?.get("invite_room_state"))?;
    stripped
        .as_array()?
        .iter()
        .find(|e| e.get("type").and_then(Value::as_str) == Some("m.room.encryption"))
        .map(|e| e.get("content").unwrap_or(&Value::Null))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

//! Member events: invites to a persona are accepted from allowed users (register, join,
//! learn the members, remember a DM, greet if configured) and declined from anyone else;
//! membership is kept in the store; a persona leaves a room where only personas remain.

use ruma::{RoomId, UserId};
use serde_json::Value;

use super::{Engine, Error};
use crate::clock::now_ms;
use crate::matrix;
use crate::personas::Persona;
use crate::render;
use crate::store::{StoredEvent, TurnRecord};

impl Engine {
    /// Applies a member event.
    pub(super) async fn membership(&self, event: &StoredEvent) -> Result<(), Error> {
        let Some(target) = event.state_key.as_deref() else { return Ok(()) };
        let membership = event.content().get("membership").and_then(Value::as_str).unwrap_or("");
        let Ok(room) = RoomId::parse(event.room_id.as_str()) else { return Ok(()) };
        if let Some(persona) = self.personas.get(target) {
            if membership == "invite" && event.sender != target {
                return self.invited(&room, persona, event).await;
            }
            self.store.set_membership(room.as_str(), target, membership).await?;
            return Ok(());
        }
        self.store.set_membership(room.as_str(), target, membership).await?;
        if matches!(membership, "leave" | "ban") {
            let joined = self.store.joined_members(room.as_str()).await?;
            if !joined.is_empty() && joined.iter().all(|u| self.personas.get(u).is_some()) {
                for user in joined {
                    let Ok(user) = UserId::parse(user.as_str()) else { continue };
                    tracing::info!(%room, %user, "leaving: only personas are left in the room");
                    self.matrix.leave(&room, &user).await?;
                    self.store.set_membership(room.as_str(), user.as_str(), "leave").await?;
                }
            }
        }
        Ok(())
    }

    async fn invited(&self, room: &RoomId, persona: &Persona, event: &StoredEvent) -> Result<(), Error> {
        let user = &persona.user_id;
        if !self.settings.allowed(&event.sender) {
            tracing::info!(%room, inviter = %event.sender, persona = %user, "declining an invite from a user who is not allowed");
            match self.matrix.leave(room, user).await {
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
        let members: Vec<String> =
            self.matrix.joined_members(room, user).await?.iter().map(ToString::to_string).collect();
        self.store.set_joined_members(room.as_str(), &members).await?;
        if event.content().get("is_direct").and_then(Value::as_bool) == Some(true) {
            self.store.set_dm_room(user.as_str(), &event.sender, room.as_str()).await?;
        }
        tracing::info!(%room, persona = %user, inviter = %event.sender, "joined");
        if let Some(greeting) = &persona.greeting {
            let content = match render::text(greeting, None) {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(persona = %user, error = %e, "the configured greeting cannot be sent");
                    return Ok(());
                }
            };
            let turn = self.store.start_turn(room.as_str(), user.as_str(), &event.sender, &[], now_ms()).await?;
            let result = self.poster.send(turn, 0, room, user, &content, None).await;
            let outcome = if result.is_ok() { "greeted" } else { "greeting_failed" };
            self.store
                .finish_turn(turn, &TurnRecord { outcome: outcome.into(), ..Default::default() }, now_ms())
                .await?;
        }
        Ok(())
    }
}

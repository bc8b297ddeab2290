//! A persona's direct chat with someone (for a write the asker, or an agent client, wants
//! in their DM): the one recorded, while the persona is in it and the person is joined or
//! still invited (a second write before they accept goes to the same room); else a new
//! one, opened with an `is_direct` invite, encrypted from the start when encryption is on,
//! as Element makes DMs. Its members and encryption are recorded at once, so a write
//! right after it shares the room key with the invitee.

use ruma::{OwnedRoomId, UserId};

use super::{Error, Outbox};
use crate::crypto::Crypto;
use crate::matrix;

impl Outbox {
    /// The direct chat of `persona` with `user`: the recorded one if both are still in it
    /// (`user` joined or invited), else a new one, recorded.
    pub async fn dm(&self, persona: &UserId, user: &UserId) -> Result<OwnedRoomId, Error> {
        let _one = self.opening.lock().await;
        if let Some(room) = self.store.dm_room(persona, user).await? {
            let readers = self.store.readers(&room, true).await?;
            let joined = self.store.joined_members(&room).await?;
            if joined.iter().any(|u| u == persona) && readers.iter().any(|u| u == user) {
                return Ok(room);
            }
        }
        let room = self.create_dm(persona, user).await.map_err(|e| match e {
            matrix::Error::Unavailable(_) => Error::Unavailable(e.to_string()),
            matrix::Error::Refused { .. } => Error::Refused(e.to_string()),
        })?;
        self.store.set_dm_room(persona, user, &room).await?;
        tracing::info!(%persona, %user, %room, "opened a direct chat");
        Ok(room)
    }

    /// Opens a direct chat from `persona` with `invitee` (an `is_direct` invite),
    /// encrypted when encryption is on and a probe found it working.
    pub async fn create_dm(&self, persona: &UserId, invitee: &UserId) -> Result<OwnedRoomId, matrix::Error> {
        // Encrypted only once encryption is known to work: a DM made encrypted on a
        // homeserver that lacks it is one the persona can never read.
        let encrypted = self.crypto.as_ref().is_some_and(Crypto::known_to_work);
        let room = self.matrix.create_dm(persona, invitee, encrypted).await?;
        // Known at once, before the room's own events arrive: the first write may follow
        // right away, and its room key must reach the invitee.
        let known = async {
            self.store.set_membership(&room, persona, "join").await?;
            self.store.set_membership(&room, invitee, "invite").await?;
            match encrypted {
                true => self.store.set_room_encryption(&room, matrix::MEGOLM, Default::default()).await,
                false => Ok(()),
            }
        };
        if let Err(e) = known.await {
            tracing::warn!(%room, error = %e, "could not record the new DM's members; they are learnt from its events");
        }
        Ok(room)
    }
}

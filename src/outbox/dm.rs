//! Opening a direct chat as a persona (for a write the asker wants in their DM): an
//! `is_direct` invite, encrypted from the start when encryption is on, as Element makes
//! DMs. Its members and encryption are recorded at once, so a write right after it shares
//! the room key with the invitee.

use ruma::{OwnedRoomId, UserId};

use super::Outbox;
use crate::crypto::Crypto;
use crate::matrix;

impl Outbox {
    /// Opens a direct chat from `persona` with `invitee` (an `is_direct` invite),
    /// encrypted when encryption is on.
    pub async fn create_dm(&self, persona: &UserId, invitee: &UserId) -> Result<OwnedRoomId, matrix::Error> {
        let encrypted = self.crypto.as_ref().is_some_and(Crypto::active);
        let room = self.matrix.create_dm(persona, invitee, encrypted).await?;
        // Known at once, before the room's own events arrive: the first write may follow
        // right away, and its room key must reach the invitee.
        let known = async {
            self.store.set_membership(&room, persona, "join").await?;
            self.store.set_membership(&room, invitee, "invite").await?;
            match encrypted {
                true => self.store.set_room_encryption(&room, matrix::MEGOLM, (None, None)).await,
                false => Ok(()),
            }
        };
        if let Err(e) = known.await {
            tracing::warn!(%room, error = %e, "could not record the new DM's members; they are learnt from its events");
        }
        Ok(room)
    }
}

//! Opening a direct chat as a persona (for a write the asker wants in their DM): an
//! `is_direct` invite, encrypted from the start when encryption is on, as Element makes
//! DMs, and known to be encrypted from then on.

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
        if encrypted && let Err(e) = self.store.set_room_encryption(&room, matrix::MEGOLM, (None, None)).await {
            tracing::warn!(%room, error = %e, "could not record that the new DM is encrypted; it is asked again");
        }
        Ok(room)
    }
}

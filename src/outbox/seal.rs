//! Sending a write, and sealing it first in an encrypted room: the content (with its
//! marker) is encrypted by the persona's crypto before the first attempt and the
//! ciphertext kept with the outbox row, so every attempt, and a resumed turn's, sends the
//! same bytes (the room key's message index advances once), and a write found to have
//! landed is known by the clear content it was sealed from.

use futures::FutureExt;
use ruma::OwnedEventId;
use serde_json::Value;

use super::{Error, MARKER, Outbox, Write};
use crate::crypto::Crypto;
use crate::matrix;

impl Outbox {
    /// The crypto to encrypt a write to `room` with, if the room is encrypted; a room
    /// known to be encrypted while richbot cannot encrypt (encryption off, or the
    /// homeserver found lacking) is `Unencrypted`: a write is never downgraded to clear.
    pub(super) async fn sealer(&self, w: &Write<'_>) -> Result<Option<&Crypto>, Error> {
        let encrypted = self.encrypted(w.room, w.persona).await?;
        match self.crypto.as_ref() {
            _ if !encrypted => Ok(None),
            Some(crypto) if crypto.active() => Ok(Some(crypto)),
            _ => Err(Error::Unencrypted(w.room.to_string())),
        }
    }

    /// Whether `room` is encrypted, as `persona` writes to it: what goes with a write there
    /// (an upload) is encrypted too.
    pub async fn encrypted(&self, room: &ruma::RoomId, persona: &ruma::UserId) -> Result<bool, Error> {
        Ok(match self.crypto.as_ref() {
            Some(crypto) => crypto.room_encryption(room, persona).await.map_err(sealing)?.encrypted(),
            // Encryption off: what the room's state told the store (its invite, its
            // `m.room.encryption` event, or a member's encrypted message checked).
            None => self.store.room_encryption(room).await?.encrypted(),
        })
    }

    /// Sends a write: in an encrypted room, the ciphertext sealed before its first attempt
    /// (kept with its outbox row, so every attempt sends the same bytes). Returns the
    /// event and, when an earlier run's sealed content went out, that content.
    pub(super) async fn put(
        &self,
        txn: &str,
        w: &Write<'_>,
        event_type: &str,
        content: &Value,
        sealed: Option<(String, String)>,
    ) -> Result<(OwnedEventId, Option<Value>), Error> {
        let mut content = content.clone();
        content[MARKER] = Value::String(txn.to_owned());
        let (event_type, body, earlier) = match sealed {
            Some((sealed, clear)) => {
                let parse = |t: &str| serde_json::from_str::<Value>(t).map_err(|e| Error::Store(e.into()));
                ("m.room.encrypted", parse(&sealed)?, Some(parse(&clear)?))
            }
            None => match Box::pin(self.refused_unless_sealable(txn, w, &content)).await? {
                Some(crypto) => {
                    let sealing_it = crypto.encrypt(w.persona, w.room, event_type, &content);
                    let sealed = sealing_it.boxed().await.map_err(sealing)?;
                    self.store.outbox_seal(txn, &sealed.to_string(), &content.to_string()).await?;
                    ("m.room.encrypted", sealed, None)
                }
                None => (event_type, content, None),
            },
        };
        match self.matrix.send(w.room, event_type, txn, &body, w.persona).await {
            Ok(id) => Ok((id, earlier)),
            Err(matrix::Error::Refused { status, errcode, error }) => {
                let reason = format!("{errcode} ({status}): {error}");
                self.store.outbox_failed(txn, &reason).await?;
                Err(Error::Refused(reason))
            }
            Err(e @ matrix::Error::Unavailable(_)) => Err(Error::Unavailable(e.to_string())),
        }
    }
}

impl Outbox {
    /// `sealer`, with a write it refuses recorded as failed in the outbox (a flush after
    /// a restart does not try it again). The one write that may go out clear where
    /// richbot cannot encrypt is the notice that says so (`strings::ENCRYPTED`, fixed
    /// text): members learn why they get no answer, and it carries nothing of theirs.
    async fn refused_unless_sealable(
        &self,
        txn: &str,
        w: &Write<'_>,
        content: &Value,
    ) -> Result<Option<&Crypto>, Error> {
        let says_it_cannot_read =
            content["msgtype"] == "m.notice" && content["body"].as_str() == Some(crate::strings::ENCRYPTED);
        match self.sealer(w).await {
            Err(Error::Unencrypted(_)) if says_it_cannot_read => Ok(None),
            Err(e @ Error::Unencrypted(_)) => {
                tracing::warn!(room = %w.room, persona = %w.persona, "a write to an encrypted room was refused: richbot cannot encrypt now");
                self.store.outbox_failed(txn, &e.to_string()).await?;
                Err(e)
            }
            found => found,
        }
    }
}

/// A write to an encrypted room that could not be encrypted now (its persona's device not
/// set up yet, the homeserver unreachable for the key share): tried again, like an
/// unreachable homeserver.
fn sealing(e: crate::crypto::Error) -> Error {
    Error::Unavailable(format!("could not encrypt for the room: {e}"))
}

//! Encrypted events of a step, made clear before anything else looks at them (see
//! `crate::crypto`): in a room whose state says it is encrypted, each `m.room.encrypted`
//! event is decrypted by a persona of the room
//! and stored as its clear event (same id, sender, time), which the step then handles
//! like any other. One whose room key has not come is set aside to wait for it
//! (`encryption.wait_for_key_secs`), and the room goes on meanwhile: a key that comes, or
//! the wait's end, puts it back. One whose key never came (or was withheld, or that does
//! not decrypt at all) is given up, counted, and the room told at most once an hour, when
//! it came from an allowed member.

use std::sync::atomic::Ordering;

use futures::FutureExt;
use ruma::{OwnedUserId, RoomId};

use super::Error;
use super::facts::Policy;
use crate::clock::now_ms;
use crate::crypto::{Crypto, Decryption};
use crate::personas::Personas;
use crate::store::{Store, StoredEvent};
use crate::strings;
use crate::turn::{Outcome, Parties, Turns};

/// A room is told of messages it could not read at most this often.
const TELL_EVERY_MS: i64 = 3_600_000;

/// Makes a step's encrypted events clear.
#[derive(Debug, Clone)]
pub struct Decrypter {
    pub crypto: Crypto,
    pub store: Store,
    pub personas: Personas,
    pub policy: Policy,
}

impl Decrypter {
    /// `events` with each encrypted one replaced by its clear event, or left out (set
    /// aside, or given up).
    pub async fn clear(
        &self,
        room: &RoomId,
        events: Vec<StoredEvent>,
        turns: &Turns,
    ) -> Result<Vec<StoredEvent>, Error> {
        if !events.iter().any(|e| e.event_type == "m.room.encrypted") {
            return Ok(events);
        }
        let joined = self.store.joined_members(room).await?;
        let personas: Vec<OwnedUserId> =
            self.personas.all().iter().map(|p| p.user_id.clone()).filter(|p| joined.contains(p)).collect();
        // A room is judged by its state: in one that is not encrypted, an encrypted event
        // (which anyone can send) is not read, and costs nothing more.
        let Some(viewer) = personas.first() else { return Ok(events) };
        if !self.crypto.room_encryption(room, viewer).await?.encrypted() {
            return Ok(events);
        }
        let mut out = Vec::with_capacity(events.len());
        for event in events {
            if event.event_type != "m.room.encrypted" {
                out.push(event);
                continue;
            }
            // Redacted while it waited for its key: nothing left to read, nothing to say.
            if event.content().get("ciphertext").is_none() {
                self.store.end_key_wait(event.seq).await?;
                self.store.mark_processed(&[event.seq]).await?;
                continue;
            }
            match self.crypto.decrypt(room, &personas, &event.event).boxed().await? {
                Decryption::Clear(clear) => {
                    let event_type = clear["type"].as_str().unwrap_or_default().to_owned();
                    self.store.make_clear(event.seq, &event_type, &clear).await?;
                    out.push(StoredEvent { event_type, event: clear, ..event });
                }
                Decryption::MissingKey { session } if !self.store.key_wait_expired(event.seq).await? => {
                    tracing::debug!(%room, event_id = %event.event_id, session, "an encrypted message waits for its key");
                    self.store.await_key(event.seq, room, &session, self.crypto.wait_until()).await?;
                    // The pump ends waits: it must know of this one's deadline.
                    self.crypto.wake();
                }
                other => {
                    let why = match other {
                        Decryption::MissingKey { .. } => "its room key never came".to_owned(),
                        Decryption::Withheld(code) => format!("the sender's device withheld its key ({code})"),
                        Decryption::Undecryptable(why) => why,
                        Decryption::Clear(_) => unreachable!("handled above"),
                    };
                    self.give_up(room, &personas, event, &why, turns).await?;
                }
            }
        }
        Ok(out)
    }

    async fn give_up(
        &self,
        room: &RoomId,
        personas: &[OwnedUserId],
        event: StoredEvent,
        why: &str,
        turns: &Turns,
    ) -> Result<(), Error> {
        tracing::warn!(%room, event_id = %event.event_id, sender = %event.sender, why, "an encrypted message could not be read");
        self.crypto.counters().undecryptable.fetch_add(1, Ordering::Relaxed);
        self.store.end_key_wait(event.seq).await?;
        let from_member = !self.personas.is_persona(&event.sender) && self.policy.allowed(&event.sender);
        let persona = personas.first();
        match persona {
            Some(persona)
                if from_member && self.store.take_undecryptable_notice(room, now_ms(), TELL_EVERY_MS).await? =>
            {
                let sender = event.sender.clone();
                let who = Parties { room, persona, asker: &sender };
                turns.notice(who, &[event], strings::UNDECRYPTABLE.to_owned(), Outcome::Undecryptable).await?;
            }
            _ => self.store.mark_processed(&[event.seq]).await?,
        }
        Ok(())
    }
}

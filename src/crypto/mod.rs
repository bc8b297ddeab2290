//! End-to-end encryption, at the two ends of the pipeline: the inbox hands what the
//! homeserver pushes for the personas' devices to their crypto, and an `m.room.encrypted`
//! event reaches the room stage already decrypted (the clear event under the encrypted
//! event's id); the outbox encrypts a write for its room just before it is sent, and keeps
//! the ciphertext so a retry sends the same bytes. Triggers, context, tools and rendering
//! never know whether a room is encrypted.
//!
//! Each persona has one device (`device`), one Olm machine (`matrix-sdk-crypto`, the
//! crypto of Element X and Element Web) whose state lives in richbot's database
//! (`state`), held by one task at a time and, among instances, under the persona's crypto
//! lease (`machine`). `inbound` takes the crypto inbox and decrypts; `outbound` shares
//! room keys and encrypts; `requests` sends what the machine asks for as the persona's
//! device; `pushed` splits a transaction's crypto fields per persona; `probe` checks
//! that the homeserver delivers to-device messages and key counts at all; `pump` is the
//! background task that keeps the inbox taken and gives up on keys that never come.

mod apart;
mod device;
mod inbound;
mod inbox;
mod machine;
mod outbound;
mod probe;
mod pump;
mod pushed;
mod requests;
mod state;
mod verify;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ruma::{OwnedUserId, RoomId, UserId};
use serde_json::Value;

use crate::clock::now_ms;
use crate::matrix;
use crate::queue::RoomQueue;
use crate::store::{self, RoomEncryption, Rotation, Store};
use machine::Slot;
use requests::Device;

pub use device::CROSS_SIGNED;
pub use machine::{DEVICE_ID, Sharing};
pub use probe::{FOUND as PROBE_FOUND, PROBE_TYPE, Probe, probe, seen as probe_seen};
pub use pushed::{Extensions, LastCounts, Pushed};
pub use state::{DbState, Error as StateError, key};

/// A crypto failure. All but [`Error::Olm`] on a message are worth trying again later.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("store: {0}")]
    Store(#[from] store::Error),
    #[error("crypto state: {0}")]
    State(#[from] state::Error),
    #[error("homeserver: {0}")]
    Matrix(#[from] matrix::Error),
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("crypto: {0}")]
    Olm(String),
    #[error("{0} has no device set up yet")]
    NotReady(String),
    #[error("another instance holds {0}'s crypto")]
    Busy(String),
    #[error("this instance no longer holds {0}'s crypto lease")]
    Fenced(String),
    #[error("{0} is not a persona")]
    NotPersona(String),
}

/// What decrypting a room event gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Decryption {
    /// The clear event (same id, sender, time; decrypted type and content).
    Clear(Value),
    /// The room key (`session`) has not arrived (yet).
    MissingKey { session: String },
    /// The sender's device withheld the key from the persona (its code), so it will not come.
    Withheld(String),
    /// Not decryptable at all (a broken or forged event), with why.
    Undecryptable(String),
}

/// What a persona's crypto inbox brought: room keys as `(room, session id)`, and the
/// verification requests to cancel once its crypto is let go (`verify::send`).
pub type Settled = (Vec<(String, String)>, Vec<verify::Ask>);

/// What encryption did, for operators.
#[derive(Debug, Default)]
pub struct Counters {
    pub decrypted: AtomicU64,
    pub encrypted: AtomicU64,
    /// Messages given up on: their key never came, was withheld, or they were broken.
    pub undecryptable: AtomicU64,
    /// Transactions' shares for a persona's device that only repeated the key counts it
    /// was last given (`LastCounts`), not stored.
    pub repeated_counts: AtomicU64,
    /// Crypto inbox rows set aside after failing again and again.
    pub set_aside: AtomicU64,
}

/// The personas' crypto; cheap to clone.
#[derive(Debug, Clone)]
pub struct Crypto {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Store,
    matrix: matrix::Client,
    slots: Vec<Slot>,
    sharing: Option<Sharing>,
    wait_for_key: Duration,
    queue: Option<Arc<RoomQueue>>,
    wake: tokio::sync::Notify,
    counters: Arc<Counters>,
    /// Whether the homeserver sends what encryption needs, as the last probe found.
    support: probe::Support,
}

impl Crypto {
    /// Crypto for `personas`; an encrypted event waits at most `wait_for_key` for its key.
    /// Among instances, `sharing` names this one's leases; `queue` gets the rooms whose
    /// events a key (or the end of a wait) unblocks.
    pub fn new(
        store: Store,
        matrix: matrix::Client,
        personas: &[OwnedUserId],
        wait_for_key: Duration,
        sharing: Option<Sharing>,
        queue: Option<Arc<RoomQueue>>,
    ) -> Self {
        let slots = personas.iter().cloned().map(Slot::new).collect();
        let wake = tokio::sync::Notify::new();
        let counters = Arc::default();
        Self {
            inner: Arc::new(Inner {
                store,
                matrix,
                slots,
                sharing,
                wait_for_key,
                queue,
                wake,
                counters,
                support: Default::default(),
            }),
        }
    }

    pub fn counters(&self) -> Arc<Counters> {
        self.inner.counters.clone()
    }

    fn slot(&self, persona: &UserId) -> Result<&Slot, Error> {
        self.inner.slots.iter().find(|s| s.user() == persona).ok_or_else(|| Error::NotPersona(persona.to_string()))
    }

    async fn device(&self, persona: &UserId) -> Result<String, Error> {
        self.inner
            .store
            .crypto_kv(persona.as_str(), DEVICE_ID)
            .await?
            .ok_or_else(|| Error::NotReady(persona.to_string()))
    }

    /// Something arrived for the personas' devices: take it soon.
    pub fn wake(&self) {
        self.inner.wake.notify_one();
    }

    /// Hands `persona` its crypto inbox; the events waiting for keys that came are queued
    /// again.
    pub async fn settle(&self, persona: &UserId) -> Result<(), Error> {
        let slot = self.slot(persona)?;
        let device = self.device(persona).await?;
        let i = &self.inner;
        let held = Box::pin(slot.hold(&i.store, i.sharing.as_ref())).await?;
        let dev = Device { matrix: &i.matrix, user: persona, device: &device };
        let settled = Box::pin(inbox::settle(&held, dev, &i.store, &i.counters)).await;
        held.release().await;
        self.settled(dev, settled?).await
    }

    /// After the persona's crypto is let go: the events waiting for the keys that came are
    /// queued again, and the verification requests that came are cancelled.
    async fn settled(&self, dev: Device<'_>, (keys, asks): Settled) -> Result<(), Error> {
        Box::pin(verify::send(dev, &asks)).await;
        if keys.is_empty() {
            return Ok(());
        }
        let rooms = self.inner.store.keys_arrived(&keys).await?;
        if let (Some(queue), false) = (&self.inner.queue, rooms.is_empty()) {
            queue.push(rooms);
        }
        Ok(())
    }

    /// Decrypts `event` of `room` with the first of `personas` (those joined there) that
    /// can; their crypto inboxes are taken first, so a key that came with the event counts.
    pub async fn decrypt(&self, room: &RoomId, personas: &[OwnedUserId], event: &Value) -> Result<Decryption, Error> {
        let i = &self.inner;
        // No persona of the room with a device yet (set up at start): try again later.
        let mut outcome = Err(Error::NotReady(format!("every persona of {room}")));
        for persona in personas {
            let (Ok(slot), Ok(device)) = (self.slot(persona), self.device(persona).await) else { continue };
            let held = Box::pin(slot.hold(&i.store, i.sharing.as_ref())).await?;
            let dev = Device { matrix: &i.matrix, user: persona, device: &device };
            let settled = Box::pin(inbox::settle(&held, dev, &i.store, &i.counters)).await;
            let decrypted = Box::pin(inbound::decrypt(&held, room.as_str(), event)).await;
            held.release().await;
            self.settled(dev, settled?).await?;
            match decrypted? {
                Decryption::Clear(clear) => return inbound::unless_replayed(&i.store, &i.counters, event, clear).await,
                // A key another persona of the room may have.
                other @ Decryption::MissingKey { .. } => outcome = Ok(other),
                other if !matches!(outcome, Ok(Decryption::MissingKey { .. })) => outcome = Ok(other),
                _ => {}
            }
        }
        outcome
    }

    /// How long an encrypted event waits for its key, from now (ms since the epoch).
    pub fn wait_until(&self) -> i64 {
        now_ms() + crate::clock::ms(self.inner.wait_for_key)
    }

    /// What is known of `room`'s encryption; asked of the homeserver (as `persona`) once
    /// when nothing is.
    pub async fn room_encryption(&self, room: &RoomId, persona: &UserId) -> Result<RoomEncryption, Error> {
        let i = &self.inner;
        let known = i.store.room_encryption(room).await?;
        if known.algorithm.is_some() {
            return Ok(known);
        }
        let state = i.matrix.state_event(room, persona, "m.room.encryption", "").await?;
        let algorithm = state.as_ref().and_then(|s| s["algorithm"].as_str()).unwrap_or_default().to_owned();
        let rotation = state.as_ref().map(Rotation::of).unwrap_or_default();
        i.store.set_room_encryption(room, &algorithm, rotation).await?;
        if known.history_visibility.is_none()
            && let Some(v) = i.matrix.state_event(room, persona, "m.room.history_visibility", "").await?
            && let Some(v) = v["history_visibility"].as_str()
        {
            i.store.set_history_visibility(room, v).await?;
        }
        Ok(i.store.room_encryption(room).await?)
    }

    /// `content` (an event of `event_type`) encrypted by `persona` for `room`'s readers.
    pub async fn encrypt(
        &self,
        persona: &UserId,
        room: &RoomId,
        event_type: &str,
        content: &Value,
    ) -> Result<Value, Error> {
        let i = &self.inner;
        let encryption = self.room_encryption(room, persona).await?;
        let readers = i.store.readers(room, outbound::invited_read(&encryption)).await?;
        let slot = self.slot(persona)?;
        let device = self.device(persona).await?;
        let held = Box::pin(slot.hold(&i.store, i.sharing.as_ref())).await?;
        let dev = Device { matrix: &i.matrix, user: persona, device: &device };
        let (settled, sealed) = match Box::pin(inbox::settle(&held, dev, &i.store, &i.counters)).await {
            Ok(settled) => {
                let encrypting =
                    outbound::encrypt(&held, dev, room.as_str(), &encryption, &readers, event_type, content);
                let sealed = Box::pin(encrypting).await;
                (settled, sealed)
            }
            Err(e) => (Settled::default(), Err(e)),
        };
        held.release().await;
        self.settled(dev, settled).await?;
        i.counters.encrypted.fetch_add(u64::from(sealed.is_ok()), Ordering::Relaxed);
        sealed
    }

    /// The clear content of `persona`'s own encrypted `event` in `room` (to find a write
    /// by its marker), if it decrypts.
    pub async fn unseal(&self, persona: &UserId, room: &RoomId, event: &Value) -> Result<Option<Value>, Error> {
        match Box::pin(self.decrypt(room, std::slice::from_ref(&persona.to_owned()), event)).await? {
            Decryption::Clear(clear) => Ok(clear.get("content").cloned()),
            _ => Ok(None),
        }
    }

    /// Runs the background part (`pump`) until the task is dropped.
    pub async fn run(self) {
        pump::run(self).await;
    }
}

/// A short digest of `bytes` (hex SHA-256): names a value without holding it.
pub fn digest(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

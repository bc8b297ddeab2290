//! A persona's Olm machine, held by one task at a time.
//!
//! The machine keeps parts of its state in memory (the account, sessions in use), so two
//! of them must never advance the same persona's state at once: within a process a
//! mutex keeps them apart; among instances on one PostgreSQL, the persona's crypto lease
//! (`store::crypto`, `flow.rs`) does, and its generation tells a holder that another instance
//! advanced the state since it last held it, so its machine is rebuilt from the database
//! before use. While held among instances the lease is renewed every third of its term,
//! and [`Held::fence`] checks that it still is before anything goes out.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use matrix_sdk_common::ruma::{OwnedDeviceId, OwnedUserId as CryptoUserId};
use matrix_sdk_crypto::OlmMachine;
use ruma::{OwnedUserId, UserId};
use tokio::sync::{Mutex, MutexGuard};

use super::Error;
use super::state::DbState;
use crate::clock::now_ms;
use crate::store::Store;

/// The crypto-state key-value row holding the persona's device id.
pub const DEVICE_ID: &str = "richbot.device_id";

/// This instance among others on one database: how its leases are named, and for how long
/// they are taken.
#[derive(Debug, Clone)]
pub struct Sharing {
    pub holder: Arc<str>,
    /// The PostgreSQL backend the leases name (0: none); it may change.
    pub session: Arc<AtomicI64>,
    pub lease: Duration,
}

impl Sharing {
    fn session(&self) -> Option<i64> {
        Some(self.session.load(Ordering::Relaxed)).filter(|s| *s != 0)
    }

    fn lease_ms(&self) -> i64 {
        crate::clock::ms(self.lease)
    }
}

/// One persona's machine slot.
#[derive(Debug)]
pub struct Slot {
    user: OwnedUserId,
    inner: Mutex<Loaded>,
}

#[derive(Debug, Default)]
struct Loaded {
    machine: Option<OlmMachine>,
    /// The lease generation the machine was loaded under (among instances).
    generation: Option<i64>,
}

/// A persona's machine in hand: the slot's lock, and among instances its lease.
pub struct Held<'a> {
    guard: MutexGuard<'a, Loaded>,
    pub machine: OlmMachine,
    lease: Option<(Sharing, String, tokio::task::JoinHandle<()>)>,
    store: Store,
    /// Set when a save failed: the machine may hold in memory what was not saved, so it
    /// is dropped when given back, and the next hold builds it from the database.
    spoiled: AtomicBool,
}

impl Slot {
    pub fn new(user: OwnedUserId) -> Self {
        Self { user, inner: Mutex::default() }
    }

    pub fn user(&self) -> &UserId {
        &self.user
    }

    /// Takes the machine (building it from the database when this instance has none, or
    /// another instance held it since). `Error::NotReady` while the persona has no device.
    pub async fn hold(&self, store: &Store, sharing: Option<&Sharing>) -> Result<Held<'_>, Error> {
        let mut guard = self.inner.lock().await;
        let persona = self.user.as_str();
        let lease = match sharing {
            Some(s) => {
                let generation = claim(store, persona, s).await?;
                if guard.generation != Some(generation) {
                    guard.machine = None;
                    guard.generation = Some(generation);
                }
                let renew = tokio::spawn(keep(store.clone(), persona.to_owned(), s.clone()));
                Some((s.clone(), persona.to_owned(), renew))
            }
            None => None,
        };
        let machine = match &guard.machine {
            Some(m) => m.clone(),
            None => {
                let fence = sharing
                    .zip(guard.generation)
                    .map(|(s, generation)| crate::store::Fence { holder: s.holder.to_string(), generation });
                let built = build(store, &self.user, fence).await;
                let m = match built {
                    Ok(m) => m,
                    Err(e) => {
                        release(store, lease).await;
                        return Err(e);
                    }
                };
                guard.machine = Some(m.clone());
                m
            }
        };
        Ok(Held { guard, machine, lease, store: store.clone(), spoiled: AtomicBool::new(false) })
    }

    /// Drops the machine in memory (the next hold builds it from the database).
    pub async fn forget(&self) {
        *self.inner.lock().await = Loaded::default();
    }
}

impl Held<'_> {
    /// Among instances: fails unless this instance still holds the lease (checked before
    /// anything made with the machine goes out).
    pub async fn fence(&self) -> Result<(), Error> {
        let Some((s, persona, _)) = &self.lease else { return Ok(()) };
        match self.store.claim_crypto(persona, &s.holder, s.session(), now_ms(), s.lease_ms()).await? {
            Some(generation) if self.guard.generation == Some(generation) => Ok(()),
            _ => Err(Error::Fenced(persona.clone())),
        }
    }

    /// Marks the machine as not to be used again (see the `spoiled` field).
    pub fn spoil(&self) {
        self.spoiled.store(true, Ordering::Relaxed);
    }

    /// Gives the machine back (and the lease, among instances).
    pub async fn release(mut self) {
        self.drop_if_spoiled();
        let lease = self.lease.take();
        release(&self.store, lease).await;
    }
}

impl Held<'_> {
    fn drop_if_spoiled(&mut self) {
        if self.spoiled.load(Ordering::Relaxed) {
            self.guard.machine = None;
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.drop_if_spoiled();
        // Dropped without `release` (a failure or a cancelled task): the lease is given
        // back in the background, or runs out.
        if let Some((s, persona, renew)) = self.lease.take() {
            renew.abort();
            let store = self.store.clone();
            tokio::spawn(async move {
                let _ = store.release_crypto(&persona, &s.holder).await;
            });
        }
    }
}

async fn release(store: &Store, lease: Option<(Sharing, String, tokio::task::JoinHandle<()>)>) {
    if let Some((s, persona, renew)) = lease {
        renew.abort();
        if let Err(e) = store.release_crypto(&persona, &s.holder).await {
            tracing::warn!(%persona, error = %e, "could not give the crypto lease back; it runs out");
        }
    }
}

/// Claims `persona`'s crypto lease, waiting (polling) while another instance holds it.
async fn claim(store: &Store, persona: &str, s: &Sharing) -> Result<i64, Error> {
    let give_up = now_ms() + 2 * s.lease_ms();
    loop {
        if let Some(generation) = store.claim_crypto(persona, &s.holder, s.session(), now_ms(), s.lease_ms()).await? {
            return Ok(generation);
        }
        if now_ms() > give_up {
            return Err(Error::Busy(persona.to_owned()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Renews the lease every third of its term while it is held.
async fn keep(store: Store, persona: String, s: Sharing) {
    loop {
        tokio::time::sleep(s.lease / 3).await;
        if let Err(e) = store.claim_crypto(&persona, &s.holder, s.session(), now_ms(), s.lease_ms()).await {
            tracing::warn!(%persona, error = %e, "could not renew the crypto lease");
        }
    }
}

/// The persona's machine from its stored state; among instances, every save it makes is
/// checked against `fence` (the lease it was loaded under).
async fn build(store: &Store, user: &UserId, fence: Option<crate::store::Fence>) -> Result<OlmMachine, Error> {
    let device = store.crypto_kv(user.as_str(), DEVICE_ID).await?.ok_or_else(|| Error::NotReady(user.to_string()))?;
    let (crypto_user, device) = ids(user, &device)?;
    let state = DbState::new(store.clone(), user.as_str()).fenced(fence);
    Box::pin(OlmMachine::with_store(&crypto_user, &device, state, None)).await.map_err(|e| Error::Olm(e.to_string()))
}

/// A persona's id and a device id as the crypto library's types.
pub fn ids(user: &UserId, device: &str) -> Result<(CryptoUserId, OwnedDeviceId), Error> {
    let crypto_user = CryptoUserId::try_from(user.as_str()).map_err(|e| Error::Olm(e.to_string()))?;
    Ok((crypto_user, OwnedDeviceId::from(device)))
}

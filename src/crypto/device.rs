//! A persona's device: made once, kept for good.
//!
//! At first start the persona gets a device id (`RB` and ten letters, kept in its crypto
//! state), the device is created on the homeserver as the appservice (MSC4190: no login),
//! its identity and one-time keys are uploaded, and its cross-signing identity (master,
//! self-signing and user-signing keys) is made and uploaded with the device signed by its
//! owner, so clients that share keys only with devices their owner signed (MSC4153) talk
//! to it. Each step is recorded when done; a start after a crash does only what did not
//! finish, and a restart never makes a new device.
//!
//! A device the homeserver no longer has (an admin deleted it) cannot be brought back
//! with its old keys: the persona's crypto is reset, and it starts over with a new device
//! and identity (members see that its identity changed).

use std::time::Duration;

use rand::distr::Uniform;
use ruma::UserId;

use super::machine::{DEVICE_ID, Sharing, Slot};
use super::requests::{self, Device};
use super::state::key;
use super::{Crypto, Error, probe};

/// How long after a probe that did not find encryption working the next one is sent;
/// doubling up to `PROBE_AGAIN_MAX`.
const PROBE_AGAIN: Duration = Duration::from_secs(30);
const PROBE_AGAIN_MAX: Duration = Duration::from_secs(15 * 60);
use crate::matrix;
use crate::store::{CryptoWrite, Store};

/// The crypto-state row that says the cross-signing identity is uploaded.
pub const CROSS_SIGNED: &str = "richbot.cross_signed";
/// What clients show as the device's name.
const DISPLAY_NAME: &str = "richbot";

/// A new device id: `RB` and ten capital letters.
fn new_device_id() -> String {
    let letters = Uniform::new_inclusive(b'A', b'Z').expect("a valid range");
    let tail: String =
        rand::distr::Distribution::sample_iter(letters, &mut rand::rng()).take(10).map(char::from).collect();
    format!("RB{tail}")
}

async fn set(store: &Store, user: &UserId, k: &str, value: &str) -> Result<(), Error> {
    let w = CryptoWrite { kv: vec![(k.to_owned(), Some(value.to_owned()))], ..CryptoWrite::default() };
    Ok(store.crypto_write(user.as_str(), &w).await?)
}

/// Sets up `slot`'s persona's device (see the module docs). Returns its device id.
pub async fn prepare(
    slot: &Slot,
    store: &Store,
    matrix: &matrix::Client,
    sharing: Option<&Sharing>,
) -> Result<String, Error> {
    let user = slot.user();
    let persona = user.as_str();
    let device = match store.crypto_kv(persona, DEVICE_ID).await? {
        Some(d) => d,
        None => {
            let d = new_device_id();
            set(store, user, DEVICE_ID, &d).await?;
            tracing::info!(%user, device = d, "new device for the persona");
            d
        }
    };
    if !matrix.device_exists(user, &device).await? {
        if store.crypto_kv(persona, key::ACCOUNT).await?.is_some()
            && store.crypto_kv(persona, CROSS_SIGNED).await?.is_some()
        {
            tracing::warn!(
                %user, device,
                "the homeserver no longer has the persona's device (deleted by an admin?); its crypto starts over \
                 with a new device and identity"
            );
            store.crypto_forget(persona).await?;
            slot.forget().await;
            return Box::pin(prepare(slot, store, matrix, sharing)).await;
        }
        matrix.create_device(user, &device, DISPLAY_NAME).await?;
    }
    let held = Box::pin(slot.hold(store, sharing)).await?;
    let dev = Device { matrix, user, device: &device };
    held.fence().await?;
    Box::pin(requests::flush(dev, &held.machine)).await?;
    if store.crypto_kv(persona, CROSS_SIGNED).await?.is_none() {
        let bootstrap =
            Box::pin(held.machine.bootstrap_cross_signing(false)).await.map_err(|e| Error::Olm(e.to_string()))?;
        held.fence().await?;
        Box::pin(requests::cross_signing(dev, &held.machine, bootstrap)).await?;
        set(store, user, CROSS_SIGNED, "true").await?;
        tracing::info!(%user, device, "the persona's device is cross-signed");
    }
    held.release().await;
    Ok(device)
}

impl Crypto {
    /// Sets up every persona's device (see `device`); the first failure stops it (the
    /// caller tries again later: what finished stays done).
    pub async fn prepare_all(&self) -> Result<(), Error> {
        let i = &self.inner;
        for slot in &i.slots {
            Box::pin(prepare(slot, &i.store, &i.matrix, i.sharing.as_ref())).await?;
        }
        Ok(())
    }

    /// Whether encrypted rooms are read and written: unless the last probe found that
    /// the homeserver does not deliver to-device messages and key counts.
    pub fn active(&self) -> bool {
        self.inner.support.active()
    }

    /// Whether a probe found encryption working (this run, or the last one): only then
    /// are new rooms (direct chats) made encrypted.
    pub fn known_to_work(&self) -> bool {
        self.inner.support.works()
    }

    /// What a probe found (`crypto::probe`), remembered for the next start.
    pub async fn set_supported(&self, supported: bool) -> Result<(), Error> {
        self.inner.support.set(supported);
        Ok(probe::remember(&self.inner.store, supported).await?)
    }

    /// Takes what the last run's probe found, until this run's probe answers.
    pub async fn recall(&self) -> Result<(), Error> {
        if let Some(works) = probe::recall(&self.inner.store).await? {
            self.inner.support.set(works);
        }
        Ok(())
    }

    /// Sets up the personas' devices (trying again, with back-off, until it works), then
    /// asks the homeserver (a probe, waiting up to `probe_wait`) whether it sends what
    /// encryption needs, again and again (backing off) until it does. While it does not,
    /// the fix is logged once and encrypted rooms are neither read (a persona in one says
    /// it cannot) nor written.
    pub async fn start(&self, probe_wait: Duration) {
        if let Err(e) = self.recall().await {
            tracing::warn!(error = %e, "could not read what the last probe found");
        }
        let mut wait = Duration::from_secs(1);
        while let Err(e) = self.prepare_all().await {
            tracing::warn!(error = %e, "could not set up the personas' devices yet; retrying");
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(60));
        }
        let Some(first) = self.inner.slots.first() else { return };
        let (mut told, mut again) = (false, PROBE_AGAIN);
        loop {
            match probe::probe(&self.inner.store, &self.inner.matrix, first.user(), probe_wait).await {
                Ok(found) => {
                    if let Err(e) = self.set_supported(found.ok()).await {
                        tracing::warn!(error = %e, "could not remember what the probe found");
                    }
                    match found.fix() {
                        None => {
                            tracing::info!(personas = self.inner.slots.len(), "end-to-end encryption ready");
                            return;
                        }
                        Some(fix) if !told => {
                            told = true;
                            tracing::error!(
                                fix,
                                "the homeserver does not send what end-to-end encryption needs: encrypted rooms are \
                                 neither read nor written until it does (richbot keeps asking)"
                            );
                        }
                        Some(_) => tracing::debug!("the homeserver still lacks what encryption needs"),
                    }
                }
                Err(e) => tracing::warn!(error = %e, "could not ask the homeserver whether it supports encryption"),
            }
            tokio::time::sleep(again).await;
            again = (again * 2).min(PROBE_AGAIN_MAX);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn device_ids_are_rb_and_ten_capitals() {
        let a = super::new_device_id();
        assert_eq!(a.len(), 12);
        assert!(a.starts_with("RB") && a[2..].bytes().all(|b| b.is_ascii_uppercase()));
        assert_ne!(a, super::new_device_id());
    }
}

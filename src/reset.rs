//! `richbot reset-crypto --persona NAME`: starts a persona's end-to-end encryption over,
//! for a persona whose crypto state is lost (a database restored from before its device
//! was made) or broken. Run with `serve` stopped: the database is taken for this alone
//! (as `migrate` takes it), so no instance advances the state being forgotten.
//!
//! The persona's device is deleted on the homeserver first (MSC4190 lets the appservice do
//! that), so members' clients stop sharing room keys with it; then its crypto state is
//! forgotten. The next `serve` makes a new device and a new cross-signing identity
//! (replacing the old one: the homeserver lets an appservice do that without a password).
//! Members' clients show that the persona's identity changed; what was sent to the old
//! device can no longer be read by the persona.

use crate::assemble::Parts;
use crate::config::Settings;
use crate::crypto::DEVICE_ID;
use crate::private_files;
use crate::{matrix, store};

/// Why a reset did not happen (nothing was changed).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0} is not a configured persona's localpart")]
    Unknown(String),
    #[error("{0}; stop richbot serve first")]
    Locked(#[from] private_files::LockError),
    #[error("database: {0}")]
    Store(#[from] store::Error),
    #[error("{0}")]
    Parts(#[from] crate::assemble::Error),
    #[error("could not delete the device on the homeserver ({0}); nothing was reset")]
    Matrix(#[from] matrix::Error),
}

/// Resets `localpart`'s crypto; returns what was done, for the admin.
pub async fn run(settings: &Settings, localpart: &str) -> Result<String, Error> {
    let _file = store::lock_file(&settings.config.database.url)?;
    let parts = Parts::build(settings).await?;
    let _held = parts.store.exclusive().await?;
    let persona = parts
        .personas
        .all()
        .iter()
        .find(|p| p.user_id.localpart() == localpart)
        .ok_or_else(|| Error::Unknown(localpart.to_owned()))?
        .user_id
        .clone();
    let device = parts.store.crypto_kv(persona.as_str(), DEVICE_ID).await?;
    if let Some(device) = &device {
        parts.matrix.delete_device(&persona, device).await?;
    }
    parts.store.crypto_forget(persona.as_str()).await?;
    parts.store.close().await;
    Ok(match device {
        Some(device) => format!(
            "{persona}: device {device} deleted and its crypto state forgotten; the next richbot serve makes a new \
             device and cross-signing identity (members' clients will show that its identity changed)"
        ),
        None => format!("{persona} had no device; nothing to reset"),
    })
}

//! `check`'s encryption line: the registration has what encryption needs, every persona
//! has a cross-signed device, and the homeserver sends to-device messages and key counts
//! (a probe the first persona's device sends itself, `crypto::probe`). Each failure says
//! exactly which lines to add, and where.
//!
//! A persona without a device yet (`serve` has not run) gets one here, as `serve` would
//! make it, when that is safe: on SQLite only when no `serve` holds the database (its
//! lock is taken for the check), on PostgreSQL under the persona's crypto lease. With a
//! `serve` running on SQLite, its devices are its own to make, and the line says so.

use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::Duration;

use crate::assemble::Parts;
use crate::config::Settings;
use crate::crypto::{self, CROSS_SIGNED, Crypto, DEVICE_ID};
use crate::store::{self, Backend};

/// How long the check waits for its probe to come back.
const PROBE_WAIT: Duration = Duration::from_secs(20);
/// How long setting up the devices may take here.
const SET_UP: Duration = Duration::from_secs(60);

/// The crypto `check` works with, and whether it may set devices up.
pub struct CheckCrypto {
    pub crypto: Option<Crypto>,
    may_set_up: bool,
    /// SQLite: the database's lock, held for the check (no `serve` starts meanwhile).
    _lock: Option<crate::private_files::Lock>,
}

/// The crypto for the check (none when encryption is off or the registration lacks what
/// it needs: those are the line's answer already).
pub fn crypto(settings: &Settings, parts: &Parts) -> CheckCrypto {
    let none = CheckCrypto { crypto: None, may_set_up: false, _lock: None };
    if !settings.config.encryption.enabled || !settings.crypto_missing.is_empty() {
        return none;
    }
    let ids: Vec<_> = parts.personas.all().iter().map(|p| p.user_id.clone()).collect();
    let wait = Duration::from_secs(settings.config.encryption.wait_for_key_secs);
    let (store, matrix) = (parts.store.clone(), parts.matrix.clone());
    match parts.store.backend() {
        Backend::Postgres => {
            let holder = format!("check/{}", std::process::id()).into();
            let sharing = crypto::Sharing { holder, session: Arc::new(AtomicI64::new(0)), lease: SET_UP };
            let crypto = Some(Crypto::new(store, matrix, &ids, wait, Some(sharing), None));
            CheckCrypto { crypto, may_set_up: true, _lock: None }
        }
        Backend::Sqlite => {
            let lock = store::lock_file(&settings.config.database.url).ok().flatten();
            let crypto = Some(Crypto::new(store, matrix, &ids, wait, None, None));
            CheckCrypto { crypto, may_set_up: lock.is_some(), _lock: lock }
        }
    }
}

/// The encryption line's result; `reached`: whether the appservice ping got through (the
/// probe needs the same way in).
pub async fn line(settings: &Settings, parts: &Parts, checked: &CheckCrypto, reached: bool) -> Result<String, String> {
    if !settings.config.encryption.enabled {
        return Ok("off ([encryption] enabled = false): encrypted rooms are not read".to_owned());
    }
    if !settings.crypto_missing.is_empty() {
        return Err(format!(
            "the registration lacks what end-to-end encryption needs: add to {} (and give the homeserver the \
             new copy, then restart it):\n  {}",
            settings.config.appservice.registration.display(),
            settings.crypto_missing.join("\n  ")
        ));
    }
    parts.store.check_pickle_key().await.map_err(|e| e.to_string())?;
    let Some(crypto) = &checked.crypto else { return Err("encryption could not be set up here".to_owned()) };
    if !reached {
        return Err("not checked: the homeserver cannot reach richbot (see the appservice ping)".to_owned());
    }
    let personas = parts.personas.all();
    if set_up(parts).await? < personas.len() {
        if !checked.may_set_up {
            return Err(format!(
                "{} of {} persona devices set up; the running richbot serve sets them up at its start (see its \
                 log), then run check again",
                set_up(parts).await?,
                personas.len()
            ));
        }
        match tokio::time::timeout(SET_UP, crypto.prepare_all()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(format!("could not set up the personas' devices: {e}")),
            Err(_) => return Err(format!("setting up the personas' devices took over {} s", SET_UP.as_secs())),
        }
    }
    let Some(first) = personas.first() else { return Ok("no personas".to_owned()) };
    let found = crypto::probe(&parts.store, &parts.matrix, &first.user_id, PROBE_WAIT)
        .await
        .map_err(|e| format!("could not probe the homeserver: {e}"))?;
    match found.fix() {
        None => Ok(format!(
            "{} persona device{}, cross-signed; the homeserver sends to-device messages and key counts; {}",
            personas.len(),
            if personas.len() == 1 { "" } else { "s" },
            sealing(settings, parts).await?
        )),
        Some(fix) => Err(format!("the homeserver does not send what end-to-end encryption needs: {fix}")),
    }
}

/// How the crypto secrets are kept in the database.
async fn sealing(settings: &Settings, parts: &Parts) -> Result<String, String> {
    let clear = parts.store.clear_crypto_values().await.map_err(|e| e.to_string())?;
    Ok(match (&settings.pickle_key, clear) {
        (None, _) => "the crypto secrets are stored unsealed (encryption.pickle_key_file is not set)".to_owned(),
        (Some(_), 0) => "the crypto secrets are sealed with the pickle key".to_owned(),
        (Some(_), n) => format!("{n} crypto values are sealed with the pickle key at serve's next start"),
    })
}

/// How many personas have a cross-signed device.
async fn set_up(parts: &Parts) -> Result<usize, String> {
    let mut n = 0;
    for p in parts.personas.all() {
        let id = p.user_id.as_str();
        let device = parts.store.crypto_kv(id, DEVICE_ID).await.map_err(|e| e.to_string())?;
        let signed = parts.store.crypto_kv(id, CROSS_SIGNED).await.map_err(|e| e.to_string())?;
        n += usize::from(device.is_some() && signed.is_some());
    }
    Ok(n)
}

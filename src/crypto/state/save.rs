//! Turning what the crypto library saves (its `Changes`, the account) into one
//! [`CryptoWrite`]: each object pickled as JSON, with the columns it is found by.
//!
//! The rarer kinds live in the persona's key-value rows under a kind prefix (see
//! [`key`]); a prefix scan finds a room's (`withheld`, for instance).

use matrix_sdk_crypto::Account;
use matrix_sdk_crypto::store::types::{Changes, PendingChanges};
use serde::Serialize;

use super::Error;
use crate::store::{CryptoWrite, GroupSessionRow, OlmSessionRow};

/// The key-value row names and prefixes, and how a key is made of its parts.
///
/// The variable parts of a key (room ids, session ids, user ids, names the library picks)
/// come from other people: a to-device message from a stranger names any room and any
/// session. They never go into a key raw: [`part`] keeps a part that is printable and
/// free of `%` and [`SEP`] as it is (every real Matrix id and session id), and
/// percent-encodes anything else, so a NUL (which PostgreSQL refuses in text) or a
/// separator can neither fail a save nor make two keys one.
pub mod key {
    use std::borrow::Cow;
    use std::fmt::Write;

    pub const ACCOUNT: &str = "account";
    pub const IDENTITY: &str = "identity";
    pub const NEXT_BATCH: &str = "next_batch_token";
    pub const BACKUP_VERSION: &str = "backup_version";
    pub const BACKUP_KEY: &str = "backup_decryption_key";
    pub const DEHYDRATED_KEY: &str = "dehydrated_pickle_key";
    pub const CUSTOM: &str = "custom:";
    pub const WITHHELD: &str = "withheld:";
    pub const ROOM_SETTINGS: &str = "room_settings:";
    pub const SECRET: &str = "secret:";
    pub const KEY_REQUEST: &str = "key_request:";
    pub const BUNDLE: &str = "bundle:";
    pub const DOWNLOADED: &str = "downloaded:";
    pub const PENDING_BUNDLE: &str = "pending_bundle:";
    /// Separates the parts of a key (never inside an encoded part).
    pub const SEP: char = '\u{1f}';

    /// One variable part of a key or of an id column, safe to store (see the module doc).
    pub fn part(s: &str) -> Cow<'_, str> {
        let unsafe_char = |c: char| c == '%' || c == SEP || c.is_control();
        if !s.contains(unsafe_char) {
            return Cow::Borrowed(s);
        }
        let mut out = String::with_capacity(s.len() + 8);
        for c in s.chars() {
            if unsafe_char(c) {
                let mut buf = [0; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    let _ = write!(out, "%{b:02X}");
                }
            } else {
                out.push(c);
            }
        }
        Cow::Owned(out)
    }

    /// The key of `kind` (a prefix above) for `parts`, each encoded, separated by [`SEP`].
    pub fn of(kind: &str, parts: &[&str]) -> String {
        let mut out = kind.to_owned();
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                out.push(SEP);
            }
            out.push_str(&part(p));
        }
        out
    }

    /// The prefix every key of `kind` that starts with `parts` has (for a prefix scan).
    pub fn under(kind: &str, parts: &[&str]) -> String {
        let mut out = of(kind, parts);
        out.push(SEP);
        out
    }
}

/// An id as its column holds it ([`key::part`]).
pub(super) fn ids(id: &str) -> String {
    key::part(id).into_owned()
}

pub(super) fn json<T: Serialize + ?Sized>(value: &T) -> Result<String, Error> {
    Ok(serde_json::to_string(value)?)
}

/// The account, pickled.
pub(super) fn pending(changes: PendingChanges) -> Result<CryptoWrite, Error> {
    let mut w = CryptoWrite::default();
    if let Some(account) = changes.account {
        w.kv.push((key::ACCOUNT.to_owned(), Some(account_json(&account)?)));
    }
    Ok(w)
}

pub(super) fn account_json(account: &Account) -> Result<String, Error> {
    json(&account.pickle())
}

/// Everything of `changes`, pickled.
pub(super) async fn changes(changes: Changes) -> Result<CryptoWrite, Error> {
    let mut w = CryptoWrite::default();
    if let Some(identity) = &changes.private_identity {
        w.kv.push((key::IDENTITY.to_owned(), Some(json(&identity.pickle().await)?)));
    }
    let single = [
        (key::NEXT_BATCH, changes.next_batch_token.as_ref().map(json).transpose()?),
        (key::BACKUP_VERSION, changes.backup_version.as_ref().map(json).transpose()?),
        (key::BACKUP_KEY, changes.backup_decryption_key.as_ref().map(json).transpose()?),
        (key::DEHYDRATED_KEY, changes.dehydrated_device_pickle_key.as_ref().map(json).transpose()?),
    ];
    for (k, v) in single {
        if let Some(v) = v {
            w.kv.push((k.to_owned(), Some(v)));
        }
    }
    for session in &changes.sessions {
        w.olm_sessions.push(OlmSessionRow {
            session_id: session.session_id().to_owned(),
            sender_key: session.sender_key().to_base64(),
            value: json(&session.pickle().await)?,
        });
    }
    for session in &changes.inbound_group_sessions {
        let pickle = session.pickle().await;
        w.group_sessions.push(GroupSessionRow {
            session_id: key::part(session.session_id()).into_owned(),
            room_id: key::part(session.room_id().as_str()).into_owned(),
            sender_key: session.sender_key().to_base64(),
            sender_data_type: pickle.sender_data.to_type() as i64,
            backed_up: pickle.backed_up,
            value: json(&pickle)?,
        });
    }
    for session in &changes.outbound_group_sessions {
        w.outbound.push((key::part(session.room_id().as_str()).into_owned(), json(&session.pickle().await)?));
    }
    for device in changes.devices.new.iter().chain(&changes.devices.changed) {
        w.devices.push((ids(device.user_id().as_str()), ids(device.device_id().as_str()), Some(json(device)?)));
    }
    for device in &changes.devices.deleted {
        w.devices.push((ids(device.user_id().as_str()), ids(device.device_id().as_str()), None));
    }
    for identity in changes.identities.new.iter().chain(&changes.identities.changed) {
        w.identities.push((ids(identity.user_id().as_str()), json(identity)?));
    }
    for hash in &changes.message_hashes {
        w.hashes.push(json(hash)?);
    }
    for request in &changes.key_requests {
        w.kv.push((key::of(key::KEY_REQUEST, &[request.request_id.as_str()]), Some(json(request)?)));
    }
    for (room, sessions) in &changes.withheld_session_info {
        for (session, entry) in sessions {
            w.kv.push((key::of(key::WITHHELD, &[room.as_str(), session]), Some(json(entry)?)));
        }
    }
    for (room, settings) in &changes.room_settings {
        w.kv.push((key::of(key::ROOM_SETTINGS, &[room.as_str()]), Some(json(settings)?)));
    }
    for secret in &changes.secrets {
        // One row per distinct secret of a name (the inbox keeps each once).
        let digest = crate::crypto::digest(secret.secret.as_bytes());
        let k = key::of(key::SECRET, &[secret.secret_name.as_str(), &digest]);
        w.kv.push((k, Some(json(secret.secret.as_str())?)));
    }
    for bundle in &changes.received_room_key_bundles {
        let k = key::of(key::BUNDLE, &[bundle.bundle_data.room_id.as_str(), bundle.sender_user.as_str()]);
        w.kv.push((k, Some(json(bundle)?)));
    }
    for room in &changes.room_key_backups_fully_downloaded {
        w.kv.push((key::of(key::DOWNLOADED, &[room.as_str()]), Some("true".to_owned())));
    }
    for (room, details) in &changes.rooms_pending_key_bundle {
        let value = details.as_ref().map(json).transpose()?;
        w.kv.push((key::of(key::PENDING_BUNDLE, &[room.as_str()]), value));
    }
    Ok(w)
}

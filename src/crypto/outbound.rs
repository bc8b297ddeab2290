//! Outbound: a write to an encrypted room, encrypted for everyone who may read it.
//!
//! Before each write the persona's machine follows the room's readers (its joined
//! members, and the invited ones unless the history is visible to joined members only),
//! queries the devices of those it knows too little of (a device list change from the
//! transactions makes a user's list out of date), opens Olm sessions with devices it has
//! none with (claiming one-time keys), and shares the room key with every device that
//! does not have it yet, rotating it as the room's `m.room.encryption` says (after so
//! many messages or so long, and whenever a device or member left). Then the content is
//! encrypted; the machine has stored the advanced session before the ciphertext is
//! returned, and the outbox keeps the ciphertext before its first attempt.

use std::time::Duration;

use matrix_sdk_common::ruma::events::AnyMessageLikeEventContent;
use matrix_sdk_common::ruma::events::room::history_visibility::HistoryVisibility;
use matrix_sdk_common::ruma::serde::Raw;
use matrix_sdk_common::ruma::{OwnedRoomId as CryptoRoomId, OwnedUserId as CryptoUserId};
use matrix_sdk_crypto::types::EventEncryptionAlgorithm;
use matrix_sdk_crypto::{CollectStrategy, EncryptionSettings};
use ruma::OwnedUserId;
use serde_json::Value;

use super::Error;
use super::machine::Held;
use super::requests::{self, Device};
use crate::store::RoomEncryption;

/// The settings the room's state gives its key (the library's defaults where it is
/// silent: a week, 100 messages).
pub fn settings(room: &RoomEncryption) -> EncryptionSettings {
    let defaults = EncryptionSettings::default();
    let visibility = room.history_visibility.as_deref().map_or(HistoryVisibility::Shared, HistoryVisibility::from);
    EncryptionSettings {
        algorithm: EventEncryptionAlgorithm::from(room.algorithm.as_deref().unwrap_or("m.megolm.v1.aes-sha2")),
        rotation_period: room
            .rotation_period_ms
            .and_then(|ms| u64::try_from(ms).ok())
            .map_or(defaults.rotation_period, Duration::from_millis),
        rotation_period_msgs: room
            .rotation_period_msgs
            .and_then(|n| u64::try_from(n).ok())
            .unwrap_or(defaults.rotation_period_msgs),
        history_visibility: visibility,
        sharing_strategy: CollectStrategy::AllDevices,
    }
}

/// Whether invited members may read what is sent now (history not limited to joined).
pub fn invited_read(room: &RoomEncryption) -> bool {
    room.history_visibility.as_deref() != Some("joined")
}

/// Encrypts `content` (of `event_type`) for `room`'s `readers` with `held`'s machine.
pub async fn encrypt(
    held: &Held<'_>,
    dev: Device<'_>,
    room: &str,
    encryption: &RoomEncryption,
    readers: &[OwnedUserId],
    event_type: &str,
    content: &Value,
) -> Result<Value, Error> {
    let olm = |e: String| Error::Olm(e);
    let room_id = CryptoRoomId::try_from(room).map_err(|e| olm(e.to_string()))?;
    let users: Vec<CryptoUserId> = readers.iter().filter_map(|u| CryptoUserId::try_from(u.as_str()).ok()).collect();
    let machine = &held.machine;
    Box::pin(machine.update_tracked_users(users.iter().map(AsRef::as_ref))).await.map_err(|e| olm(e.to_string()))?;
    held.fence().await?;
    Box::pin(requests::flush(dev, machine)).await?;
    if let Some((id, claim)) =
        Box::pin(machine.get_missing_sessions(users.iter().map(AsRef::as_ref))).await.map_err(|e| olm(e.to_string()))?
    {
        held.fence().await?;
        let answer = Box::pin(requests::call(dev, claim)).await?;
        Box::pin(machine.mark_request_as_sent(&id, &answer)).await.map_err(|e| olm(e.to_string()))?;
    }
    let shares = Box::pin(machine.share_room_key(&room_id, users.iter().map(AsRef::as_ref), settings(encryption)))
        .await
        .map_err(|e| olm(e.to_string()))?;
    for share in shares {
        held.fence().await?;
        let request = matrix_sdk_common::ruma::api::client::to_device::send_event_to_device::v3::Request::new_raw(
            share.event_type.clone(),
            share.txn_id.clone(),
            share.messages.clone(),
        );
        let answer = Box::pin(requests::call(dev, request)).await?;
        Box::pin(machine.mark_request_as_sent(&share.txn_id, &answer)).await.map_err(|e| olm(e.to_string()))?;
    }
    held.fence().await?;
    let raw: Raw<AnyMessageLikeEventContent> = Raw::from_json(serde_json::value::to_raw_value(content)?);
    let sealed =
        Box::pin(machine.encrypt_room_event_raw(&room_id, event_type, &raw)).await.map_err(|e| olm(e.to_string()))?;
    Ok(serde_json::from_str(sealed.content.json().get())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_room_state_sets_rotation_and_who_may_read() {
        let room = RoomEncryption {
            algorithm: Some("m.megolm.v1.aes-sha2".into()),
            rotation_period_ms: Some(3_600_000),
            rotation_period_msgs: Some(10),
            history_visibility: Some("joined".into()),
        };
        let s = settings(&room);
        assert_eq!(s.rotation_period, Duration::from_secs(3600));
        assert_eq!(s.rotation_period_msgs, 10);
        assert_eq!(s.history_visibility, HistoryVisibility::Joined);
        assert!(!invited_read(&room));
        let silent = RoomEncryption { algorithm: Some("m.megolm.v1.aes-sha2".into()), ..Default::default() };
        assert_eq!(settings(&silent).rotation_period_msgs, EncryptionSettings::default().rotation_period_msgs);
        assert!(invited_read(&silent));
    }
}

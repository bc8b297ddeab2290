//! The crypto library's `CryptoStore` for [`DbState`]: each method one lookup or one save
//! (`load.rs`, `save.rs`, `Store::crypto_*`).

use std::collections::HashMap;

use async_trait::async_trait;
use matrix_sdk_common::cross_process_lock::CrossProcessLockGeneration;
use matrix_sdk_common::cross_process_lock::memory_store_helper::try_take_leased_lock;
use matrix_sdk_common::ruma::events::secret::request::SecretName;
use matrix_sdk_common::ruma::{DeviceId, OwnedDeviceId, RoomId, TransactionId, UserId};
use matrix_sdk_crypto::olm::{
    InboundGroupSession, OlmMessageHash, OutboundGroupSession, PrivateCrossSigningIdentity, SenderDataType, Session,
};
use matrix_sdk_crypto::store::CryptoStore;
use matrix_sdk_crypto::store::types::{
    BackupKeys, Changes, DehydratedDeviceKey, PendingChanges, RoomKeyCounts, RoomKeyWithheldEntry,
    RoomPendingKeyBundleDetails, RoomSettings, StoredRoomKeyBundleData, TrackedUser,
};
use matrix_sdk_crypto::vodozemac::Curve25519PublicKey;
use matrix_sdk_crypto::{Account, DeviceData, GossipRequest, SecretInfo, UserIdentityData};
use zeroize::Zeroizing;

use super::load::{self, group, groups};
use super::save::{self, key};
use super::{DbState, Error, Result};
use crate::store::CryptoWrite;

/// Withheld notices kept per persona at most (the library reads them to tell why a key
/// will not come): a flood of them for the persona's rooms cannot grow the table.
const WITHHELD_KEPT: i64 = 500;

#[async_trait]
impl CryptoStore for DbState {
    type Error = Error;

    async fn load_account(&self) -> Result<Option<Account>> {
        self.account().await
    }

    async fn load_identity(&self) -> Result<Option<PrivateCrossSigningIdentity>> {
        self.identity().await
    }

    async fn save_changes(&self, changes: Changes) -> Result<()> {
        // Boxed: the library's futures are large, and this one is awaited deep in them.
        Box::pin(self.save_filtered(changes)).await
    }

    async fn save_pending_changes(&self, changes: PendingChanges) -> Result<()> {
        if let Some(account) = &changes.account {
            *self.static_account.write().unwrap_or_else(std::sync::PoisonError::into_inner) =
                Some(account.static_data().clone());
        }
        self.write(save::pending(changes)?).await
    }

    async fn save_inbound_group_sessions(&self, sessions: Vec<InboundGroupSession>, _: Option<&str>) -> Result<()> {
        self.write(save::changes(Changes { inbound_group_sessions: sessions, ..Changes::default() }).await?).await
    }

    async fn get_sessions(&self, sender_key: &str) -> Result<Option<Vec<Session>>> {
        self.sessions(sender_key).await
    }

    async fn get_inbound_group_session(&self, room: &RoomId, id: &str) -> Result<Option<InboundGroupSession>> {
        self.group_session(room, id).await
    }

    async fn get_withheld_info(&self, room: &RoomId, session: &str) -> Result<Option<RoomKeyWithheldEntry>> {
        self.kv(&key::of(key::WITHHELD, &[room.as_str(), session])).await
    }

    async fn get_withheld_sessions_by_room_id(&self, room: &RoomId) -> Result<Vec<RoomKeyWithheldEntry>> {
        self.kv_prefixed(&key::under(key::WITHHELD, &[room.as_str()])).await
    }

    async fn get_inbound_group_sessions(&self) -> Result<Vec<InboundGroupSession>> {
        groups(self.store.crypto_group_sessions(&self.persona, None).await?)
    }

    async fn inbound_group_session_counts(&self, _: Option<&str>) -> Result<RoomKeyCounts> {
        let (total, backed_up) = self.store.crypto_group_counts(&self.persona).await?;
        Ok(RoomKeyCounts {
            total: usize::try_from(total).unwrap_or(0),
            backed_up: usize::try_from(backed_up).unwrap_or(0),
        })
    }

    async fn get_inbound_group_sessions_by_room_id(&self, room: &RoomId) -> Result<Vec<InboundGroupSession>> {
        groups(self.store.crypto_group_sessions(&self.persona, Some(&key::part(room.as_str()))).await?)
    }

    async fn get_inbound_group_sessions_for_device_batch(
        &self,
        curve_key: Curve25519PublicKey,
        data_type: SenderDataType,
        after: Option<String>,
        limit: usize,
    ) -> Result<Vec<InboundGroupSession>> {
        let device = (curve_key.to_base64(), data_type as i64);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let after = after.as_deref().map(key::part);
        let rows = self
            .store
            .crypto_group_sessions_of_device(&self.persona, &device.0, device.1, after.as_deref(), limit)
            .await?;
        groups(rows)
    }

    async fn inbound_group_sessions_for_backup(&self, _: &str, limit: usize) -> Result<Vec<InboundGroupSession>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.store.crypto_group_unbacked(&self.persona, limit).await?;
        rows.into_iter().map(|v| group(v, false)).collect()
    }

    async fn mark_inbound_group_sessions_as_backed_up(&self, _: &str, ids: &[(&RoomId, &str)]) -> Result<()> {
        let ids: Vec<String> = ids.iter().map(|(_, s)| save::ids(s)).collect();
        Ok(self.store.crypto_set_backed_up(&self.persona, Some(&ids)).await?)
    }

    async fn reset_backup_state(&self) -> Result<()> {
        Ok(self.store.crypto_set_backed_up(&self.persona, None).await?)
    }

    async fn load_backup_keys(&self) -> Result<BackupKeys> {
        Ok(BackupKeys {
            decryption_key: self.kv(key::BACKUP_KEY).await?,
            backup_version: self.kv(key::BACKUP_VERSION).await?,
        })
    }

    async fn load_dehydrated_device_pickle_key(&self) -> Result<Option<DehydratedDeviceKey>> {
        self.kv(key::DEHYDRATED_KEY).await
    }

    async fn delete_dehydrated_device_pickle_key(&self) -> Result<()> {
        self.write(CryptoWrite { kv: vec![(key::DEHYDRATED_KEY.to_owned(), None)], ..CryptoWrite::default() }).await
    }

    async fn get_outbound_group_session(&self, room: &RoomId) -> Result<Option<OutboundGroupSession>> {
        self.outbound(room).await
    }

    async fn load_tracked_users(&self) -> Result<Vec<TrackedUser>> {
        let rows = self.store.crypto_tracked(&self.persona).await?;
        Ok(rows
            .into_iter()
            .filter_map(|(user, dirty)| Some(TrackedUser { user_id: UserId::parse(user).ok()?, dirty }))
            .collect())
    }

    async fn save_tracked_users(&self, users: &[(&UserId, bool)]) -> Result<()> {
        let tracked = users.iter().map(|(u, dirty)| (u.to_string(), *dirty)).collect();
        self.write(CryptoWrite { tracked, ..CryptoWrite::default() }).await
    }

    async fn get_device(&self, user: &UserId, device: &DeviceId) -> Result<Option<DeviceData>> {
        self.device(user, device.as_str()).await
    }

    async fn get_user_devices(&self, user: &UserId) -> Result<HashMap<OwnedDeviceId, DeviceData>> {
        self.devices(user).await
    }

    async fn get_own_device(&self) -> Result<DeviceData> {
        self.own_device().await
    }

    async fn get_user_identity(&self, user: &UserId) -> Result<Option<UserIdentityData>> {
        self.store
            .crypto_identity(&self.persona, &save::ids(user.as_str()))
            .await?
            .as_deref()
            .map(load::parse)
            .transpose()
    }

    async fn is_message_known(&self, hash: &OlmMessageHash) -> Result<bool> {
        Ok(self.store.crypto_hash_known(&self.persona, &save::json(hash)?).await?)
    }

    async fn get_outgoing_secret_requests(&self, id: &TransactionId) -> Result<Option<GossipRequest>> {
        self.kv(&key::of(key::KEY_REQUEST, &[id.as_str()])).await
    }

    async fn get_secret_request_by_info(&self, info: &SecretInfo) -> Result<Option<GossipRequest>> {
        let all: Vec<GossipRequest> = self.kv_prefixed(key::KEY_REQUEST).await?;
        Ok(all.into_iter().find(|r| r.info == *info))
    }

    async fn get_unsent_secret_requests(&self) -> Result<Vec<GossipRequest>> {
        let all: Vec<GossipRequest> = self.kv_prefixed(key::KEY_REQUEST).await?;
        Ok(all.into_iter().filter(|r| !r.sent_out).collect())
    }

    async fn delete_outgoing_secret_requests(&self, id: &TransactionId) -> Result<()> {
        let k = key::of(key::KEY_REQUEST, &[id.as_str()]);
        self.write(CryptoWrite { kv: vec![(k, None)], ..CryptoWrite::default() }).await
    }

    async fn get_secrets_from_inbox(&self, name: &SecretName) -> Result<Vec<Zeroizing<String>>> {
        let all: Vec<String> = self.kv_prefixed(&key::under(key::SECRET, &[name.as_str()])).await?;
        Ok(all.into_iter().map(Zeroizing::new).collect())
    }

    async fn delete_secrets_from_inbox(&self, name: &SecretName) -> Result<()> {
        let prefix = key::under(key::SECRET, &[name.as_str()]);
        let rows = self.store.crypto_kv_prefixed(&self.persona, &prefix).await?;
        self.write(CryptoWrite { kv: rows.into_iter().map(|(k, _)| (k, None)).collect(), ..CryptoWrite::default() })
            .await
    }

    async fn get_room_settings(&self, room: &RoomId) -> Result<Option<RoomSettings>> {
        self.kv(&key::of(key::ROOM_SETTINGS, &[room.as_str()])).await
    }

    async fn get_received_room_key_bundle_data(
        &self,
        room: &RoomId,
        user: &UserId,
    ) -> Result<Option<StoredRoomKeyBundleData>> {
        self.kv(&key::of(key::BUNDLE, &[room.as_str(), user.as_str()])).await
    }

    async fn get_pending_key_bundle_details_for_room(
        &self,
        room: &RoomId,
    ) -> Result<Option<RoomPendingKeyBundleDetails>> {
        self.kv(&key::of(key::PENDING_BUNDLE, &[room.as_str()])).await
    }

    async fn get_all_rooms_pending_key_bundles(&self) -> Result<Vec<RoomPendingKeyBundleDetails>> {
        self.kv_prefixed(key::PENDING_BUNDLE).await
    }

    async fn has_downloaded_all_room_keys(&self, room: &RoomId) -> Result<bool> {
        Ok(self.store.crypto_kv(&self.persona, &key::of(key::DOWNLOADED, &[room.as_str()])).await?.is_some())
    }

    async fn get_custom_value(&self, k: &str) -> Result<Option<Vec<u8>>> {
        self.kv(&key::of(key::CUSTOM, &[k])).await
    }

    async fn set_custom_value(&self, k: &str, value: Vec<u8>) -> Result<()> {
        let kv = vec![(key::of(key::CUSTOM, &[k]), Some(save::json(&value)?))];
        self.write(CryptoWrite { kv, ..CryptoWrite::default() }).await
    }

    async fn remove_custom_value(&self, k: &str) -> Result<()> {
        self.write(CryptoWrite { kv: vec![(key::of(key::CUSTOM, &[k]), None)], ..CryptoWrite::default() }).await
    }

    async fn try_take_leased_lock(&self, ms: u32, k: &str, holder: &str) -> Result<Option<CrossProcessLockGeneration>> {
        let mut leases = self.leases.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(try_take_leased_lock(&mut leases, ms, k, holder))
    }

    async fn next_batch_token(&self) -> Result<Option<String>> {
        self.kv(key::NEXT_BATCH).await
    }

    async fn close(&self) -> Result<()> {
        Ok(())
    }

    async fn reopen(&self) -> Result<()> {
        Ok(())
    }

    async fn get_size(&self) -> Result<Option<usize>> {
        Ok(None)
    }
}

impl DbState {
    /// Saves `changes`, withheld notices only for rooms the persona is in (anyone can
    /// send them for any room), and at most `WITHHELD_KEPT` of them.
    async fn save_filtered(&self, mut changes: Changes) -> Result<()> {
        let withheld = !changes.withheld_session_info.is_empty();
        if withheld && let Ok(persona) = ruma::UserId::parse(self.persona.as_str()) {
            let joined = self.store.joined_rooms(&persona).await?;
            changes.withheld_session_info.retain(|room, _| joined.iter().any(|r| r.as_str() == room.as_str()));
        }
        let w = Box::pin(save::changes(changes)).await?;
        Box::pin(self.write(w)).await?;
        if withheld {
            self.store.crypto_kv_cap(&self.persona, key::WITHHELD, WITHHELD_KEPT).await?;
        }
        Ok(())
    }
}

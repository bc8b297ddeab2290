//! Reading a persona's crypto state back: each pickle unpickled with what it needs (an
//! Olm session needs the persona's own device keys; an outbound session its device and
//! identity keys, from the account).

use std::collections::HashMap;

use matrix_sdk_common::ruma::{OwnedDeviceId, RoomId, UserId};
use matrix_sdk_crypto::olm::{
    InboundGroupSession, OutboundGroupSession, PickledInboundGroupSession, PrivateCrossSigningIdentity, Session,
};
use matrix_sdk_crypto::{Account, DeviceData};
use serde::de::DeserializeOwned;

use super::save::key;
use super::{DbState, Error};

pub(super) fn parse<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    Ok(serde_json::from_str(text)?)
}

/// A room key from its row.
pub(super) fn group(value: String, backed_up: bool) -> Result<InboundGroupSession, Error> {
    let mut pickle: PickledInboundGroupSession = parse(&value)?;
    pickle.backed_up = backed_up;
    InboundGroupSession::from_pickle(pickle).map_err(|e| Error::Unpickle(e.to_string()))
}

pub(super) fn groups(rows: Vec<(String, bool)>) -> Result<Vec<InboundGroupSession>, Error> {
    rows.into_iter().map(|(value, backed_up)| group(value, backed_up)).collect()
}

impl DbState {
    pub(super) async fn kv<T: DeserializeOwned>(&self, k: &str) -> Result<Option<T>, Error> {
        self.store.crypto_kv(&self.persona, k).await?.as_deref().map(parse).transpose()
    }

    /// The values under a key prefix.
    pub(super) async fn kv_prefixed<T: DeserializeOwned>(&self, prefix: &str) -> Result<Vec<T>, Error> {
        let rows = self.store.crypto_kv_prefixed(&self.persona, prefix).await?;
        rows.iter().map(|(_, v)| parse(v)).collect()
    }

    pub(super) async fn account(&self) -> Result<Option<Account>, Error> {
        let Some(pickle) = self.kv(key::ACCOUNT).await? else { return Ok(None) };
        let account = Account::from_pickle(pickle).map_err(|e| Error::Unpickle(e.to_string()))?;
        *self.static_account.write().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(account.static_data().clone());
        Ok(Some(account))
    }

    pub(super) async fn identity(&self) -> Result<Option<PrivateCrossSigningIdentity>, Error> {
        let Some(pickle) = self.kv(key::IDENTITY).await? else { return Ok(None) };
        Ok(Some(PrivateCrossSigningIdentity::from_pickle(pickle).map_err(|e| Error::Unpickle(e.to_string()))?))
    }

    pub(super) async fn sessions(&self, sender_key: &str) -> Result<Option<Vec<Session>>, Error> {
        let rows = self.store.crypto_olm_sessions(&self.persona, sender_key).await?;
        if rows.is_empty() {
            return Ok(None);
        }
        let own = self.own_device().await?.as_device_keys().clone();
        let sessions = rows
            .iter()
            .map(|v| Session::from_pickle(own.clone(), parse(v)?).map_err(|e| Error::Unpickle(e.to_string())))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Some(sessions))
    }

    pub(super) async fn group_session(&self, room: &RoomId, id: &str) -> Result<Option<InboundGroupSession>, Error> {
        match self.store.crypto_group_session(&self.persona, &key::part(id)).await? {
            // A session is only ever for the room it was made for.
            Some((stored_room, value, backed_up)) if stored_room == key::part(room.as_str()) => {
                Ok(Some(group(value, backed_up)?))
            }
            _ => Ok(None),
        }
    }

    pub(super) async fn outbound(&self, room: &RoomId) -> Result<Option<OutboundGroupSession>, Error> {
        let Some(value) = self.store.crypto_outbound(&self.persona, &key::part(room.as_str())).await? else {
            return Ok(None);
        };
        let account = self.static_data()?;
        OutboundGroupSession::from_pickle(account.device_id, account.identity_keys, parse(&value)?)
            .map(Some)
            .map_err(|e| Error::Unpickle(e.to_string()))
    }

    pub(super) async fn devices(&self, user: &UserId) -> Result<HashMap<OwnedDeviceId, DeviceData>, Error> {
        let rows = self.store.crypto_devices(&self.persona, &key::part(user.as_str()), None).await?;
        rows.iter()
            .map(|v| {
                let device: DeviceData = parse(v)?;
                Ok((device.device_id().to_owned(), device))
            })
            .collect()
    }

    pub(super) async fn device(&self, user: &UserId, device: &str) -> Result<Option<DeviceData>, Error> {
        let rows =
            self.store.crypto_devices(&self.persona, &key::part(user.as_str()), Some(&key::part(device))).await?;
        rows.first().map(|v| parse(v)).transpose()
    }

    pub(super) async fn own_device(&self) -> Result<DeviceData, Error> {
        let account = self.static_data()?;
        self.device(&account.user_id, account.device_id.as_str()).await?.ok_or(Error::AccountUnset)
    }
}

//! A persona's device (MSC4190: the appservice creates it, no login) and the calls its
//! crypto makes as that device (`device_id` beside `user_id`): keys upload, query and
//! claim, to-device messages, cross-signing keys and signatures. The crypto builds those
//! requests itself (their bodies are the crypto library's); this sends them as the device,
//! with the same retries as every other call.

use reqwest::Method;
use ruma::UserId;
use serde_json::{Value, json};

use super::{Client, Error, enc};

impl Client {
    /// `PUT /_matrix/client/v3/devices/{deviceId}` as the appservice for `user`: creates
    /// the device if it is missing (MSC4190), else leaves it be.
    pub async fn create_device(&self, user: &UserId, device: &str, display_name: &str) -> Result<(), Error> {
        let path = format!("/_matrix/client/v3/devices/{}", enc(device));
        self.call(Method::PUT, &path, Some(user), Some(&json!({"display_name": display_name}))).await.map(drop)
    }

    /// `DELETE /_matrix/client/v3/devices/{deviceId}` as the appservice for `user` (MSC4190:
    /// no interactive auth). A device already gone counts as deleted.
    pub async fn delete_device(&self, user: &UserId, device: &str) -> Result<(), Error> {
        let path = format!("/_matrix/client/v3/devices/{}", enc(device));
        match self.call(Method::DELETE, &path, Some(user), Some(&json!({}))).await {
            Ok(_) => Ok(()),
            Err(e) if e.errcode() == Some("M_NOT_FOUND") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `GET /_matrix/client/v3/devices/{deviceId}` as `user`: whether the device exists.
    pub async fn device_exists(&self, user: &UserId, device: &str) -> Result<bool, Error> {
        let path = format!("/_matrix/client/v3/devices/{}", enc(device));
        match self.call(Method::GET, &path, Some(user), None).await {
            Ok(_) => Ok(true),
            Err(e) if e.errcode() == Some("M_NOT_FOUND") => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// A call as `user`'s `device`: `path` (with its query, already encoded) and `body` as
    /// the crypto built them.
    pub async fn call_device(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        user: &UserId,
        device: &str,
    ) -> Result<Value, Error> {
        let method = Method::from_bytes(method.as_bytes()).map_err(|e| Error::Unavailable(e.to_string()))?;
        self.call_as(method, path, Some((user, Some(device))), body).await
    }
}

//! The client-server endpoints richbot uses, one method each.

use reqwest::Method;
use ruma::{OwnedEventId, OwnedRoomId, OwnedUserId, RoomId, UserId};
use serde_json::{Value, json};

use super::{Client, Error, enc};

/// The room encryption algorithm richbot uses for rooms it makes.
pub const MEGOLM: &str = "m.megolm.v1.aes-sha2";

/// How many times a ping is made when the homeserver could not connect, and how long
/// apart ([`Client::ping`]).
const PING_TRIES: u32 = 3;
const PING_AGAIN: std::time::Duration = std::time::Duration::from_secs(1);

fn parse_field<T: TryFrom<String>>(v: &Value, key: &str) -> Result<T, Error> {
    v.get(key)
        .and_then(Value::as_str)
        .and_then(|s| T::try_from(s.to_owned()).ok())
        .ok_or_else(|| Error::Unavailable(format!("homeserver answer lacks a valid \"{key}\"")))
}

impl Client {
    /// `GET /_matrix/client/versions`: is the homeserver there?
    pub async fn versions(&self) -> Result<Value, Error> {
        self.call(Method::GET, "/_matrix/client/versions", None, None).await
    }

    /// `GET /_matrix/client/v3/account/whoami` as the appservice's sender: which user the
    /// homeserver takes the as_token for (an unknown registration answers `M_UNKNOWN_TOKEN`).
    pub async fn whoami(&self) -> Result<OwnedUserId, Error> {
        let answer = self.call(Method::GET, "/_matrix/client/v3/account/whoami", None, None).await?;
        parse_field::<OwnedUserId>(&answer, "user_id")
    }

    /// `POST /_matrix/client/v3/register` as the appservice, without a device. A user that
    /// exists already (`M_USER_IN_USE`) counts as registered.
    pub async fn register(&self, localpart: &str) -> Result<(), Error> {
        let body = json!({"type": "m.login.application_service", "username": localpart, "inhibit_login": true});
        match self.call(Method::POST, "/_matrix/client/v3/register", None, Some(&body)).await {
            Ok(_) => Ok(()),
            Err(e) if e.errcode() == Some("M_USER_IN_USE") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `PUT /_matrix/client/v3/profile/{userId}/displayname`.
    pub async fn set_display_name(&self, user: &UserId, name: &str) -> Result<(), Error> {
        let path = format!("/_matrix/client/v3/profile/{}/displayname", enc(user.as_str()));
        self.call(Method::PUT, &path, Some(user), Some(&json!({"displayname": name}))).await.map(drop)
    }

    /// `POST /_matrix/client/v3/rooms/{roomId}/join` as `user`.
    pub async fn join(&self, room: &RoomId, user: &UserId) -> Result<(), Error> {
        let path = format!("/_matrix/client/v3/rooms/{}/join", enc(room.as_str()));
        self.call(Method::POST, &path, Some(user), Some(&json!({}))).await.map(drop)
    }

    /// `POST /_matrix/client/v3/rooms/{roomId}/leave` as `user` (also declines an invite).
    pub async fn leave(&self, room: &RoomId, user: &UserId) -> Result<(), Error> {
        self.leave_saying(room, user, None).await
    }

    /// [`Client::leave`] with a `reason` members see ("rejected the invite: ...").
    pub async fn leave_saying(&self, room: &RoomId, user: &UserId, reason: Option<&str>) -> Result<(), Error> {
        let path = format!("/_matrix/client/v3/rooms/{}/leave", enc(room.as_str()));
        let body = reason.map_or_else(|| json!({}), |r| json!({"reason": r}));
        self.call(Method::POST, &path, Some(user), Some(&body)).await.map(drop)
    }

    /// `PUT /_matrix/client/v3/rooms/{roomId}/send/{eventType}/{txnId}` as `user`.
    pub async fn send(
        &self,
        room: &RoomId,
        event_type: &str,
        txn_id: &str,
        content: &Value,
        user: &UserId,
    ) -> Result<OwnedEventId, Error> {
        let path = format!("/_matrix/client/v3/rooms/{}/send/{}/{}", enc(room.as_str()), enc(event_type), enc(txn_id));
        let answer = self.call(Method::PUT, &path, Some(user), Some(content)).await?;
        parse_field::<OwnedEventId>(&answer, "event_id")
    }

    /// `GET /_matrix/client/v3/rooms/{roomId}/messages?dir=b` as `user`: one page of the
    /// room's events, newest first, from `from` (a token of the last page; the newest when
    /// `None`), only those `filter` (a `RoomEventFilter`) admits; and the next page's token.
    pub async fn events_back(
        &self,
        room: &RoomId,
        user: &UserId,
        filter: &Value,
        from: Option<&str>,
        limit: u32,
    ) -> Result<(Vec<Value>, Option<String>), Error> {
        let mut path = format!(
            "/_matrix/client/v3/rooms/{}/messages?dir=b&limit={limit}&filter={}",
            enc(room.as_str()),
            enc(&filter.to_string())
        );
        if let Some(from) = from {
            path.push_str(&format!("&from={}", enc(from)));
        }
        let answer = self.call(Method::GET, &path, Some(user), None).await?;
        let chunk = answer.get("chunk").and_then(Value::as_array).cloned().unwrap_or_default();
        let end = answer.get("end").and_then(Value::as_str).map(str::to_owned);
        Ok((chunk, end))
    }

    /// `GET /_matrix/client/v3/rooms/{roomId}/state` as `user`: the room's current state
    /// events (senders included).
    pub async fn room_state(&self, room: &RoomId, user: &UserId) -> Result<Vec<Value>, Error> {
        let path = format!("/_matrix/client/v3/rooms/{}/state", enc(room.as_str()));
        let answer = self.call(Method::GET, &path, Some(user), None).await?;
        Ok(answer.as_array().cloned().unwrap_or_default())
    }

    /// `GET /_matrix/client/v3/rooms/{roomId}/state/{eventType}/{stateKey}` as `user`: the
    /// content of one state event, `None` when the room has none.
    pub async fn state_event(
        &self,
        room: &RoomId,
        user: &UserId,
        event_type: &str,
        state_key: &str,
    ) -> Result<Option<Value>, Error> {
        let path =
            format!("/_matrix/client/v3/rooms/{}/state/{}/{}", enc(room.as_str()), enc(event_type), enc(state_key));
        match self.call(Method::GET, &path, Some(user), None).await {
            Ok(content) => Ok(Some(content)),
            Err(e) if e.errcode() == Some("M_NOT_FOUND") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `PUT /_matrix/client/v3/rooms/{roomId}/typing/{userId}`.
    pub async fn typing(&self, room: &RoomId, user: &UserId, typing: bool, timeout_ms: u64) -> Result<(), Error> {
        let path = format!("/_matrix/client/v3/rooms/{}/typing/{}", enc(room.as_str()), enc(user.as_str()));
        let body = if typing { json!({"typing": true, "timeout": timeout_ms}) } else { json!({"typing": false}) };
        self.call(Method::PUT, &path, Some(user), Some(&body)).await.map(drop)
    }

    /// `GET /_matrix/client/v3/rooms/{roomId}/joined_members` as `user`.
    pub async fn joined_members(&self, room: &RoomId, user: &UserId) -> Result<Vec<OwnedUserId>, Error> {
        let path = format!("/_matrix/client/v3/rooms/{}/joined_members", enc(room.as_str()));
        let answer = self.call(Method::GET, &path, Some(user), None).await?;
        let joined = answer.get("joined").and_then(Value::as_object).cloned().unwrap_or_default();
        Ok(joined.keys().filter_map(|k| UserId::parse(k.as_str()).ok()).collect())
    }

    /// `POST /_matrix/client/v3/createRoom`: a direct chat from `user` with `invitee`,
    /// encrypted from the start if `encrypted` (as Element makes them).
    pub async fn create_dm(&self, user: &UserId, invitee: &UserId, encrypted: bool) -> Result<OwnedRoomId, Error> {
        let mut body = json!({"invite": [invitee], "is_direct": true, "preset": "trusted_private_chat"});
        if encrypted {
            body["initial_state"] = json!([{"type": "m.room.encryption", "state_key": "",
                                             "content": {"algorithm": MEGOLM}}]);
        }
        let answer = self.call(Method::POST, "/_matrix/client/v3/createRoom", Some(user), Some(&body)).await?;
        parse_field::<OwnedRoomId>(&answer, "room_id")
    }

    /// `GET /_matrix/client/v3/directory/room/{roomAlias}`: the room an alias names, or
    /// `None` when it names none.
    pub async fn resolve_alias(&self, alias: &ruma::RoomAliasId) -> Result<Option<OwnedRoomId>, Error> {
        let path = format!("/_matrix/client/v3/directory/room/{}", enc(alias.as_str()));
        match self.call(Method::GET, &path, None, None).await {
            Ok(answer) => parse_field::<OwnedRoomId>(&answer, "room_id").map(Some),
            Err(Error::Refused { status: 404, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `POST /_matrix/client/v1/appservice/{appserviceId}/ping`: the homeserver calls our
    /// `/_matrix/app/v1/ping` and reports how long it took.
    ///
    /// A "could not connect" answer is asked again twice, a second apart: just after
    /// richbot restarts, the homeserver's first call may go over a kept-alive connection
    /// to the old process and fail (Synapse answers 502 `M_CONNECTION_FAILED`,
    /// "AlreadyCalled"), and a ping that fails does not flush the transactions it queued
    /// while richbot was down, which then wait out its backoff (up to minutes).
    pub async fn ping(&self, appservice_id: &str, transaction_id: &str) -> Result<u64, Error> {
        let path = format!("/_matrix/client/v1/appservice/{}/ping", enc(appservice_id));
        let body = json!({"transaction_id": transaction_id});
        let mut tries_left = PING_TRIES;
        loop {
            tries_left -= 1;
            match self.call(Method::POST, &path, None, Some(&body)).await {
                Ok(answer) => return Ok(answer.get("duration_ms").and_then(Value::as_u64).unwrap_or_default()),
                Err(e) if tries_left > 0 && e.errcode() == Some("M_CONNECTION_FAILED") => {
                    tracing::debug!(error = %e, "the homeserver could not reach richbot yet; pinging again");
                    tokio::time::sleep(PING_AGAIN).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

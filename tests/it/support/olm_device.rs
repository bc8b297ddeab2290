//! A hand-made E2EE device for a plain [`User`]: its keys from vodozemac (the Olm and
//! Megolm of matrix-sdk-crypto, re-exported by it), every message built by hand, so a test
//! can send what no well-behaved client would: a room key it holds, labelled with another
//! room. (matrix-js-sdk keeps no usable copy of a received `m.room_key` to send on.)

use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use matrix_sdk_crypto::vodozemac::Curve25519PublicKey;
use matrix_sdk_crypto::vodozemac::megolm::{self, GroupSession};
use matrix_sdk_crypto::vodozemac::olm::{self, Account};
use reqwest::Method;
use serde_json::{Value, json};

use super::{User, enc, rand_suffix};

/// One device of `user`, its keys uploaded.
pub struct OlmDevice {
    user: User,
    user_id: String,
    device_id: String,
    account: Account,
}

/// Canonical JSON (sorted keys, no spaces), what a signature is made over.
fn canonical(v: &Value) -> String {
    ruma::CanonicalJsonValue::try_from(v.clone()).expect("canonical JSON").to_string()
}

impl OlmDevice {
    /// Uploads a new device's identity keys, signed, for `user`'s access token's device.
    pub async fn new(user: &User) -> Self {
        let (_, who) = user.call(Method::GET, "/_matrix/client/v3/account/whoami", None).await;
        let user_id = who["user_id"].as_str().expect("user id").to_owned();
        let device_id = who["device_id"].as_str().expect("device id").to_owned();
        let account = Account::new();
        let keys = account.identity_keys();
        let mut device_keys = json!({
            "user_id": user_id, "device_id": device_id,
            "algorithms": ["m.olm.v1.curve25519-aes-sha2", "m.megolm.v1.aes-sha2"],
            "keys": {
                format!("curve25519:{device_id}"): keys.curve25519.to_base64(),
                format!("ed25519:{device_id}"): keys.ed25519.to_base64(),
            },
        });
        let signature = account.sign(canonical(&device_keys)).to_base64();
        device_keys["signatures"] = json!({ &user_id: { format!("ed25519:{device_id}"): signature } });
        let (status, v) =
            user.call(Method::POST, "/_matrix/client/v3/keys/upload", Some(json!({"device_keys": device_keys}))).await;
        assert_eq!(status, 200, "keys uploaded: {v}");
        Self { user: user.clone(), user_id, device_id, account }
    }

    /// A new Megolm session of this device's.
    pub fn group_session() -> GroupSession {
        GroupSession::new(megolm::SessionConfig::version_1())
    }

    /// Sends `to`'s one device an `m.room_key` for `session`, saying it is for `room`,
    /// encrypted in a new Olm session (one of its one-time keys claimed).
    pub async fn send_room_key(&self, to: &str, room: &str, session: &GroupSession) {
        let content = json!({
            "algorithm": "m.megolm.v1.aes-sha2", "room_id": room,
            "session_id": session.session_id(), "session_key": session.session_key().to_base64(),
        });
        self.send_olm(to, "m.room_key", content).await;
    }

    async fn send_olm(&self, to: &str, event_type: &str, content: Value) {
        let (_, found) =
            self.user.call(Method::POST, "/_matrix/client/v3/keys/query", Some(json!({"device_keys": {to: []}}))).await;
        let (device, keys) = found["device_keys"][to].as_object().and_then(|d| d.iter().next()).expect("a device");
        let key = |kind: &str| keys["keys"][format!("{kind}:{device}")].as_str().expect("a key").to_owned();
        let (curve, ed) = (key("curve25519"), key("ed25519"));
        let claim = json!({"one_time_keys": {to: {device: "signed_curve25519"}}});
        let (_, claimed) = self.user.call(Method::POST, "/_matrix/client/v3/keys/claim", Some(claim)).await;
        let otk = claimed["one_time_keys"][to][device].as_object().and_then(|k| k.values().next()).expect("a key");
        let otk = Curve25519PublicKey::from_base64(otk["key"].as_str().expect("key")).expect("curve key");
        let identity = Curve25519PublicKey::from_base64(&curve).expect("curve key");
        let mut session =
            self.account.create_outbound_session(olm::SessionConfig::version_1(), identity, otk).expect("session");
        let payload = json!({
            "type": event_type, "content": content,
            "sender": self.user_id, "sender_device": self.device_id,
            "keys": {"ed25519": self.account.ed25519_key().to_base64()},
            "recipient": to, "recipient_keys": {"ed25519": ed},
        });
        let (kind, body) = session.encrypt(payload.to_string()).expect("encrypted").to_parts();
        let message = json!({
            "algorithm": "m.olm.v1.curve25519-aes-sha2",
            "sender_key": self.account.curve25519_key().to_base64(),
            "ciphertext": {curve: {"type": kind, "body": STANDARD_NO_PAD.encode(body)}},
        });
        let path = format!("/_matrix/client/v3/sendToDevice/m.room.encrypted/{}", enc(&format!("o{}", rand_suffix())));
        let (status, v) =
            self.user.call(Method::PUT, &path, Some(json!({"messages": {to: {device.as_str(): message}}}))).await;
        assert_eq!(status, 200, "sent to the device: {v}");
    }

    /// Sends `body` into `room` encrypted with `session`, its clear part naming `label`
    /// as its room (as a sender who re-labels a key would make it).
    pub async fn say(&self, room: &str, label: &str, session: &mut GroupSession, body: &str) -> String {
        let clear = json!({"type": "m.room.message", "content": {"msgtype": "m.text", "body": body}, "room_id": label});
        let content = json!({
            "algorithm": "m.megolm.v1.aes-sha2",
            "sender_key": self.account.curve25519_key().to_base64(),
            "ciphertext": session.encrypt(clear.to_string()).to_base64(),
            "session_id": session.session_id(),
            "device_id": self.device_id,
        });
        self.user.send(room, "m.room.encrypted", content).await
    }
}

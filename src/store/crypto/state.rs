//! The personas' end-to-end encryption state (`crypto_*` tables): rows of text, the
//! crypto library's pickles as JSON, the secret ones sealed with the pickle key
//! (`pickles.rs`). What a pickle is and how it is read back is
//! `crypto::state`'s business; here is only where each kind lives and what it is found by.
//! Every query is scoped to one persona.
//!
//! A save ([`CryptoWrite`]) is one database transaction: what the library hands over in
//! one call (a new Olm session and the account that no longer holds its one-time key, a
//! room key, an advanced outbound session) lands whole or not at all.

use crate::store::{Result, Store};

/// An Olm session to store.
#[derive(Debug, Clone)]
pub struct OlmSessionRow {
    pub session_id: String,
    pub sender_key: String,
    pub value: String,
}

/// A Megolm room key (inbound group session) to store.
#[derive(Debug, Clone)]
pub struct GroupSessionRow {
    pub session_id: String,
    pub room_id: String,
    pub sender_key: String,
    pub sender_data_type: i64,
    pub backed_up: bool,
    pub value: String,
}

/// Among instances: the crypto lease a save is made under (its holder and generation).
/// The save checks it in its own transaction: an instance that stalled past its lease
/// cannot bring back state another instance has moved on from (a used one-time key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub holder: String,
    pub generation: i64,
}

/// One save of a persona's crypto state. `None` values delete.
#[derive(Debug, Default)]
pub struct CryptoWrite {
    /// The lease it is made under, among instances.
    pub fence: Option<Fence>,
    pub kv: Vec<(String, Option<String>)>,
    pub olm_sessions: Vec<OlmSessionRow>,
    pub group_sessions: Vec<GroupSessionRow>,
    /// Room id, pickle.
    pub outbound: Vec<(String, String)>,
    /// User id, device id, pickle (`None`: the device is gone).
    pub devices: Vec<(String, String, Option<String>)>,
    /// User id, identity.
    pub identities: Vec<(String, String)>,
    /// User id, whether their device list is out of date.
    pub tracked: Vec<(String, bool)>,
    /// Hashes of Olm messages seen.
    pub hashes: Vec<String>,
}

impl CryptoWrite {
    pub fn is_empty(&self) -> bool {
        self.kv.is_empty()
            && self.olm_sessions.is_empty()
            && self.group_sessions.is_empty()
            && self.outbound.is_empty()
            && self.devices.is_empty()
            && self.identities.is_empty()
            && self.tracked.is_empty()
            && self.hashes.is_empty()
    }
}

/// Every table that holds a persona's crypto state.
const TABLES: [&str; 8] = [
    "crypto_kv",
    "crypto_olm_sessions",
    "crypto_group_sessions",
    "crypto_outbound_sessions",
    "crypto_devices",
    "crypto_identities",
    "crypto_tracked_users",
    "crypto_olm_hashes",
];

impl Store {
    /// Applies one save of `persona`'s crypto state, in one transaction.
    pub async fn crypto_write(&self, persona: &str, w: &CryptoWrite) -> Result<()> {
        if w.is_empty() {
            return Ok(());
        }
        let mut tx = self.writer.begin().await?;
        if let Some(fence) = &w.fence {
            // Locked until the save commits (PostgreSQL): no other instance takes the lease
            // in between.
            let lock = if self.backend == crate::store::Backend::Postgres { " FOR UPDATE" } else { "" };
            let sql = format!(
                "SELECT 1 AS held FROM crypto_leases WHERE persona = $1 AND holder = $2 AND generation = $3
                 AND expires_at > $4{lock}"
            );
            let held = sqlx::query(&sql)
                .bind(persona)
                .bind(fence.holder.as_str())
                .bind(fence.generation)
                .bind(crate::clock::now_ms())
                .fetch_optional(&mut *tx)
                .await?;
            if held.is_none() {
                return Err(crate::store::Error::LeaseLost(persona.to_owned()));
            }
        }
        for (key, value) in &w.kv {
            let q = match value {
                Some(v) => sqlx::query(
                    "INSERT INTO crypto_kv (persona, key, value) VALUES ($1, $2, $3)
                     ON CONFLICT (persona, key) DO UPDATE SET value = excluded.value",
                )
                .bind(persona)
                .bind(key.as_str())
                .bind(self.seal_kv(persona, key, v)),
                None => sqlx::query("DELETE FROM crypto_kv WHERE persona = $1 AND key = $2")
                    .bind(persona)
                    .bind(key.as_str()),
            };
            q.execute(&mut *tx).await?;
        }
        for s in &w.olm_sessions {
            sqlx::query(
                "INSERT INTO crypto_olm_sessions (persona, session_id, sender_key, value) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (persona, session_id) DO UPDATE SET value = excluded.value",
            )
            .bind(persona)
            .bind(s.session_id.as_str())
            .bind(s.sender_key.as_str())
            .bind(self.seal(persona, &s.value))
            .execute(&mut *tx)
            .await?;
        }
        for s in &w.group_sessions {
            // A room key is only ever for the room it came for: one sent again under the
            // same session id for another room (anyone who received it can do that) is
            // dropped, never moved over the first.
            let stored = sqlx::query(
                "INSERT INTO crypto_group_sessions
                 (persona, session_id, room_id, sender_key, sender_data_type, backed_up, value)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (persona, session_id) DO UPDATE SET
                 sender_key = excluded.sender_key, sender_data_type = excluded.sender_data_type,
                 backed_up = excluded.backed_up, value = excluded.value
                 WHERE crypto_group_sessions.room_id = excluded.room_id",
            )
            .bind(persona)
            .bind(s.session_id.as_str())
            .bind(s.room_id.as_str())
            .bind(s.sender_key.as_str())
            .bind(s.sender_data_type)
            .bind(i64::from(s.backed_up))
            .bind(self.seal(persona, &s.value))
            .execute(&mut *tx)
            .await?;
            if stored.rows_affected() == 0 {
                tracing::warn!(
                    persona,
                    session = s.session_id,
                    room = s.room_id,
                    "a room key already known for another room was dropped"
                );
            }
        }
        for (room, value) in &w.outbound {
            sqlx::query(
                "INSERT INTO crypto_outbound_sessions (persona, room_id, value) VALUES ($1, $2, $3)
                 ON CONFLICT (persona, room_id) DO UPDATE SET value = excluded.value",
            )
            .bind(persona)
            .bind(room.as_str())
            .bind(self.seal(persona, value))
            .execute(&mut *tx)
            .await?;
        }
        for (user, device, value) in &w.devices {
            let q = match value {
                Some(v) => sqlx::query(
                    "INSERT INTO crypto_devices (persona, user_id, device_id, value) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (persona, user_id, device_id) DO UPDATE SET value = excluded.value",
                )
                .bind(persona)
                .bind(user.as_str())
                .bind(device.as_str())
                .bind(v.as_str()),
                None => {
                    sqlx::query("DELETE FROM crypto_devices WHERE persona = $1 AND user_id = $2 AND device_id = $3")
                        .bind(persona)
                        .bind(user.as_str())
                        .bind(device.as_str())
                }
            };
            q.execute(&mut *tx).await?;
        }
        for (user, value) in &w.identities {
            sqlx::query(
                "INSERT INTO crypto_identities (persona, user_id, value) VALUES ($1, $2, $3)
                 ON CONFLICT (persona, user_id) DO UPDATE SET value = excluded.value",
            )
            .bind(persona)
            .bind(user.as_str())
            .bind(value.as_str())
            .execute(&mut *tx)
            .await?;
        }
        for (user, dirty) in &w.tracked {
            sqlx::query(
                "INSERT INTO crypto_tracked_users (persona, user_id, dirty) VALUES ($1, $2, $3)
                 ON CONFLICT (persona, user_id) DO UPDATE SET dirty = excluded.dirty",
            )
            .bind(persona)
            .bind(user.as_str())
            .bind(i64::from(*dirty))
            .execute(&mut *tx)
            .await?;
        }
        for hash in &w.hashes {
            sqlx::query("INSERT INTO crypto_olm_hashes (persona, hash) VALUES ($1, $2) ON CONFLICT DO NOTHING")
                .bind(persona)
                .bind(hash.as_str())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Forgets everything of `persona`'s crypto (a reset: the next start makes a new
    /// device and identity).
    pub async fn crypto_forget(&self, persona: &str) -> Result<()> {
        let mut tx = self.writer.begin().await?;
        for table in TABLES.iter().chain(&["crypto_inbox", "crypto_inbox_aside", "crypto_leases"]) {
            sqlx::query(&format!("DELETE FROM {table} WHERE persona = $1")).bind(persona).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

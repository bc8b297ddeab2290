//! Reading the personas' end-to-end encryption state back (see `crypto_state.rs`): each
//! kind by what the crypto library looks it up by, one persona at a time.

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::store::{Result, Store};

fn text(row: &AnyRow, column: &str) -> Result<String> {
    Ok(row.try_get(column)?)
}

impl Store {
    /// A row's sealed `value`, opened (`pickles.rs`).
    fn value(&self, persona: &str, row: &AnyRow) -> Result<String> {
        self.unseal(persona, text(row, "value")?)
    }

    /// A group session's pickle and whether it is backed up.
    fn group(&self, persona: &str, row: &AnyRow) -> Result<(String, bool)> {
        Ok((self.value(persona, row)?, row.try_get::<i64, _>("backed_up")? != 0))
    }

    /// One single value of `persona`'s.
    pub async fn crypto_kv(&self, persona: &str, key: &str) -> Result<Option<String>> {
        let row = sqlx::query("SELECT value FROM crypto_kv WHERE persona = $1 AND key = $2")
            .bind(persona)
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(|r| self.value(persona, r)).transpose()
    }

    /// The single values whose key starts with `prefix`, by key.
    pub async fn crypto_kv_prefixed(&self, persona: &str, prefix: &str) -> Result<Vec<(String, String)>> {
        let rows = sqlx::query(
            "SELECT key, value FROM crypto_kv WHERE persona = $1 AND substr(key, 1, length($2)) = $2 ORDER BY key",
        )
        .bind(persona)
        .bind(prefix)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok((text(r, "key")?, self.value(persona, r)?))).collect()
    }

    /// Keeps at most `keep` of `persona`'s entries under `prefix` (the greatest keys), the
    /// rest deleted; how many were.
    pub async fn crypto_kv_cap(&self, persona: &str, prefix: &str, keep: i64) -> Result<u64> {
        let done = sqlx::query(
            "DELETE FROM crypto_kv WHERE persona = $1 AND substr(key, 1, length($2)) = $2 AND key < COALESCE(
               (SELECT key FROM crypto_kv WHERE persona = $1 AND substr(key, 1, length($2)) = $2
                ORDER BY key DESC LIMIT 1 OFFSET $3), '')",
        )
        .bind(persona)
        .bind(prefix)
        .bind(keep - 1)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected())
    }

    /// The Olm sessions with the device whose Curve25519 key is `sender_key`.
    pub async fn crypto_olm_sessions(&self, persona: &str, sender_key: &str) -> Result<Vec<String>> {
        let rows = sqlx::query("SELECT value FROM crypto_olm_sessions WHERE persona = $1 AND sender_key = $2")
            .bind(persona)
            .bind(sender_key)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| self.value(persona, r)).collect()
    }

    /// One room key: its room, pickle, and whether it is backed up.
    pub async fn crypto_group_session(
        &self,
        persona: &str,
        session_id: &str,
    ) -> Result<Option<(String, String, bool)>> {
        let row = sqlx::query(
            "SELECT room_id, value, backed_up FROM crypto_group_sessions WHERE persona = $1 AND session_id = $2",
        )
        .bind(persona)
        .bind(session_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref()
            .map(|r| {
                let (value, backed_up) = self.group(persona, r)?;
                Ok((text(r, "room_id")?, value, backed_up))
            })
            .transpose()
    }

    /// Room keys, of one room or all.
    pub async fn crypto_group_sessions(&self, persona: &str, room: Option<&str>) -> Result<Vec<(String, bool)>> {
        let rows = match room {
            Some(room) => {
                sqlx::query("SELECT value, backed_up FROM crypto_group_sessions WHERE persona = $1 AND room_id = $2")
                    .bind(persona)
                    .bind(room)
                    .fetch_all(&self.pool)
                    .await?
            }
            None => {
                sqlx::query("SELECT value, backed_up FROM crypto_group_sessions WHERE persona = $1")
                    .bind(persona)
                    .fetch_all(&self.pool)
                    .await?
            }
        };
        rows.iter().map(|r| self.group(persona, r)).collect()
    }

    /// A batch of the room keys a device (`sender_key`) sent whose sender data is of type
    /// `data_type`, in session id order after `after`.
    pub async fn crypto_group_sessions_of_device(
        &self,
        persona: &str,
        sender_key: &str,
        data_type: i64,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<(String, bool)>> {
        let rows = sqlx::query(
            "SELECT value, backed_up FROM crypto_group_sessions
             WHERE persona = $1 AND sender_key = $2 AND sender_data_type = $3 AND session_id > $4
             ORDER BY session_id LIMIT $5",
        )
        .bind(persona)
        .bind(sender_key)
        .bind(data_type)
        .bind(after.unwrap_or(""))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| self.group(persona, r)).collect()
    }

    /// How many room keys there are, and how many are backed up.
    pub async fn crypto_group_counts(&self, persona: &str) -> Result<(i64, i64)> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS total, CAST(COALESCE(SUM(backed_up), 0) AS BIGINT) AS backed_up
             FROM crypto_group_sessions WHERE persona = $1",
        )
        .bind(persona)
        .fetch_one(&self.pool)
        .await?;
        Ok((row.try_get("total")?, row.try_get("backed_up")?))
    }

    /// Up to `limit` room keys not backed up.
    pub async fn crypto_group_unbacked(&self, persona: &str, limit: i64) -> Result<Vec<String>> {
        let rows = sqlx::query("SELECT value FROM crypto_group_sessions WHERE persona = $1 AND backed_up = 0 LIMIT $2")
            .bind(persona)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| self.value(persona, r)).collect()
    }

    /// Marks room keys backed up (`Some` ids), or every one not (`None`).
    pub async fn crypto_set_backed_up(&self, persona: &str, sessions: Option<&[String]>) -> Result<()> {
        let mut tx = self.writer.begin().await?;
        match sessions {
            None => {
                sqlx::query("UPDATE crypto_group_sessions SET backed_up = 0 WHERE persona = $1")
                    .bind(persona)
                    .execute(&mut *tx)
                    .await?;
            }
            Some(ids) => {
                for id in ids {
                    sqlx::query(
                        "UPDATE crypto_group_sessions SET backed_up = 1 WHERE persona = $1 AND session_id = $2",
                    )
                    .bind(persona)
                    .bind(id.as_str())
                    .execute(&mut *tx)
                    .await?;
                }
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// The persona's outbound session in `room`.
    pub async fn crypto_outbound(&self, persona: &str, room: &str) -> Result<Option<String>> {
        let row = sqlx::query("SELECT value FROM crypto_outbound_sessions WHERE persona = $1 AND room_id = $2")
            .bind(persona)
            .bind(room)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(|r| self.value(persona, r)).transpose()
    }

    /// One device of `user`, or all of them (`device` `None`).
    pub async fn crypto_devices(&self, persona: &str, user: &str, device: Option<&str>) -> Result<Vec<String>> {
        let rows = match device {
            Some(device) => {
                sqlx::query("SELECT value FROM crypto_devices WHERE persona = $1 AND user_id = $2 AND device_id = $3")
                    .bind(persona)
                    .bind(user)
                    .bind(device)
                    .fetch_all(&self.pool)
                    .await?
            }
            None => {
                sqlx::query("SELECT value FROM crypto_devices WHERE persona = $1 AND user_id = $2")
                    .bind(persona)
                    .bind(user)
                    .fetch_all(&self.pool)
                    .await?
            }
        };
        rows.iter().map(|r| text(r, "value")).collect()
    }

    /// `user`'s cross-signing identity, as the persona knows it.
    pub async fn crypto_identity(&self, persona: &str, user: &str) -> Result<Option<String>> {
        let row = sqlx::query("SELECT value FROM crypto_identities WHERE persona = $1 AND user_id = $2")
            .bind(persona)
            .bind(user)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(|r| text(r, "value")).transpose()
    }

    /// The users whose devices the persona follows, and whether each list is out of date.
    pub async fn crypto_tracked(&self, persona: &str) -> Result<Vec<(String, bool)>> {
        let rows = sqlx::query("SELECT user_id, dirty FROM crypto_tracked_users WHERE persona = $1")
            .bind(persona)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| Ok((text(r, "user_id")?, r.try_get::<i64, _>("dirty")? != 0))).collect()
    }

    /// Whether an Olm message with this hash was seen.
    pub async fn crypto_hash_known(&self, persona: &str, hash: &str) -> Result<bool> {
        let row = sqlx::query("SELECT 1 AS known FROM crypto_olm_hashes WHERE persona = $1 AND hash = $2")
            .bind(persona)
            .bind(hash)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }
}

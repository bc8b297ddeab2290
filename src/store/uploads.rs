//! `uploads`: what turns uploaded as their personas, keyed by the call that made each
//! one, with the `mxc://` URL reserved before the bytes went (see `media::upload`); and
//! where a member posted a given `mxc://` URL, for the provenance check of payloads.

use ruma::{OwnedRoomId, UserId};
use serde_json::Value;
use sqlx::Row;

use super::{Result, Store};

/// Which upload of a turn: call `nth`, its `idx`-th picture or file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadKey {
    pub turn: i64,
    pub nth: u32,
    pub idx: u32,
}

/// An upload as recorded: its URL, and whether its bytes are known to have landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadRow {
    pub mxc: String,
    pub uploaded: bool,
}

impl Store {
    /// The upload `key` recorded, if any.
    pub async fn upload(&self, key: UploadKey) -> Result<Option<UploadRow>> {
        let row = sqlx::query("SELECT mxc, uploaded FROM uploads WHERE turn_id = $1 AND nth = $2 AND idx = $3")
            .bind(key.turn)
            .bind(i64::from(key.nth))
            .bind(i64::from(key.idx))
            .fetch_optional(&self.writer)
            .await?;
        row.map(|r| Ok(UploadRow { mxc: r.try_get("mxc")?, uploaded: r.try_get::<i64, _>("uploaded")? != 0 }))
            .transpose()
    }

    /// Records `mxc` (reserved, not filled yet) as upload `key` of `persona`.
    pub async fn reserve_upload(
        &self,
        key: UploadKey,
        persona: &UserId,
        mxc: &str,
        bytes: usize,
        now: i64,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO uploads (turn_id, nth, idx, persona, mxc, bytes, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (turn_id, nth, idx) DO NOTHING",
        )
        .bind(key.turn)
        .bind(i64::from(key.nth))
        .bind(i64::from(key.idx))
        .bind(persona.as_str())
        .bind(mxc)
        .bind(i64::try_from(bytes).unwrap_or(i64::MAX))
        .bind(now)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Marks upload `key` as filled.
    pub async fn upload_done(&self, key: UploadKey) -> Result<()> {
        sqlx::query("UPDATE uploads SET uploaded = 1 WHERE turn_id = $1 AND nth = $2 AND idx = $3")
            .bind(key.turn)
            .bind(i64::from(key.nth))
            .bind(i64::from(key.idx))
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Uploads turn `turn` recorded.
    pub async fn uploads_in_turn(&self, turn: i64) -> Result<u64> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM uploads WHERE turn_id = $1")
            .bind(turn)
            .fetch_one(&self.writer)
            .await?;
        Ok(u64::try_from(row.try_get::<i64, _>("n")?).unwrap_or(0))
    }

    /// Whether `persona` uploaded `mxc` (filled).
    pub async fn uploaded_by(&self, persona: &UserId, mxc: &str) -> Result<bool> {
        let row = sqlx::query("SELECT 1 AS one FROM uploads WHERE mxc = $1 AND persona = $2 AND uploaded = 1 LIMIT 1")
            .bind(mxc)
            .bind(persona.as_str())
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }

    /// The rooms where a stored picture, file or sticker message carries `mxc` as its media
    /// (`url`, or `file.url` when encrypted), not merely in its text.
    pub async fn rooms_posting_media(&self, mxc: &str) -> Result<Vec<OwnedRoomId>> {
        let contains = self.event_holds("$1");
        let sql = format!(
            "SELECT room_id, event FROM events WHERE event_type IN ('m.room.message', 'm.sticker') AND {contains} LIMIT 200"
        );
        let rows = sqlx::query(&sql).bind(mxc).fetch_all(&self.pool).await?;
        let mut rooms = Vec::new();
        for row in rows {
            let event: Value = serde_json::from_str(&row.try_get::<String, _>("event")?).unwrap_or_default();
            let content = &event["content"];
            let carries = [content.get("url"), content.pointer("/file/url")]
                .into_iter()
                .flatten()
                .any(|url| url.as_str() == Some(mxc));
            if let Ok(room) = OwnedRoomId::try_from(row.try_get::<String, _>("room_id")?)
                && carries
                && !rooms.contains(&room)
            {
                rooms.push(room);
            }
        }
        Ok(rooms)
    }
}

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
    /// For an encrypted upload: the `file` object (key, IV, hash) that opens it, as JSON.
    pub encryption: Option<String>,
}

fn upload_row(r: &sqlx::any::AnyRow) -> Result<UploadRow> {
    Ok(UploadRow {
        mxc: r.try_get("mxc")?,
        uploaded: r.try_get::<i64, _>("uploaded")? != 0,
        encryption: r.try_get("encryption")?,
    })
}

impl Store {
    /// The upload `key` recorded, if any.
    pub async fn upload(&self, key: UploadKey) -> Result<Option<UploadRow>> {
        let row =
            sqlx::query("SELECT mxc, uploaded, encryption FROM uploads WHERE turn_id = $1 AND nth = $2 AND idx = $3")
                .bind(key.turn)
                .bind(i64::from(key.nth))
                .bind(i64::from(key.idx))
                .fetch_optional(&self.writer)
                .await?;
        row.as_ref().map(upload_row).transpose()
    }

    /// Records `mxc` (reserved, not filled yet) as upload `key` of `persona`, of `bytes`,
    /// with its `encryption` when it is to be stored encrypted; a record already there
    /// stands.
    pub async fn reserve_upload(
        &self,
        key: UploadKey,
        persona: &UserId,
        mxc: &str,
        bytes: usize,
        encryption: Option<&str>,
        now: i64,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO uploads (turn_id, nth, idx, persona, mxc, bytes, created_at, encryption)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (turn_id, nth, idx) DO NOTHING",
        )
        .bind(key.turn)
        .bind(i64::from(key.nth))
        .bind(i64::from(key.idx))
        .bind(persona.as_str())
        .bind(mxc)
        .bind(i64::try_from(bytes).unwrap_or(i64::MAX))
        .bind(now)
        .bind(encryption)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// `persona`'s filled upload at `mxc`, if it made one.
    pub async fn own_upload(&self, persona: &UserId, mxc: &str) -> Result<Option<UploadRow>> {
        let row = sqlx::query(
            "SELECT mxc, uploaded, encryption FROM uploads WHERE mxc = $1 AND persona = $2 AND uploaded = 1 LIMIT 1",
        )
        .bind(mxc)
        .bind(persona.as_str())
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(upload_row).transpose()
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
        Ok(self.own_upload(persona, mxc).await?.is_some())
    }

    /// The rooms where a stored picture, file or sticker message carries `mxc` as its media
    /// (`url`, or `file.url` when encrypted), not merely in its text.
    pub async fn rooms_posting_media(&self, mxc: &str) -> Result<Vec<OwnedRoomId>> {
        let mut rooms = Vec::new();
        for (room, _) in self.media_posts(mxc).await? {
            if !rooms.contains(&room) {
                rooms.push(room);
            }
        }
        Ok(rooms)
    }

    /// The `file` object (key, IV, hash, `url`) of a stored encrypted message whose media
    /// is `mxc`: what opens a member's encrypted upload.
    pub async fn media_file(&self, mxc: &str) -> Result<Option<Value>> {
        let posts = self.media_posts(mxc).await?;
        Ok(posts.into_iter().find_map(|(_, content)| content.get("file").filter(|f| f["url"] == mxc).cloned()))
    }

    /// The stored picture, file and sticker messages whose media is `mxc`: their rooms and
    /// contents.
    async fn media_posts(&self, mxc: &str) -> Result<Vec<(OwnedRoomId, Value)>> {
        let contains = self.event_holds("$1");
        let sql = format!(
            "SELECT room_id, event FROM events WHERE event_type IN ('m.room.message', 'm.sticker') AND {contains} LIMIT 200"
        );
        let rows = sqlx::query(&sql).bind(mxc).fetch_all(&self.pool).await?;
        let mut posts = Vec::new();
        for row in rows {
            let mut event: Value = serde_json::from_str(&row.try_get::<String, _>("event")?).unwrap_or_default();
            let content = event["content"].take();
            let carries = [content.get("url"), content.pointer("/file/url")]
                .into_iter()
                .flatten()
                .any(|url| url.as_str() == Some(mxc));
            if let Ok(room) = OwnedRoomId::try_from(row.try_get::<String, _>("room_id")?)
                && carries
            {
                posts.push((room, content));
            }
        }
        Ok(posts)
    }
}

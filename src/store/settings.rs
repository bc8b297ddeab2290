//! `room_settings`: what members set for a room with commands.

use ruma::RoomId;
use sqlx::Row;

use super::{Result, Store};

impl Store {
    /// The room's answer mode (`thread`, `reply`, `flat`), if one was set.
    pub async fn room_mode(&self, room: &RoomId) -> Result<Option<String>> {
        let row = sqlx::query("SELECT mode FROM room_settings WHERE room_id = $1")
            .bind(room.as_str())
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get::<Option<String>, _>("mode")).transpose()?.flatten())
    }

    pub async fn set_room_mode(&self, room: &RoomId, mode: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO room_settings (room_id, mode) VALUES ($1, $2) ON CONFLICT (room_id) DO UPDATE SET mode = excluded.mode",
        )
        .bind(room.as_str())
        .bind(mode)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Where the room's context starts: events with a larger `seq` only.
    pub async fn reset_seq(&self, room: &RoomId) -> Result<i64> {
        let row = sqlx::query("SELECT reset_seq FROM room_settings WHERE room_id = $1")
            .bind(room.as_str())
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get("reset_seq")).transpose()?.unwrap_or(0))
    }

    /// Starts the room's context after `seq` (the `!reset` itself).
    pub async fn reset_room(&self, room: &RoomId, seq: i64) -> Result<()> {
        sqlx::query(
            "INSERT INTO room_settings (room_id, reset_seq) VALUES ($1, $2)
             ON CONFLICT (room_id) DO UPDATE SET reset_seq =
             CASE WHEN room_settings.reset_seq > excluded.reset_seq THEN room_settings.reset_seq ELSE excluded.reset_seq END",
        )
        .bind(room.as_str())
        .bind(seq)
        .execute(&self.writer)
        .await?;
        Ok(())
    }
}

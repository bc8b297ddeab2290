//! `room_encryption`: whether a room is encrypted, as its state says, and how its room key
//! is shared (rotation, history visibility); and when it was last told that a message
//! could not be read.

use ruma::RoomId;
use sqlx::Row;

use crate::store::{Result, Store};

/// When a room's outbound session is replaced (`m.room.encryption`'s rotation periods):
/// none set, the spec's defaults hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rotation {
    pub period_ms: Option<i64>,
    pub period_msgs: Option<i64>,
}

impl Rotation {
    /// The periods an `m.room.encryption` content states.
    pub fn of(content: &serde_json::Value) -> Self {
        Self {
            period_ms: content["rotation_period_ms"].as_i64(),
            period_msgs: content["rotation_period_msgs"].as_i64(),
        }
    }
}

/// A room's encryption as its state says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoomEncryption {
    /// The `m.room.encryption` algorithm; `None` while not known, empty when the room is
    /// known to be unencrypted.
    pub algorithm: Option<String>,
    pub rotation_period_ms: Option<i64>,
    pub rotation_period_msgs: Option<i64>,
    /// `m.room.history_visibility`, if known.
    pub history_visibility: Option<String>,
}

impl RoomEncryption {
    /// Whether the room is known to be encrypted.
    pub fn encrypted(&self) -> bool {
        self.algorithm.as_deref().is_some_and(|a| !a.is_empty())
    }
}

impl Store {
    /// What is known of `room`'s encryption (all `None` when nothing is).
    pub async fn room_encryption(&self, room: &RoomId) -> Result<RoomEncryption> {
        let row = sqlx::query(
            "SELECT algorithm, rotation_period_ms, rotation_period_msgs, history_visibility
             FROM room_encryption WHERE room_id = $1",
        )
        .bind(room.as_str())
        .fetch_optional(&self.pool)
        .await?;
        let Some(r) = row else { return Ok(RoomEncryption::default()) };
        Ok(RoomEncryption {
            algorithm: r.try_get("algorithm")?,
            rotation_period_ms: r.try_get("rotation_period_ms")?,
            rotation_period_msgs: r.try_get("rotation_period_msgs")?,
            history_visibility: r.try_get("history_visibility")?,
        })
    }

    /// Records `room`'s encryption state: `algorithm` empty for "not encrypted". A room
    /// known to be encrypted stays so (the spec allows no way back), whatever comes later.
    pub async fn set_room_encryption(&self, room: &RoomId, algorithm: &str, rotation: Rotation) -> Result<()> {
        sqlx::query(
            "INSERT INTO room_encryption (room_id, algorithm, rotation_period_ms, rotation_period_msgs)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (room_id) DO UPDATE SET
               algorithm = CASE WHEN excluded.algorithm = '' AND room_encryption.algorithm <> ''
                                THEN room_encryption.algorithm ELSE excluded.algorithm END,
               rotation_period_ms = CASE WHEN excluded.algorithm = '' THEN room_encryption.rotation_period_ms
                                         ELSE excluded.rotation_period_ms END,
               rotation_period_msgs = CASE WHEN excluded.algorithm = '' THEN room_encryption.rotation_period_msgs
                                           ELSE excluded.rotation_period_msgs END",
        )
        .bind(room.as_str())
        .bind(algorithm)
        .bind(rotation.period_ms)
        .bind(rotation.period_msgs)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Records `room`'s history visibility.
    pub async fn set_history_visibility(&self, room: &RoomId, visibility: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO room_encryption (room_id, history_visibility) VALUES ($1, $2)
             ON CONFLICT (room_id) DO UPDATE SET history_visibility = excluded.history_visibility",
        )
        .bind(room.as_str())
        .bind(visibility)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Whether `room` may be told now that a message could not be read: not told in the
    /// last `every_ms`. Taking the answer records the telling (atomically, so two
    /// instances do not both tell).
    pub async fn take_undecryptable_notice(&self, room: &RoomId, now: i64, every_ms: i64) -> Result<bool> {
        sqlx::query("INSERT INTO room_encryption (room_id) VALUES ($1) ON CONFLICT (room_id) DO NOTHING")
            .bind(room.as_str())
            .execute(&self.writer)
            .await?;
        let done = sqlx::query(
            "UPDATE room_encryption SET undecryptable_told_at = $2
             WHERE room_id = $1 AND (undecryptable_told_at IS NULL OR undecryptable_told_at <= $3)",
        )
        .bind(room.as_str())
        .bind(now)
        .bind(now - every_ms)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

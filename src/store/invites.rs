//! `room_inviters`, and the counts the invite limits read: how many rooms the personas
//! are joined to, in all and after one inviter's invites.

use ruma::{OwnedUserId, RoomId, UserId};
use sqlx::Row;

use super::{Result, Store};

impl Store {
    /// Remembers that `inviter` brought `persona` into `room`.
    pub async fn record_inviter(&self, room: &RoomId, persona: &UserId, inviter: &UserId, now: i64) -> Result<()> {
        sqlx::query(
            "INSERT INTO room_inviters (room_id, persona, inviter, joined_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (room_id, persona) DO UPDATE SET inviter = excluded.inviter, joined_at = excluded.joined_at",
        )
        .bind(room.as_str())
        .bind(persona.as_str())
        .bind(inviter.as_str())
        .bind(now)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Rooms a persona is still joined to after an invite from `inviter`.
    pub async fn rooms_invited_by(&self, inviter: &UserId) -> Result<u64> {
        let row = sqlx::query(
            "SELECT COUNT(DISTINCT i.room_id) AS n FROM room_inviters i
             JOIN room_members m ON m.room_id = i.room_id AND m.user_id = i.persona AND m.membership = 'join'
             WHERE i.inviter = $1",
        )
        .bind(inviter.as_str())
        .fetch_one(&self.pool)
        .await?;
        Ok(u64::try_from(row.try_get::<i64, _>("n")?).unwrap_or(0))
    }

    /// Rooms any of `personas` is joined to.
    pub async fn rooms_joined(&self, personas: &[OwnedUserId]) -> Result<u64> {
        if personas.is_empty() {
            return Ok(0);
        }
        let sql = format!(
            "SELECT COUNT(DISTINCT room_id) AS n FROM room_members WHERE membership = 'join' AND user_id IN ({})",
            super::list(1, personas.len())
        );
        let row = personas.iter().fold(sqlx::query(&sql), |q, p| q.bind(p.as_str())).fetch_one(&self.pool).await?;
        Ok(u64::try_from(row.try_get::<i64, _>("n")?).unwrap_or(0))
    }
}

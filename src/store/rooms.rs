//! `room_members` and `dm_rooms`: what we know of rooms.

use ruma::{OwnedRoomId, OwnedUserId, RoomId, UserId};

use super::{Result, Store, id};

impl Store {
    /// Replaces a room's membership with the homeserver's list of joined users.
    pub async fn set_joined_members(&self, room_id: &RoomId, joined: &[OwnedUserId]) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM room_members WHERE room_id = ?").bind(room_id.as_str()).execute(&mut *tx).await?;
        for user in joined {
            sqlx::query("INSERT INTO room_members (room_id, user_id, membership) VALUES (?, ?, 'join')")
                .bind(room_id.as_str())
                .bind(user.as_str())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Records one member event.
    pub async fn set_membership(&self, room_id: &RoomId, user_id: &UserId, membership: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO room_members (room_id, user_id, membership) VALUES (?, ?, ?)
             ON CONFLICT (room_id, user_id) DO UPDATE SET membership = excluded.membership",
        )
        .bind(room_id.as_str())
        .bind(user_id.as_str())
        .bind(membership)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Users joined to a room, as far as we know.
    pub async fn joined_members(&self, room_id: &RoomId) -> Result<Vec<OwnedUserId>> {
        let rows =
            sqlx::query("SELECT user_id FROM room_members WHERE room_id = ? AND membership = 'join' ORDER BY user_id")
                .bind(room_id.as_str())
                .fetch_all(&self.pool)
                .await?;
        rows.iter().map(|r| id(r, "user_id")).collect()
    }

    /// Rooms where both users are joined.
    pub async fn shared_rooms(&self, a: &UserId, b: &UserId) -> Result<Vec<OwnedRoomId>> {
        let rows = sqlx::query(
            "SELECT x.room_id FROM room_members x JOIN room_members y ON x.room_id = y.room_id
             WHERE x.user_id = ? AND y.user_id = ? AND x.membership = 'join' AND y.membership = 'join' ORDER BY x.room_id",
        )
        .bind(a.as_str())
        .bind(b.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| id(r, "room_id")).collect()
    }

    /// The persona's DM room with a user, if one is known.
    pub async fn dm_room(&self, persona: &UserId, user_id: &UserId) -> Result<Option<OwnedRoomId>> {
        let row = sqlx::query("SELECT room_id FROM dm_rooms WHERE persona = ? AND user_id = ?")
            .bind(persona.as_str())
            .bind(user_id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| id(&r, "room_id")).transpose()
    }

    /// Remembers the persona's DM room with a user.
    pub async fn set_dm_room(&self, persona: &UserId, user_id: &UserId, room_id: &RoomId) -> Result<()> {
        sqlx::query(
            "INSERT INTO dm_rooms (persona, user_id, room_id) VALUES (?, ?, ?)
             ON CONFLICT (persona, user_id) DO UPDATE SET room_id = excluded.room_id",
        )
        .bind(persona.as_str())
        .bind(user_id.as_str())
        .bind(room_id.as_str())
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

//! `room_members` and `dm_rooms`: what we know of rooms.
//!
//! Joined members are read on every message triaged, so `serve` keeps them in memory per
//! room (`Store::caching_members`), read from the table once and dropped whenever this
//! file changes them; every change goes through here.

use std::sync::Arc;

use ruma::{OwnedRoomId, OwnedUserId, RoomId, UserId};

use super::{Result, Store, id};

impl Store {
    /// Replaces a room's membership with the homeserver's list of joined users.
    pub async fn set_joined_members(&self, room_id: &RoomId, joined: &[OwnedUserId]) -> Result<()> {
        let mut tx = self.writer.begin().await?;
        sqlx::query("DELETE FROM room_members WHERE room_id = $1").bind(room_id.as_str()).execute(&mut *tx).await?;
        for user in joined {
            sqlx::query("INSERT INTO room_members (room_id, user_id, membership) VALUES ($1, $2, 'join')")
                .bind(room_id.as_str())
                .bind(user.as_str())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        self.refresh_members(room_id).await
    }

    /// Records one member event.
    pub async fn set_membership(&self, room_id: &RoomId, user_id: &UserId, membership: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO room_members (room_id, user_id, membership) VALUES ($1, $2, $3)
             ON CONFLICT (room_id, user_id) DO UPDATE SET membership = excluded.membership",
        )
        .bind(room_id.as_str())
        .bind(user_id.as_str())
        .bind(membership)
        .execute(&self.writer)
        .await?;
        self.refresh_members(room_id).await
    }

    /// Users joined to a room, as far as we know.
    pub async fn joined_members(&self, room_id: &RoomId) -> Result<Arc<[OwnedUserId]>> {
        let generation = match self.cached_members() {
            Some(cache) => match cache.rooms.get(room_id) {
                Some(known) => return Ok(known.clone()),
                None => Some(cache.generation),
            },
            None => None,
        };
        let rows =
            sqlx::query("SELECT user_id FROM room_members WHERE room_id = $1 AND membership = 'join' ORDER BY user_id")
                .bind(room_id.as_str())
                .fetch_all(&self.pool)
                .await?;
        let joined: Arc<[OwnedUserId]> = rows.iter().map(|r| id(r, "user_id")).collect::<Result<_>>()?;
        // A change committed while this read ran bumped the generation: then what was
        // read may be old, and is not kept.
        if let Some(mut cache) = self.cached_members()
            && Some(cache.generation) == generation
        {
            cache.rooms.insert(room_id.to_owned(), joined.clone());
        }
        Ok(joined)
    }

    /// The joined members of a room if they are in memory (see `caching_members`), without
    /// a query: for decisions that must not wait.
    pub fn known_members(&self, room_id: &RoomId) -> Option<Arc<[OwnedUserId]>> {
        self.cached_members()?.rooms.get(room_id).cloned()
    }

    /// Rooms where any of `users` has a membership of any kind (for the inbox: rooms whose
    /// events need a worker).
    pub async fn rooms_of(&self, users: &[OwnedUserId]) -> Result<Vec<OwnedRoomId>> {
        let mut rooms = std::collections::BTreeSet::new();
        for chunk in users.chunks(super::LIST_CHUNK) {
            let sql =
                format!("SELECT DISTINCT room_id FROM room_members WHERE user_id IN ({})", super::list(1, chunk.len()));
            let rows = chunk
                .iter()
                .fold(sqlx::query(&self.many_params(&sql)), |q, u| q.bind(u.as_str()))
                .fetch_all(&self.pool)
                .await?;
            for row in &rows {
                rooms.insert(id(row, "room_id")?);
            }
        }
        Ok(rooms.into_iter().collect())
    }

    /// The rooms `user` is joined to, as far as richbot knows.
    pub async fn joined_rooms(&self, user: &UserId) -> Result<Vec<OwnedRoomId>> {
        let rows = sqlx::query("SELECT room_id FROM room_members WHERE user_id = $1 AND membership = 'join'")
            .bind(user.as_str())
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| id(r, "room_id")).collect()
    }

    fn cached_members(&self) -> Option<std::sync::MutexGuard<'_, Members>> {
        Some(self.members.as_ref()?.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// After a change: the old entry is dropped, and read anew (when members are kept in
    /// memory), so the inbox's door knows the room at once.
    async fn refresh_members(&self, room_id: &RoomId) -> Result<()> {
        if self.members.is_some() {
            self.forget_members(room_id);
            self.joined_members(room_id).await?;
        }
        Ok(())
    }

    /// Reads the joined members of `rooms` into memory in one query (at start, for the
    /// rooms the personas are in).
    pub async fn warm_members(&self, rooms: &[OwnedRoomId]) -> Result<()> {
        let Some(generation) = self.cached_members().map(|c| c.generation) else { return Ok(()) };
        let mut found: std::collections::HashMap<OwnedRoomId, Vec<OwnedUserId>> = std::collections::HashMap::new();
        for chunk in rooms.chunks(super::LIST_CHUNK) {
            let sql = format!(
                "SELECT room_id, user_id FROM room_members WHERE membership = 'join' AND room_id IN ({})
                 ORDER BY room_id, user_id",
                super::list(1, chunk.len())
            );
            let rows = chunk
                .iter()
                .fold(sqlx::query(&self.many_params(&sql)), |q, r| q.bind(r.as_str()))
                .fetch_all(&self.pool)
                .await?;
            for row in &rows {
                found.entry(id(row, "room_id")?).or_default().push(id(row, "user_id")?);
            }
        }
        if let Some(mut cache) = self.cached_members()
            && cache.generation == generation
        {
            for room in rooms {
                let joined = found.remove(room).unwrap_or_default();
                cache.rooms.insert(room.clone(), joined.into());
            }
        }
        Ok(())
    }

    fn forget_members(&self, room_id: &RoomId) {
        if let Some(mut cache) = self.cached_members() {
            cache.rooms.remove(room_id);
            cache.generation += 1;
        }
    }

    /// Users joined to a room, and (`invited` true) those invited: who may read what is
    /// sent there, for an encrypted room's key.
    pub async fn readers(&self, room_id: &RoomId, invited: bool) -> Result<Vec<OwnedUserId>> {
        let rows = sqlx::query(
            "SELECT user_id FROM room_members WHERE room_id = $1 AND (membership = 'join' OR (membership = 'invite' AND $2 = 1))
             ORDER BY user_id",
        )
        .bind(room_id.as_str())
        .bind(i64::from(invited))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| id(r, "user_id")).collect()
    }

    /// Rooms where both users are joined. `b`'s rooms drive the search (one primary-key
    /// look-up for `a` in each): `b` is the asker, in few rooms, and `a` the persona, who
    /// may be in thousands. As a join, SQLite walked all of the persona's rooms instead
    /// (0.39 ms a turn with 1,000 DMs, in `cargo bench --bench pipeline -- turns`).
    pub async fn shared_rooms(&self, a: &UserId, b: &UserId) -> Result<Vec<OwnedRoomId>> {
        let rows = sqlx::query(
            "SELECT y.room_id FROM room_members y WHERE y.user_id = $2 AND y.membership = 'join'
             AND EXISTS (SELECT 1 FROM room_members x WHERE x.room_id = y.room_id AND x.user_id = $1 AND x.membership = 'join')
             ORDER BY y.room_id",
        )
        .bind(a.as_str())
        .bind(b.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| id(r, "room_id")).collect()
    }

    /// The persona's DM room with a user, if one is known.
    pub async fn dm_room(&self, persona: &UserId, user_id: &UserId) -> Result<Option<OwnedRoomId>> {
        let row = sqlx::query("SELECT room_id FROM dm_rooms WHERE persona = $1 AND user_id = $2")
            .bind(persona.as_str())
            .bind(user_id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| id(&r, "room_id")).transpose()
    }

    /// The users whose DM room with the persona `room` is (its latest one for each).
    pub async fn dm_partners(&self, persona: &UserId, room: &RoomId) -> Result<Vec<OwnedUserId>> {
        let rows = sqlx::query("SELECT user_id FROM dm_rooms WHERE persona = $1 AND room_id = $2")
            .bind(persona.as_str())
            .bind(room.as_str())
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| id(r, "user_id")).collect()
    }

    /// Remembers the persona's DM room with a user.
    pub async fn set_dm_room(&self, persona: &UserId, user_id: &UserId, room_id: &RoomId) -> Result<()> {
        sqlx::query(
            "INSERT INTO dm_rooms (persona, user_id, room_id) VALUES ($1, $2, $3)
             ON CONFLICT (persona, user_id) DO UPDATE SET room_id = excluded.room_id",
        )
        .bind(persona.as_str())
        .bind(user_id.as_str())
        .bind(room_id.as_str())
        .execute(&self.writer)
        .await?;
        Ok(())
    }
}

/// The joined members known per room, and a count of changes (see `joined_members`).
#[derive(Debug, Default)]
pub(super) struct Members {
    rooms: std::collections::HashMap<OwnedRoomId, Arc<[OwnedUserId]>>,
    generation: u64,
}

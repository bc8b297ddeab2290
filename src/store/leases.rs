//! Room leases: which instance handles a room now, when several share one PostgreSQL.
//!
//! A lease is claimed with one conditional upsert (the row is inserted, or taken over if it
//! expired, or extended if the claimer holds it already), which both databases run
//! atomically: PostgreSQL locks the conflicting row for the `ON CONFLICT DO UPDATE`, and
//! re-checks its `WHERE` on the row as committed, so of two instances claiming a room at
//! once exactly one gets it back. Its holder renews it while it works and deletes it when
//! the step ends; a holder that dies stops renewing, and the lease runs out. On PostgreSQL
//! a lease also ends as soon as its holder's session does (`session`: the backend of its
//! `serve` lock connection, `lock.rs`): a killed process's connections close with it, so
//! its rooms are free at once; only a holder that hangs, or whose machine or network is
//! gone, is waited out.
//!
//! The other half of sharing the work: which rooms have work that no live instance holds
//! (events waiting, or a turn a dead instance left running), for an instance to poll; and
//! what the inbox's door must read from the database instead of process memory
//! ([`RoomFacts`]).

use ruma::{OwnedRoomId, OwnedUserId, RoomId};
use sqlx::Row;

use super::{Backend, Result, Store, id, list};

/// A room as the inbox's door sees it among several instances (`Store::door_facts`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomFacts {
    pub room: OwnedRoomId,
    /// Events of it wait, or are in a worker's hands (not yet marked processed).
    pub busy: bool,
    /// The personas (of those asked about) joined to it.
    pub personas: Vec<OwnedUserId>,
    /// How many members are joined (counted only when it is idle).
    pub joined: i64,
}

impl Store {
    /// Claims `room` for `holder` (whose `serve` lock connection is PostgreSQL backend
    /// `session`) until `now + lease_ms`, if no one else holds a live lease on it. Returns
    /// whether `holder` has it.
    pub async fn claim_room(
        &self,
        room: &RoomId,
        holder: &str,
        session: Option<i64>,
        now: i64,
        lease_ms: i64,
    ) -> Result<bool> {
        let sql = format!(
            "INSERT INTO room_leases (room_id, holder, session, expires_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (room_id) DO UPDATE
             SET holder = excluded.holder, session = excluded.session, expires_at = excluded.expires_at
             WHERE room_leases.holder = excluded.holder OR NOT ({})
             RETURNING holder",
            self.live("room_leases", "$5")
        );
        let row = sqlx::query(&sql)
            .bind(room.as_str())
            .bind(holder)
            .bind(session)
            .bind(now + lease_ms)
            .bind(now)
            .fetch_optional(&self.writer)
            .await?;
        Ok(row.is_some())
    }

    /// The SQL condition "the lease `table` is live at `now`": not expired, and on
    /// PostgreSQL its holder's session still there.
    pub(super) fn live(&self, table: &str, now: &str) -> String {
        match self.backend {
            Backend::Sqlite => format!("{table}.expires_at > {now}"),
            Backend::Postgres => format!(
                "{table}.expires_at > {now} AND ({table}.session IS NULL
                 OR EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = {table}.session))"
            ),
        }
    }

    /// Extends every lease `holder` has to `now + lease_ms`, naming its `session` now;
    /// returns how many it has.
    pub async fn renew_leases(&self, holder: &str, session: Option<i64>, now: i64, lease_ms: i64) -> Result<u64> {
        let done = sqlx::query("UPDATE room_leases SET expires_at = $1, session = $3 WHERE holder = $2")
            .bind(now + lease_ms)
            .bind(holder)
            .bind(session)
            .execute(&self.writer)
            .await?;
        // The crypto leases it holds now name the session too (they are renewed by their
        // own holders, so only the session moves).
        sqlx::query("UPDATE crypto_leases SET session = $1 WHERE holder = $2 AND expires_at > $3")
            .bind(session)
            .bind(holder)
            .bind(now)
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected())
    }

    /// Whether PostgreSQL still has backend `session` (always, on SQLite).
    pub async fn session_alive(&self, session: i64) -> Result<bool> {
        if self.backend != Backend::Postgres {
            return Ok(true);
        }
        let row = sqlx::query("SELECT 1 AS alive FROM pg_stat_activity WHERE pid = $1")
            .bind(session)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }

    /// Gives `room` up, if `holder` has it.
    pub async fn release_room(&self, room: &RoomId, holder: &str) -> Result<()> {
        sqlx::query("DELETE FROM room_leases WHERE room_id = $1 AND holder = $2")
            .bind(room.as_str())
            .bind(holder)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Gives up every room `holder` has (a stopping instance, so others need not wait for
    /// its leases to run out).
    pub async fn release_all(&self, holder: &str) -> Result<u64> {
        let done = sqlx::query("DELETE FROM room_leases WHERE holder = $1").bind(holder).execute(&self.writer).await?;
        Ok(done.rows_affected())
    }

    /// Rooms with work that no unexpired lease covers at `now`: events waiting (or claimed
    /// by a turn still running), oldest first.
    pub async fn unleased_work(&self, now: i64) -> Result<Vec<OwnedRoomId>> {
        let sql = format!(
            "SELECT e.room_id, MIN(e.seq) AS first FROM events e
             WHERE e.processed = 0
               AND NOT EXISTS (SELECT 1 FROM room_leases l WHERE l.room_id = e.room_id AND {})
             GROUP BY e.room_id ORDER BY first",
            self.live("l", "$1")
        );
        let rows = sqlx::query(&sql).bind(now).fetch_all(&self.pool).await?;
        rows.iter().map(|r| id(r, "room_id")).collect()
    }

    /// What the inbox's door needs to know of `rooms` among several instances, for those
    /// a worker must see (see [`RoomFacts`]): a member of `users` (the personas) has or had
    /// a membership there, or events wait there (a membership not applied yet among them).
    pub async fn door_facts(&self, rooms: &[OwnedRoomId], users: &[OwnedUserId]) -> Result<Vec<RoomFacts>> {
        let mut facts: Vec<RoomFacts> = Vec::new();
        for chunk in rooms.chunks(super::LIST_CHUNK / 2) {
            let n = chunk.len();
            let fact = |facts: &mut Vec<RoomFacts>, room: OwnedRoomId| -> usize {
                match facts.iter().position(|f| f.room == room) {
                    Some(i) => i,
                    None => {
                        facts.push(RoomFacts { room, busy: false, personas: Vec::new(), joined: 0 });
                        facts.len() - 1
                    }
                }
            };
            let sql = format!(
                "SELECT room_id, user_id, membership FROM room_members WHERE room_id IN ({}) AND user_id IN ({})",
                list(1, n),
                list(n + 1, users.len().max(1)),
            );
            let query = chunk.iter().fold(sqlx::query(&sql), |q, r| q.bind(r.as_str()));
            let query = match users {
                [] => query.bind(""),
                _ => users.iter().fold(query, |q, u| q.bind(u.as_str())),
            };
            for row in query.fetch_all(&self.pool).await? {
                let i = fact(&mut facts, id(&row, "room_id")?);
                if row.try_get::<String, _>("membership")? == "join" {
                    facts[i].personas.push(id(&row, "user_id")?);
                }
            }
            let sql =
                format!("SELECT DISTINCT room_id FROM events WHERE processed = 0 AND room_id IN ({})", list(1, n));
            for row in chunk.iter().fold(sqlx::query(&sql), |q, r| q.bind(r.as_str())).fetch_all(&self.pool).await? {
                let i = fact(&mut facts, id(&row, "room_id")?);
                facts[i].busy = true;
            }
            // Members are counted only where the door may settle: watched, idle rooms.
            let idle: Vec<&OwnedRoomId> =
                facts.iter().filter(|f| !f.busy && chunk.contains(&f.room)).map(|f| &f.room).collect();
            if idle.is_empty() {
                continue;
            }
            let sql = format!(
                "SELECT room_id, CAST(COUNT(*) AS BIGINT) AS n FROM room_members
                 WHERE membership = 'join' AND room_id IN ({}) GROUP BY room_id",
                list(1, idle.len())
            );
            let rows = idle.iter().fold(sqlx::query(&sql), |q, r| q.bind(r.as_str())).fetch_all(&self.pool).await?;
            for row in rows {
                let i = fact(&mut facts, id(&row, "room_id")?);
                facts[i].joined = row.try_get("n")?;
            }
        }
        Ok(facts)
    }

    /// Who holds `room`'s lease, and until when (for tests and operators).
    pub async fn room_lease(&self, room: &RoomId) -> Result<Option<(String, i64)>> {
        let row = sqlx::query("SELECT holder, expires_at FROM room_leases WHERE room_id = $1")
            .bind(room.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| Ok((r.try_get("holder")?, r.try_get("expires_at")?))).transpose()
    }

    /// Whether `holder` still holds a live lease on the room of `turn` at `now`: the fence
    /// an instance checks before each write and tool call, so one frozen past its lease
    /// (whose room another instance took over) does nothing more there.
    pub async fn holds_turn_room(&self, turn: i64, holder: &str, now: i64) -> Result<bool> {
        let sql = format!(
            "SELECT 1 AS one FROM room_leases JOIN turns t ON t.room_id = room_leases.room_id
             WHERE t.id = $1 AND room_leases.holder = $2 AND {}",
            self.live("room_leases", "$3")
        );
        let row = sqlx::query(&sql).bind(turn).bind(holder).bind(now).fetch_optional(&self.writer).await?;
        Ok(row.is_some())
    }
}

//! `schedules` and `user_settings`: the members' schedules (what, when, where, for whom,
//! and the next occurrence still to fire), and each member's time zone. What a schedule's
//! `body` and times mean is the schedules module's; here they are columns.

use ruma::{OwnedRoomId, OwnedUserId, RoomId, UserId};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Result, Store, id};

/// A schedule as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleRow {
    pub id: i64,
    /// What made it (`turn:...` a model's call, `agent:<client>:...` an agent client's).
    pub origin: String,
    pub room_id: OwnedRoomId,
    pub persona: OwnedUserId,
    pub asker: OwnedUserId,
    pub title: Option<String>,
    /// `message` or `prompt`, and its JSON.
    pub kind: String,
    pub body: String,
    pub at_ms: Option<i64>,
    pub rrule: Option<String>,
    pub tz: String,
    pub start_ms: Option<i64>,
    pub next_at: Option<i64>,
    /// `active`, `done`, `cancelled` or `stopped`.
    pub state: String,
    pub fired: i64,
    pub created_at: i64,
    /// The agents' client that made it (`None`: a member, through a turn).
    pub client: Option<String>,
    /// Its occurrences that failed to be posted, in a row.
    pub failures: i64,
}

/// A schedule to make; `origin` names what makes it (a repeat of it makes none).
#[derive(Debug, Clone, Copy)]
pub struct NewScheduleRow<'a> {
    pub origin: &'a str,
    pub room_id: &'a RoomId,
    pub persona: &'a UserId,
    pub asker: &'a UserId,
    pub title: Option<&'a str>,
    pub kind: &'a str,
    pub body: &'a str,
    pub at_ms: Option<i64>,
    pub rrule: Option<&'a str>,
    pub tz: &'a str,
    pub start_ms: Option<i64>,
    pub next_at: i64,
    pub created_at: i64,
    /// The agents' client making it; its schedules are bounded apart from the persona's
    /// members' and from other clients'.
    pub client: Option<&'a str>,
}

/// Why a schedule was not made: a bound, with its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    PerUser(u32),
    PerRoom(u32),
}

const COLUMNS: &str = "id, origin, room_id, persona, asker, title, kind, body, at_ms, rrule, tz, start_ms, next_at, state, \
                       fired, created_at, client, failures";

fn parse(row: &AnyRow) -> Result<ScheduleRow> {
    Ok(ScheduleRow {
        id: row.try_get("id")?,
        origin: row.try_get("origin")?,
        room_id: id(row, "room_id")?,
        persona: id(row, "persona")?,
        asker: id(row, "asker")?,
        title: row.try_get("title")?,
        kind: row.try_get("kind")?,
        body: row.try_get("body")?,
        at_ms: row.try_get("at_ms")?,
        rrule: row.try_get("rrule")?,
        tz: row.try_get("tz")?,
        start_ms: row.try_get("start_ms")?,
        next_at: row.try_get("next_at")?,
        state: row.try_get("state")?,
        fired: row.try_get("fired")?,
        created_at: row.try_get("created_at")?,
        client: row.try_get("client")?,
        failures: row.try_get("failures")?,
    })
}

impl Store {
    /// Makes a schedule, unless its asker has `per_user` or its room `per_room` active
    /// ones already. A repeat of the same `origin` returns the first one's id.
    pub async fn create_schedule(
        &self,
        s: &NewScheduleRow<'_>,
        per_user: u32,
        per_room: u32,
    ) -> Result<Result<i64, Over>> {
        let mut tx = self.writer.begin().await?;
        let made =
            sqlx::query("SELECT id FROM schedules WHERE origin = $1").bind(s.origin).fetch_optional(&mut *tx).await?;
        if let Some(row) = made {
            return Ok(Ok(row.try_get("id")?));
        }
        // Whose bound: an agents' client's own, or the member's (their schedules through
        // turns); clients of one persona do not share one.
        let (owner, whose) = match s.client {
            Some(client) => ("client = $1", client),
            None => ("asker = $1 AND client IS NULL", s.asker.as_str()),
        };
        let count = |whose: &str| format!("SELECT COUNT(*) AS n FROM schedules WHERE {whose} AND state = 'active'");
        let mine: i64 = sqlx::query(&count(owner)).bind(whose).fetch_one(&mut *tx).await?.try_get("n")?;
        if mine >= i64::from(per_user) {
            return Ok(Err(Over::PerUser(per_user)));
        }
        let here: i64 =
            sqlx::query(&count("room_id = $1")).bind(s.room_id.as_str()).fetch_one(&mut *tx).await?.try_get("n")?;
        if here >= i64::from(per_room) {
            return Ok(Err(Over::PerRoom(per_room)));
        }
        let row = sqlx::query(
            "INSERT INTO schedules (origin, room_id, persona, asker, title, kind, body, at_ms, rrule, tz, start_ms,
             next_at, state, created_at, client) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'active',
             $13, $14) RETURNING id",
        )
        .bind(s.origin)
        .bind(s.room_id.as_str())
        .bind(s.persona.as_str())
        .bind(s.asker.as_str())
        .bind(s.title)
        .bind(s.kind)
        .bind(s.body)
        .bind(s.at_ms)
        .bind(s.rrule)
        .bind(s.tz)
        .bind(s.start_ms)
        .bind(s.next_at)
        .bind(s.created_at)
        .bind(s.client)
        .fetch_one(&mut *tx)
        .await?;
        let id = row.try_get("id")?;
        tx.commit().await?;
        Ok(Ok(id))
    }

    pub async fn schedule(&self, id: i64) -> Result<Option<ScheduleRow>> {
        let sql = format!("SELECT {COLUMNS} FROM schedules WHERE id = $1");
        sqlx::query(&sql).bind(id).fetch_optional(&self.writer).await?.as_ref().map(parse).transpose()
    }

    /// Active schedules, oldest first: `asker`'s (all of them, or in `room`), or (no
    /// asker) everyone's in `room`.
    pub async fn active_schedules(&self, asker: Option<&UserId>, room: Option<&RoomId>) -> Result<Vec<ScheduleRow>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM schedules WHERE state = 'active' AND ($1 = '' OR asker = $1)
             AND ($2 = '' OR room_id = $2) ORDER BY id LIMIT 200"
        );
        let rows = sqlx::query(&sql)
            .bind(asker.map_or("", |a| a.as_str()))
            .bind(room.map_or("", |r| r.as_str()))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(parse).collect()
    }

    /// Active schedules whose next occurrence is at or before `now`, first due first.
    pub async fn due_schedules(&self, now: i64) -> Result<Vec<ScheduleRow>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM schedules WHERE state = 'active' AND next_at <= $1 ORDER BY next_at LIMIT 100"
        );
        sqlx::query(&sql).bind(now).fetch_all(&self.writer).await?.iter().map(parse).collect()
    }

    /// When the next active schedule is due.
    pub async fn next_schedule_at(&self) -> Result<Option<i64>> {
        let row = sqlx::query("SELECT MIN(next_at) AS at FROM schedules WHERE state = 'active'")
            .fetch_one(&self.writer)
            .await?;
        Ok(row.try_get("at")?)
    }

    /// Moves schedule `id` from the occurrence `from` on to `next` (none: it is done), a
    /// recurrence's start to `start` when given, counting `fired`; `false` when another
    /// instance moved it first.
    pub async fn advance_schedule(
        &self,
        id: i64,
        from: i64,
        start: Option<i64>,
        next: Option<i64>,
        fired: bool,
        now: i64,
    ) -> Result<bool> {
        let (state, ended_at) = if next.is_none() { ("done", Some(now)) } else { ("active", None) };
        let result = sqlx::query(
            "UPDATE schedules SET next_at = $1, fired = fired + $2, state = $3, ended_at = $4,
             start_ms = COALESCE($7, start_ms) WHERE id = $5 AND next_at = $6 AND state = 'active'",
        )
        .bind(next)
        .bind(i64::from(fired))
        .bind(state)
        .bind(ended_at)
        .bind(id)
        .bind(from)
        .bind(start)
        .execute(&self.writer)
        .await?;
        Ok(result.rows_affected() == 1)
    }

    /// Ends schedule `id` with why: `cancelled` (an active one), or `stopped` (an active
    /// one, or a one-off whose occurrence has fired but not been carried out); `false`
    /// when it was neither.
    pub async fn end_schedule(&self, id: i64, state: &str, why: &str, now: i64) -> Result<bool> {
        let from = if state == "stopped" { "('active', 'done')" } else { "('active')" };
        let sql =
            format!("UPDATE schedules SET state = $1, ended_why = $2, ended_at = $3 WHERE id = $4 AND state IN {from}");
        let result = sqlx::query(&sql).bind(state).bind(why).bind(now).bind(id).execute(&self.writer).await?;
        Ok(result.rows_affected() == 1)
    }

    /// An occurrence of schedule `id` was posted: its failures in a row start again.
    pub async fn schedule_posted(&self, id: i64) -> Result<()> {
        sqlx::query("UPDATE schedules SET failures = 0 WHERE id = $1 AND failures <> 0")
            .bind(id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// An occurrence of schedule `id` could not be posted: how many have failed in a row.
    pub async fn schedule_post_failed(&self, id: i64) -> Result<i64> {
        let row = sqlx::query("UPDATE schedules SET failures = failures + 1 WHERE id = $1 RETURNING failures")
            .bind(id)
            .fetch_optional(&self.writer)
            .await?;
        Ok(row.map(|r| r.try_get("failures")).transpose()?.unwrap_or(0))
    }

    /// How many schedules are active.
    pub async fn count_active_schedules(&self) -> Result<i64> {
        let row =
            sqlx::query("SELECT COUNT(*) AS n FROM schedules WHERE state = 'active'").fetch_one(&self.pool).await?;
        Ok(row.try_get("n")?)
    }

    /// A member's time zone, if they set one.
    pub async fn user_timezone(&self, user: &UserId) -> Result<Option<String>> {
        let row = sqlx::query("SELECT timezone FROM user_settings WHERE user_id = $1")
            .bind(user.as_str())
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get("timezone")).transpose()?.flatten())
    }

    pub async fn set_user_timezone(&self, user: &UserId, tz: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO user_settings (user_id, timezone) VALUES ($1, $2)
             ON CONFLICT (user_id) DO UPDATE SET timezone = excluded.timezone",
        )
        .bind(user.as_str())
        .bind(tz)
        .execute(&self.writer)
        .await?;
        Ok(())
    }
}

//! `polls`: the personas' polls, which are open and when each ends; and the votes on one,
//! read from the room's stored events.

use ruma::{OwnedEventId, OwnedRoomId, OwnedUserId, RoomId};
use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Error, Result, Store};

/// A poll as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollRow {
    pub id: i64,
    pub event_id: OwnedEventId,
    pub room_id: OwnedRoomId,
    pub persona: OwnedUserId,
    pub question: String,
    pub answers: Vec<String>,
    pub disclosed: bool,
    pub created_at: i64,
    pub end_at: Option<i64>,
    pub ended_at: Option<i64>,
    /// The message that shows the poll in every client (none for polls started before
    /// there was one).
    pub text_event_id: Option<OwnedEventId>,
}

/// A poll to record, once its start event is sent.
#[derive(Debug, Clone, Copy)]
pub struct NewPoll<'a> {
    pub event_id: &'a ruma::EventId,
    pub room_id: &'a RoomId,
    pub persona: &'a ruma::UserId,
    pub question: &'a str,
    pub answers: &'a [String],
    pub disclosed: bool,
    pub created_at: i64,
    pub end_at: Option<i64>,
    /// The message that shows the poll in every client.
    pub text_event_id: &'a ruma::EventId,
}

/// A member's vote by a reply with a number, as it arrived.
#[derive(Debug, Clone, Copy)]
pub struct PollReply<'a> {
    pub event_id: &'a ruma::EventId,
    pub poll_id: i64,
    pub sender: &'a ruma::UserId,
    pub origin_ts: i64,
    pub answer: &'a str,
}

const COLUMNS: &str =
    "id, event_id, room_id, persona, question, answers, disclosed, created_at, end_at, ended_at, text_event_id";

fn parse(row: &AnyRow) -> Result<PollRow> {
    let id = |column: &'static str| -> Result<String> { Ok(row.try_get::<String, _>(column)?) };
    let bad = |column: &'static str, value: String| Error::BadId { column, value };
    let answers: String = row.try_get("answers")?;
    Ok(PollRow {
        id: row.try_get("id")?,
        event_id: OwnedEventId::try_from(id("event_id")?).map_err(|e| bad("event_id", e.to_string()))?,
        room_id: OwnedRoomId::try_from(id("room_id")?).map_err(|e| bad("room_id", e.to_string()))?,
        persona: OwnedUserId::try_from(id("persona")?).map_err(|e| bad("persona", e.to_string()))?,
        question: row.try_get("question")?,
        answers: serde_json::from_str(&answers).unwrap_or_default(),
        disclosed: row.try_get::<i64, _>("disclosed")? != 0,
        created_at: row.try_get("created_at")?,
        end_at: row.try_get("end_at")?,
        ended_at: row.try_get("ended_at")?,
        text_event_id: row
            .try_get::<Option<String>, _>("text_event_id")?
            .map(|t| OwnedEventId::try_from(t).map_err(|e| bad("text_event_id", e.to_string())))
            .transpose()?,
    })
}

impl Store {
    /// Records a poll (once: a replayed start finds its row).
    pub async fn record_poll(&self, p: &NewPoll<'_>) -> Result<()> {
        sqlx::query(
            "INSERT INTO polls (event_id, room_id, persona, question, answers, disclosed, created_at, end_at, text_event_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (event_id) DO NOTHING",
        )
        .bind(p.event_id.as_str())
        .bind(p.room_id.as_str())
        .bind(p.persona.as_str())
        .bind(p.question)
        .bind(serde_json::to_string(p.answers).unwrap_or_default())
        .bind(i64::from(p.disclosed))
        .bind(p.created_at)
        .bind(p.end_at)
        .bind(p.text_event_id.as_str())
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// The poll started by `event`, if it is one of the personas'.
    pub async fn poll(&self, event: &ruma::EventId) -> Result<Option<PollRow>> {
        let sql = format!("SELECT {COLUMNS} FROM polls WHERE event_id = $1");
        sqlx::query(&sql).bind(event.as_str()).fetch_optional(&self.writer).await?.as_ref().map(parse).transpose()
    }

    /// The open poll of `room` that `message` is (its start) or shows (its text), if any.
    pub async fn open_poll_of(&self, room: &RoomId, message: &ruma::EventId) -> Result<Option<PollRow>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM polls WHERE room_id = $1 AND (event_id = $2 OR text_event_id = $2)
             AND ended_at IS NULL"
        );
        let row = sqlx::query(&sql).bind(room.as_str()).bind(message.as_str()).fetch_optional(&self.pool).await?;
        row.as_ref().map(parse).transpose()
    }

    /// Records a vote by a reply with a number (once: a replayed event finds its row).
    pub async fn record_poll_reply(&self, r: &PollReply<'_>) -> Result<()> {
        sqlx::query(
            "INSERT INTO poll_replies (event_id, poll_id, sender, origin_ts, answer) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (event_id) DO NOTHING",
        )
        .bind(r.event_id.as_str())
        .bind(r.poll_id)
        .bind(r.sender.as_str())
        .bind(r.origin_ts)
        .bind(r.answer)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Each member's latest vote by reply on poll `id` within `span` (ms, inclusive;
    /// `None` is open): sender, `origin_server_ts`, answer id.
    pub async fn poll_reply_votes(&self, id: i64, from: i64, until: Option<i64>) -> Result<Vec<(String, i64, String)>> {
        let rows = sqlx::query(
            "SELECT sender, origin_ts, answer FROM (
               SELECT sender, origin_ts, answer,
                 ROW_NUMBER() OVER (PARTITION BY sender ORDER BY origin_ts DESC, event_id DESC) AS latest
               FROM poll_replies WHERE poll_id = $1 AND origin_ts >= $2 AND origin_ts <= $3
             ) replies WHERE latest = 1 ORDER BY sender",
        )
        .bind(id)
        .bind(from)
        .bind(until.unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok((r.try_get("sender")?, r.try_get("origin_ts")?, r.try_get("answer")?))).collect()
    }

    /// `persona`'s latest `n` polls in `room` that are open or ended after `since` (ms),
    /// newest first.
    pub async fn room_polls(&self, room: &RoomId, persona: &ruma::UserId, since: i64, n: i64) -> Result<Vec<PollRow>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM polls WHERE room_id = $1 AND persona = $2 AND (ended_at IS NULL OR ended_at >= $3)
             ORDER BY id DESC LIMIT $4"
        );
        let rows = sqlx::query(&sql).bind(room.as_str()).bind(persona.as_str()).bind(since).bind(n);
        rows.fetch_all(&self.pool).await?.iter().map(parse).collect()
    }

    /// Open polls whose end is due at `now`, not claimed by another instance.
    pub async fn due_polls(&self, now: i64) -> Result<Vec<PollRow>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM polls WHERE ended_at IS NULL AND end_at <= $1
             AND (claim_until IS NULL OR claim_until < $1) ORDER BY end_at LIMIT 50"
        );
        sqlx::query(&sql).bind(now).fetch_all(&self.writer).await?.iter().map(parse).collect()
    }

    /// When the next open poll is due to end (or its claim runs out), if any is.
    pub async fn next_poll_end(&self) -> Result<Option<i64>> {
        let row = sqlx::query(
            "SELECT MIN(CASE WHEN claim_until > end_at THEN claim_until ELSE end_at END) AS n
             FROM polls WHERE ended_at IS NULL AND end_at IS NOT NULL",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get("n")?)
    }

    /// Claims poll `id`'s ending until `until` (ms); false if another instance holds it.
    pub async fn claim_poll_end(&self, id: i64, now: i64, until: i64) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE polls SET claim_until = $1 WHERE id = $2 AND ended_at IS NULL AND (claim_until IS NULL OR claim_until < $3)",
        )
        .bind(until)
        .bind(id)
        .bind(now)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records that poll `id` ended at `at` (ms).
    pub async fn poll_ended(&self, id: i64, at: i64) -> Result<()> {
        sqlx::query("UPDATE polls SET ended_at = $1 WHERE id = $2 AND ended_at IS NULL")
            .bind(at)
            .bind(id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// The stored events of `room` that may be votes on `poll`: each sender's latest one
    /// sent within `span` (ms, inclusive; `None` is open), with its type, sender,
    /// `origin_server_ts` and content; `polls::vote_of` tells which are votes. One row per
    /// sender, chosen in SQL: a member who sends thousands of responses still counts once,
    /// and never hides anyone else's.
    pub async fn poll_responses(
        &self,
        room: &RoomId,
        poll: &ruma::EventId,
        from: i64,
        until: Option<i64>,
    ) -> Result<Vec<(String, String, i64, Value)>> {
        let contains = self.event_holds("$2");
        let sql = format!(
            "SELECT event_type, sender, origin_ts, event FROM (
               SELECT event_type, sender, origin_ts, event,
                 ROW_NUMBER() OVER (PARTITION BY sender ORDER BY origin_ts DESC, seq DESC) AS latest
               FROM events WHERE room_id = $1 AND {contains}
               AND event_type IN ('org.matrix.msc3381.poll.response', 'm.poll.response')
               AND origin_ts >= $3 AND origin_ts <= $4
             ) responses WHERE latest = 1 ORDER BY sender"
        );
        let rows = sqlx::query(&sql)
            .bind(room.as_str())
            .bind(poll.as_str())
            .bind(from)
            .bind(until.unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                let event: Value = serde_json::from_str(&r.try_get::<String, _>("event")?).unwrap_or_default();
                Ok((r.try_get("event_type")?, r.try_get("sender")?, r.try_get("origin_ts")?, event["content"].clone()))
            })
            .collect()
    }
}

//! `turns`: one row per LLM turn, and the claim of the events it answers.

use ruma::{EventId, OwnedRoomId, OwnedUserId, RoomId, UserId};
use sqlx::Row;

use super::events::COLUMNS;
use super::{Result, Store, StoredEvent, id};

/// A turn that was started (and, if found at start-up, cut short).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnRow {
    pub id: i64,
    pub room_id: OwnedRoomId,
    pub persona: OwnedUserId,
    pub asker: OwnedUserId,
    /// For a turn that only posts a notice: the notice, and the outcome it ends with.
    pub notice: Option<Notice>,
    /// When the turn started (ms): delivery is given up some time after.
    pub started_at: i64,
    /// Read back from the store (a turn a crash or a stop cut short), not just started:
    /// only such a turn can have recorded replies to replay.
    pub resumed: bool,
}

/// The one message of a notice-only turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The turn's outcome once posted, as text.
    pub outcome: String,
    pub text: String,
}

/// What a finished turn records. `outcome` is the turn's `Outcome` as text (the turn
/// stage owns that type; the store only keeps it).
#[derive(Debug, Clone, Default)]
pub struct TurnRecord {
    pub outcome: String,
    pub rounds: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Of `prompt_tokens`, those the provider reused from its cache.
    pub cached_tokens: u64,
}

impl Store {
    /// Starts a turn answering the events `seqs` (claimed by it in the same statement);
    /// with `notice`, a turn that only posts that notice.
    pub async fn start_turn(
        &self,
        room_id: &RoomId,
        persona: &UserId,
        asker: &UserId,
        seqs: &[i64],
        notice: Option<&Notice>,
        now: i64,
    ) -> Result<TurnRow> {
        // One statement: the `turn_claims` trigger (migration 0030) gives the events in
        // `claims` the new turn's id.
        let claims = serde_json::to_string(seqs)?;
        let id: i64 = sqlx::query(
            "INSERT INTO turns (room_id, persona, asker, started_at, notice, notice_outcome, claims)
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
        )
        .bind(room_id.as_str())
        .bind(persona.as_str())
        .bind(asker.as_str())
        .bind(now)
        .bind(notice.map(|n| n.text.as_str()))
        .bind(notice.map(|n| n.outcome.as_str()))
        .bind(claims)
        .fetch_one(&self.writer)
        .await?
        .try_get("id")?;
        Ok(TurnRow {
            id,
            room_id: room_id.to_owned(),
            persona: persona.to_owned(),
            asker: asker.to_owned(),
            notice: notice.cloned(),
            started_at: now,
            resumed: false,
        })
    }

    /// A turn of this room that was started but never finished (a crash), with the events
    /// it claimed.
    pub async fn unfinished_turn(&self, room_id: &RoomId) -> Result<Option<(TurnRow, Vec<StoredEvent>)>> {
        let row = sqlx::query(
            "SELECT id, room_id, persona, asker, notice, notice_outcome, started_at FROM turns
             WHERE state = 'running' AND room_id = $1 ORDER BY id LIMIT 1",
        )
        .bind(room_id.as_str())
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let turn = TurnRow {
            id: row.try_get("id")?,
            room_id: id(&row, "room_id")?,
            persona: id(&row, "persona")?,
            asker: id(&row, "asker")?,
            notice: match (row.try_get::<Option<String>, _>("notice")?, row.try_get("notice_outcome")?) {
                (Some(text), Some(outcome)) => Some(Notice { outcome, text }),
                _ => None,
            },
            started_at: row.try_get("started_at")?,
            resumed: true,
        };
        let sql = format!("SELECT {COLUMNS} FROM events WHERE turn_id = $1 ORDER BY seq");
        let rows = sqlx::query(&sql).bind(turn.id).fetch_all(&self.pool).await?;
        let events = rows.iter().map(StoredEvent::from_row).collect::<Result<_>>()?;
        Ok(Some((turn, events)))
    }

    /// Rooms with a turn still `running` (a stop cut it short).
    pub async fn rooms_with_running_turns(&self) -> Result<Vec<OwnedRoomId>> {
        let rows =
            sqlx::query("SELECT DISTINCT room_id FROM turns WHERE state = 'running'").fetch_all(&self.pool).await?;
        rows.iter().map(|r| id(r, "room_id")).collect()
    }

    /// Turns a running turn into one that only posts `notice` (a lost answer, told).
    pub async fn set_turn_notice(&self, id: i64, notice: &Notice) -> Result<()> {
        sqlx::query("UPDATE turns SET notice = $1, notice_outcome = $2 WHERE id = $3 AND state = 'running'")
            .bind(&notice.text)
            .bind(&notice.outcome)
            .bind(id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Records a model reply of a turn (round from 1), before its tools run.
    pub async fn record_reply(&self, turn: i64, round: u32, reply: &str) -> Result<()> {
        sqlx::query("INSERT INTO turn_replies (turn_id, round, reply) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING")
            .bind(turn)
            .bind(i64::from(round))
            .bind(reply)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// A turn's recorded model replies, in order.
    pub async fn replies(&self, turn: i64) -> Result<Vec<String>> {
        let rows = sqlx::query("SELECT reply FROM turn_replies WHERE turn_id = $1 ORDER BY round")
            .bind(turn)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| Ok(r.try_get("reply")?)).collect()
    }

    /// Finishes a turn and marks its events handled, atomically. Only a running turn is
    /// finished: one finished already (by another instance that took the room over) keeps
    /// its first outcome, and its events stay as they are. The rest of a turn's end (its
    /// events processed, the record of replies and tool results that exists only to
    /// resume it deleted, as it holds model text and tool output) is done by the
    /// `turn_done` trigger (migration 0029), in this one statement.
    pub async fn finish_turn(&self, id: i64, record: &TurnRecord, now: i64) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE turns SET state = 'done', finished_at = $1, outcome = $2, rounds = $3, prompt_tokens = $4, completion_tokens = $5,
             cached_tokens = $6 WHERE id = $7 AND state = 'running'",
        )
        .bind(now)
        .bind(&record.outcome)
        .bind(i64::from(record.rounds))
        .bind(record.prompt_tokens as i64)
        .bind(record.completion_tokens as i64)
        .bind(record.cached_tokens as i64)
        .bind(id)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Finished turns of a room: (outcome, rounds, prompt tokens, completion tokens).
    pub async fn turn_outcomes(&self, room_id: &RoomId) -> Result<Vec<(String, i64, i64, i64)>> {
        let rows = sqlx::query(
            "SELECT outcome, rounds, prompt_tokens, completion_tokens FROM turns WHERE room_id = $1 AND state = 'done' ORDER BY id",
        )
        .bind(room_id.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("outcome")?,
                    r.try_get("rounds")?,
                    r.try_get("prompt_tokens")?,
                    r.try_get("completion_tokens")?,
                ))
            })
            .collect()
    }
}

impl Store {
    /// A turn still running on a redacted event keeps, for its resume, the model's replies
    /// and the tool results, which may quote it: they go at once (a resumed turn then asks
    /// the model again, and its calls stay recorded as started, so none runs twice unasked).
    /// With `by`, only if `by` sent the event (the door's case: whether anyone else may
    /// redact it takes the room's state, which its worker asks for).
    pub async fn scrub_turn_records(&self, room_id: &RoomId, event_id: &EventId, by: Option<&UserId>) -> Result<()> {
        let mut tx = self.writer.begin().await?;
        for table in ["turn_replies", "tool_results"] {
            let sql = format!(
                "DELETE FROM {table} WHERE turn_id IN
                 (SELECT turn_id FROM events WHERE room_id = $1 AND event_id = $2 AND turn_id IS NOT NULL
                  AND ($3 = '' OR sender = $3))"
            );
            let by = by.map_or("", |u| u.as_str());
            sqlx::query(&sql).bind(room_id.as_str()).bind(event_id.as_str()).bind(by).execute(&mut *tx).await?;
        }
        // A redacted voice message's words go with it.
        sqlx::query("DELETE FROM transcripts WHERE room_id = $1 AND event_id = $2")
            .bind(room_id.as_str())
            .bind(event_id.as_str())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}

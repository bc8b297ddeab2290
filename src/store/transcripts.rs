//! `transcripts`: the words of members' voice messages, by event; and `audio_usage`: the
//! seconds of audio each member had transcribed, for `budget.audio_seconds_per_day`.

use std::collections::HashMap;

use ruma::{EventId, OwnedEventId, RoomId, UserId};
use sqlx::Row;

use super::{DAY_MS, Result, Store};

impl Store {
    /// Keeps a voice message's words (once: a second transcription keeps the first), and
    /// counts its seconds against `asker`'s day, in one transaction.
    pub async fn record_transcript(
        &self,
        room: &RoomId,
        event: &EventId,
        asker: &UserId,
        text: &str,
        seconds: u64,
        now: i64,
    ) -> Result<()> {
        let seconds = i64::try_from(seconds).unwrap_or(i64::MAX);
        let mut tx = self.writer.begin().await?;
        let kept = sqlx::query(
            "INSERT INTO transcripts (event_id, room_id, text, seconds, created_at) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (event_id) DO NOTHING",
        )
        .bind(event.as_str())
        .bind(room.as_str())
        .bind(text)
        .bind(seconds)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        if kept.rows_affected() == 1 {
            sqlx::query("INSERT INTO audio_usage (at, user_id, seconds) VALUES ($1, $2, $3)")
                .bind(now)
                .bind(asker.as_str())
                .bind(seconds)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Seconds of audio `asker` had transcribed in the day up to `now`.
    pub async fn audio_seconds_today(&self, asker: &UserId, now: i64) -> Result<u64> {
        let row = sqlx::query(
            "SELECT CAST(COALESCE(SUM(seconds), 0) AS BIGINT) AS n FROM audio_usage WHERE user_id = $1 AND at > $2",
        )
        .bind(asker.as_str())
        .bind(now - DAY_MS)
        .fetch_one(&self.pool)
        .await?;
        Ok(u64::try_from(row.try_get::<i64, _>("n")?).unwrap_or(0))
    }

    /// The kept words of `events` (those that have some), with their length in seconds.
    pub async fn transcripts(
        &self,
        room: &RoomId,
        events: &[&EventId],
    ) -> Result<HashMap<OwnedEventId, (String, u64)>> {
        let mut found = HashMap::new();
        for chunk in events.chunks(super::LIST_CHUNK) {
            let sql = format!(
                "SELECT event_id, text, seconds FROM transcripts WHERE room_id = $1 AND event_id IN ({})",
                super::list(2, chunk.len())
            );
            let rows = chunk
                .iter()
                .fold(sqlx::query(&self.many_params(&sql)).bind(room.as_str()), |q, e| q.bind(e.as_str()))
                .fetch_all(&self.pool)
                .await?;
            for row in rows {
                let (event, seconds): (String, i64) = (row.try_get("event_id")?, row.try_get("seconds")?);
                let Ok(event) = OwnedEventId::try_from(event) else { continue };
                found.insert(event, (row.try_get("text")?, u64::try_from(seconds).unwrap_or(0)));
            }
        }
        Ok(found)
    }
}

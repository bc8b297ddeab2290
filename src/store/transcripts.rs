//! `transcripts`: the words of members' voice messages, by event.

use std::collections::HashMap;

use ruma::{EventId, OwnedEventId, RoomId};
use sqlx::Row;

use super::{Result, Store};

impl Store {
    /// Keeps a voice message's words (once: a second transcription keeps the first).
    pub async fn record_transcript(
        &self,
        room: &RoomId,
        event: &EventId,
        text: &str,
        seconds: u64,
        now: i64,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO transcripts (event_id, room_id, text, seconds, created_at) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (event_id) DO NOTHING",
        )
        .bind(event.as_str())
        .bind(room.as_str())
        .bind(text)
        .bind(i64::try_from(seconds).unwrap_or(i64::MAX))
        .bind(now)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// The kept words of `events` (those that have some), with their length in seconds.
    pub async fn transcripts(
        &self,
        room: &RoomId,
        events: &[&EventId],
    ) -> Result<HashMap<OwnedEventId, (String, u64)>> {
        let mut found = HashMap::new();
        for event in events {
            let row = sqlx::query("SELECT text, seconds FROM transcripts WHERE room_id = $1 AND event_id = $2")
                .bind(room.as_str())
                .bind(event.as_str())
                .fetch_optional(&self.pool)
                .await?;
            if let Some(row) = row {
                let seconds: i64 = row.try_get("seconds")?;
                found.insert((*event).to_owned(), (row.try_get("text")?, u64::try_from(seconds).unwrap_or(0)));
            }
        }
        Ok(found)
    }
}

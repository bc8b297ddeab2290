//! `sent_messages`: what each persona sent (ownership for edits) and the edit pace.

use ruma::{EventId, OwnedEventId, OwnedRoomId, OwnedUserId, RoomId, UserId};
use serde_json::Value;
use sqlx::Row;

use super::{Result, Store, id, opt_id};

/// A message a persona sent.
#[derive(Debug, Clone)]
pub struct SentMessage {
    pub event_id: OwnedEventId,
    pub room_id: OwnedRoomId,
    pub sender: OwnedUserId,
    pub thread_root: Option<OwnedEventId>,
    /// For an edit: the original message it replaced.
    pub replaces: Option<OwnedEventId>,
    pub content: Value,
    pub edits: i64,
    /// The agent client (`[[agents.clients]]` name) that had it sent; `None` for the
    /// model's messages and richbot's own.
    pub client: Option<String>,
}

/// A message to record as sent.
#[derive(Debug, Clone, Copy)]
pub struct NewSent<'a> {
    pub event_id: &'a EventId,
    pub room_id: &'a RoomId,
    pub sender: &'a UserId,
    pub thread_root: Option<&'a EventId>,
    /// For an edit: the original message.
    pub replaces: Option<&'a EventId>,
    pub content: &'a Value,
    pub sent_at: i64,
    /// The earliest time of the next write to the message.
    pub next_edit_at: i64,
}

impl Store {
    /// Records a sent message (or an edit, with `replaces`): ours to edit, and in the
    /// room's history at once, as the homeserver will echo it (the echo, when it comes, is
    /// the same event and is not stored twice). So the next turn's prompt has it even
    /// when it starts before the echo arrives, and in an encrypted room it is already
    /// clear.
    pub async fn record_sent(&self, m: &NewSent<'_>) -> Result<()> {
        self.record_landed(m, None).await
    }

    /// [`Store::record_sent`] and, with `txn_id`, the outbox write it landed as marked
    /// sent, last. Three statements, not a transaction (whose BEGIN and COMMIT would be
    /// two more round trips to the database on every answer): each is idempotent, and
    /// the write stays unsent until the message is recorded, so after a crash between
    /// them the write is found landed (its marker) and recorded again.
    pub async fn record_landed(&self, m: &NewSent<'_>, txn_id: Option<&str>) -> Result<()> {
        sqlx::query(
            "INSERT INTO sent_messages (event_id, room_id, sender, thread_root, replaces, content, sent_at, next_edit_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (event_id) DO NOTHING",
        )
        .bind(m.event_id.as_str())
        .bind(m.room_id.as_str())
        .bind(m.sender.as_str())
        .bind(m.thread_root.map(EventId::as_str))
        .bind(m.replaces.map(EventId::as_str))
        .bind(m.content.to_string())
        .bind(m.sent_at)
        .bind(m.next_edit_at)
        .execute(&self.writer)
        .await?;
        let echo = serde_json::json!({
            "type": "m.room.message", "event_id": m.event_id, "sender": m.sender, "room_id": m.room_id,
            "origin_server_ts": m.sent_at, "content": m.content,
        });
        sqlx::query(
            "INSERT INTO events (event_id, room_id, sender, event_type, state_key, origin_ts, event, received_at, processed)
             VALUES ($1, $2, $3, 'm.room.message', NULL, $4, $5, $4, 1) ON CONFLICT (event_id) DO NOTHING",
        )
        .bind(m.event_id.as_str())
        .bind(m.room_id.as_str())
        .bind(m.sender.as_str())
        .bind(m.sent_at)
        .bind(echo.to_string())
        .execute(&self.writer)
        .await?;
        if let Some(txn_id) = txn_id {
            self.outbox_sent(txn_id, m.event_id).await?;
        }
        Ok(())
    }

    /// The message `event_id` if a persona of ours sent it.
    pub async fn sent_message(&self, event_id: &EventId) -> Result<Option<SentMessage>> {
        let row = sqlx::query("SELECT event_id, room_id, sender, thread_root, replaces, content, edits, client FROM sent_messages WHERE event_id = $1")
            .bind(event_id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            let content: String = r.try_get("content")?;
            Ok(SentMessage {
                event_id: id(&r, "event_id")?,
                room_id: id(&r, "room_id")?,
                sender: id(&r, "sender")?,
                thread_root: opt_id(&r, "thread_root")?,
                replaces: opt_id(&r, "replaces")?,
                content: serde_json::from_str(&content)?,
                edits: r.try_get("edits")?,
                client: r.try_get("client")?,
            })
        })
        .transpose()
    }

    /// The `n` latest messages (not edits) `sender` sent in `room`, newest first, as last
    /// edited.
    pub async fn recent_sent(&self, room: &RoomId, sender: &UserId, n: i64) -> Result<Vec<SentMessage>> {
        let rows = sqlx::query(
            "SELECT event_id FROM sent_messages WHERE room_id = $1 AND sender = $2 AND replaces IS NULL
             ORDER BY sent_at DESC LIMIT $3",
        )
        .bind(room.as_str())
        .bind(sender.as_str())
        .bind(n)
        .fetch_all(&self.pool)
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            out.extend(self.sent_message(&id::<OwnedEventId>(&r, "event_id")?).await?);
        }
        Ok(out)
    }

    /// Whether `sender` posted in the thread rooted at `root` (or is its root's author).
    pub async fn posted_in_thread(&self, room_id: &RoomId, root: &EventId, sender: &UserId) -> Result<bool> {
        let row = sqlx::query(
            "SELECT 1 FROM sent_messages WHERE room_id = $1 AND sender = $2 AND (thread_root = $3 OR event_id = $4) LIMIT 1",
        )
        .bind(room_id.as_str())
        .bind(sender.as_str())
        .bind(root.as_str())
        .bind(root.as_str())
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.is_some())
    }

    /// Reserves the next write slot of message `event_id` for `sender`, atomically: the
    /// slot is `max(next_edit_at, now)`, and `next_edit_at` moves `interval` past it, so
    /// concurrent writers (or processes) get slots in order, never the same one. `None`
    /// when `sender` did not send the message.
    pub async fn reserve_edit_slot(
        &self,
        event_id: &EventId,
        sender: &UserId,
        now: i64,
        interval: i64,
    ) -> Result<Option<i64>> {
        let row = sqlx::query(
            "UPDATE sent_messages SET next_edit_at = CASE WHEN next_edit_at > $1 THEN next_edit_at ELSE $1 END + $2, edits = edits + 1
             WHERE event_id = $3 AND sender = $4 AND replaces IS NULL RETURNING next_edit_at - $2 AS slot",
        )
        .bind(now)
        .bind(interval)
        .bind(event_id.as_str())
        .bind(sender.as_str())
        .fetch_optional(&self.writer)
        .await?;
        row.map(|r| Ok(r.try_get("slot")?)).transpose()
    }

    /// After a write to the message landed at `done_at`: the next may not come before
    /// `done_at + interval` (the homeserver stamps the write somewhere before `done_at`),
    /// and the stored content becomes `content`.
    pub async fn edit_landed(&self, event_id: &EventId, content: &Value, done_at: i64, interval: i64) -> Result<()> {
        sqlx::query("UPDATE sent_messages SET next_edit_at = CASE WHEN next_edit_at > $1 THEN next_edit_at ELSE $1 END, content = $2 WHERE event_id = $3")
            .bind(done_at + interval)
            .bind(content.to_string())
            .bind(event_id.as_str())
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Records the `send` button ids a persona posted in a room (with the message).
    pub async fn record_buttons(&self, room: &RoomId, sender: &UserId, event: &EventId, ids: &[String]) -> Result<()> {
        for id in ids {
            sqlx::query(
                "INSERT INTO sent_buttons (room_id, sender, button_id, event_id) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (room_id, sender, button_id) DO UPDATE SET event_id = excluded.event_id",
            )
            .bind(room.as_str())
            .bind(sender.as_str())
            .bind(id)
            .bind(event.as_str())
            .execute(&self.writer)
            .await?;
        }
        Ok(())
    }

    /// Whether `sender` posted a button with id `button_id` in `room`.
    pub async fn button_posted(&self, room: &RoomId, sender: &UserId, button_id: &str) -> Result<bool> {
        let row = sqlx::query("SELECT 1 FROM sent_buttons WHERE room_id = $1 AND sender = $2 AND button_id = $3")
            .bind(room.as_str())
            .bind(sender.as_str())
            .bind(button_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }
}

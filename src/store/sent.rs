//! `sent_messages`: what each persona sent (ownership for edits) and the edit pace.

use serde_json::Value;
use sqlx::Row;

use super::{Result, Store};

/// A message a persona sent.
#[derive(Debug, Clone)]
pub struct SentMessage {
    pub event_id: String,
    pub room_id: String,
    pub sender: String,
    pub thread_root: Option<String>,
    /// For an edit: the original message it replaced.
    pub replaces: Option<String>,
    pub content: Value,
    pub edits: i64,
}

/// A message to record as sent.
#[derive(Debug, Clone, Copy)]
pub struct NewSent<'a> {
    pub event_id: &'a str,
    pub room_id: &'a str,
    pub sender: &'a str,
    pub thread_root: Option<&'a str>,
    /// For an edit: the original message.
    pub replaces: Option<&'a str>,
    pub content: &'a Value,
    pub sent_at: i64,
    /// The earliest time of the next write to the message.
    pub next_edit_at: i64,
}

impl Store {
    /// Records a sent message (or an edit, with `replaces`).
    pub async fn record_sent(&self, m: &NewSent<'_>) -> Result<()> {
        sqlx::query(
            "INSERT INTO sent_messages (event_id, room_id, sender, thread_root, replaces, content, sent_at, next_edit_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (event_id) DO NOTHING",
        )
        .bind(m.event_id)
        .bind(m.room_id)
        .bind(m.sender)
        .bind(m.thread_root)
        .bind(m.replaces)
        .bind(m.content.to_string())
        .bind(m.sent_at)
        .bind(m.next_edit_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The message `event_id` if a persona of ours sent it.
    pub async fn sent_message(&self, event_id: &str) -> Result<Option<SentMessage>> {
        let row = sqlx::query("SELECT event_id, room_id, sender, thread_root, replaces, content, edits FROM sent_messages WHERE event_id = ?")
            .bind(event_id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            let content: String = r.try_get("content")?;
            Ok(SentMessage {
                event_id: r.try_get("event_id")?,
                room_id: r.try_get("room_id")?,
                sender: r.try_get("sender")?,
                thread_root: r.try_get("thread_root")?,
                replaces: r.try_get("replaces")?,
                content: serde_json::from_str(&content)?,
                edits: r.try_get("edits")?,
            })
        })
        .transpose()
    }

    /// Whether `sender` posted in the thread rooted at `root` (or is its root's author).
    pub async fn posted_in_thread(&self, room_id: &str, root: &str, sender: &str) -> Result<bool> {
        let row = sqlx::query(
            "SELECT 1 FROM sent_messages WHERE room_id = ? AND sender = ? AND (thread_root = ? OR event_id = ?) LIMIT 1",
        )
        .bind(room_id)
        .bind(sender)
        .bind(root)
        .bind(root)
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
        event_id: &str,
        sender: &str,
        now: i64,
        interval: i64,
    ) -> Result<Option<i64>> {
        let row = sqlx::query(
            "UPDATE sent_messages SET next_edit_at = MAX(next_edit_at, ?1) + ?2, edits = edits + 1
             WHERE event_id = ?3 AND sender = ?4 AND replaces IS NULL RETURNING next_edit_at - ?2 AS slot",
        )
        .bind(now)
        .bind(interval)
        .bind(event_id)
        .bind(sender)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| Ok(r.try_get("slot")?)).transpose()
    }

    /// After a write to the message landed at `done_at`: the next may not come before
    /// `done_at + interval` (the homeserver stamps the write somewhere before `done_at`),
    /// and the stored content becomes `content`.
    pub async fn edit_landed(&self, event_id: &str, content: &Value, done_at: i64, interval: i64) -> Result<()> {
        sqlx::query("UPDATE sent_messages SET next_edit_at = MAX(next_edit_at, ?), content = ? WHERE event_id = ?")
            .bind(done_at + interval)
            .bind(content.to_string())
            .bind(event_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

//! `agent_requests`: the agents' channel's idempotency ledger, and what a client reads
//! back of its messages (who sent them, the events that answer them).

use ruma::{EventId, OwnedEventId, OwnedRoomId, RoomId};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::events::COLUMNS;
use super::{Result, Store, StoredEvent, opt_id};

/// A writing call of an agent client, as the ledger has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRequest {
    /// Its row: its write goes through the outbox as turn `-id`.
    pub id: i64,
    /// Made by this call (false: an earlier call with the same key made it).
    pub fresh: bool,
    /// Whether the earlier call asked for the same as this one (always true when fresh).
    pub same: bool,
    /// Where its message landed, once it did: the room, the message (for an edit, the
    /// message edited) and the event written.
    pub receipt: Option<(OwnedRoomId, OwnedEventId, OwnedEventId)>,
}

impl Store {
    /// The ledger row of a call of `client`: with a `key`, the row an earlier call with
    /// that key made since `window_start` (ms) if there is one, else a new row (an older
    /// one is forgotten first); without a key, always a new row.
    pub async fn agent_request(
        &self,
        client: &str,
        key: Option<&str>,
        hash: &str,
        now: i64,
        window_start: i64,
    ) -> Result<AgentRequest> {
        if let Some(key) = key {
            sqlx::query("DELETE FROM agent_requests WHERE client = $1 AND idem_key = $2 AND created_at < $3")
                .bind(client)
                .bind(key)
                .bind(window_start)
                .execute(&self.writer)
                .await?;
        }
        // The row an earlier call made can vanish between the insert and the read (that
        // call was refused and freed its key): then this call makes it after all.
        for _ in 0..3 {
            let made = sqlx::query(
                "INSERT INTO agent_requests (client, idem_key, request_hash, created_at) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (client, idem_key) DO NOTHING RETURNING id",
            )
            .bind(client)
            .bind(key)
            .bind(hash)
            .bind(now)
            .fetch_optional(&self.writer)
            .await?;
            if let Some(row) = made {
                return Ok(AgentRequest { id: row.try_get("id")?, fresh: true, same: true, receipt: None });
            }
            // Another call made it first (the insert found its key).
            let row = sqlx::query(
                "SELECT id, request_hash, room_id, message_id, event_id FROM agent_requests WHERE client = $1 AND idem_key = $2",
            )
            .bind(client)
            .bind(key)
            .fetch_optional(&self.writer)
            .await?;
            if let Some(row) = row {
                let first: String = row.try_get("request_hash")?;
                return Ok(AgentRequest {
                    id: row.try_get("id")?,
                    fresh: false,
                    same: first == hash,
                    receipt: receipt(&row)?,
                });
            }
        }
        Err(sqlx::Error::RowNotFound.into())
    }

    /// Records where call `id` landed, and marks the message as `client`'s.
    pub async fn agent_request_done(
        &self,
        id: i64,
        client: &str,
        room: &RoomId,
        message: &EventId,
        event: &EventId,
    ) -> Result<()> {
        let mut tx = self.writer.begin().await?;
        sqlx::query("UPDATE agent_requests SET room_id = $1, message_id = $2, event_id = $3 WHERE id = $4")
            .bind(room.as_str())
            .bind(message.as_str())
            .bind(event.as_str())
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE sent_messages SET client = $1 WHERE event_id = $2 AND client IS NULL")
            .bind(client)
            .bind(message.as_str())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Forgets call `id`, refused before its write: its key is free again. A row that
    /// has landed (another instance's twin finished it) is kept.
    pub async fn forget_agent_request(&self, id: i64) -> Result<()> {
        sqlx::query("DELETE FROM agent_requests WHERE id = $1 AND event_id IS NULL")
            .bind(id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Forgets the calls made before `before` (ms), and their outbox rows: a repeat of
    /// one of their keys is a new message.
    pub async fn prune_agent_requests(&self, before: i64) -> Result<u64> {
        let gone =
            sqlx::query("DELETE FROM agent_requests WHERE created_at < $1").bind(before).execute(&self.writer).await?;
        sqlx::query("DELETE FROM outbox WHERE turn_id < 0 AND created_at < $1")
            .bind(before)
            .execute(&self.writer)
            .await?;
        Ok(gone.rows_affected())
    }

    /// Where event `event_id` is in its room's history (its arrival order), if stored.
    pub async fn event_seq(&self, event_id: &EventId) -> Result<Option<i64>> {
        let row = sqlx::query("SELECT seq FROM events WHERE event_id = $1")
            .bind(event_id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| Ok(r.try_get("seq")?)).transpose()
    }

    /// Up to `limit` of `room`'s events after `after` (a seq), in order.
    pub async fn events_after(&self, room: &RoomId, after: i64, limit: i64) -> Result<Vec<StoredEvent>> {
        let sql = format!("SELECT {COLUMNS} FROM events WHERE room_id = $1 AND seq > $2 ORDER BY seq LIMIT $3");
        let rows = sqlx::query(&sql).bind(room.as_str()).bind(after).bind(limit).fetch_all(&self.pool).await?;
        rows.iter().map(StoredEvent::from_row).collect()
    }
}

fn receipt(row: &AnyRow) -> Result<Option<(OwnedRoomId, OwnedEventId, OwnedEventId)>> {
    let (room, message, event) = (opt_id(row, "room_id")?, opt_id(row, "message_id")?, opt_id(row, "event_id")?);
    Ok(room.zip(message).zip(event).map(|((r, m), e)| (r, m, e)))
}

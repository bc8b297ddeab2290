//! `events`: the inbox and the room history.

use ruma::{EventId, OwnedEventId, OwnedRoomId, OwnedUserId, RoomId};
use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Backend, Result, Store, id};
use crate::relation::Relation;

/// An event as the homeserver pushed it, ready to store.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub event_id: OwnedEventId,
    pub room_id: OwnedRoomId,
    pub sender: OwnedUserId,
    pub event_type: String,
    pub state_key: Option<String>,
    pub origin_ts: i64,
    /// The whole event JSON, as received.
    pub event: String,
    /// Settled at the door: an event that can start nothing and change nothing richbot
    /// keeps (see `inbox`), stored as history only.
    pub processed: bool,
}

/// A stored event.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    pub seq: i64,
    pub event_id: OwnedEventId,
    pub room_id: OwnedRoomId,
    pub sender: OwnedUserId,
    pub event_type: String,
    pub state_key: Option<String>,
    pub origin_ts: i64,
    /// When richbot received the event (ms); with `origin_ts`, how late it was delivered.
    pub received_at: i64,
    pub event: Value,
    pub processed: bool,
}

impl StoredEvent {
    pub fn content(&self) -> &Value {
        self.event.get("content").unwrap_or(&Value::Null)
    }

    /// What the event relates to (`m.relates_to`), if anything readable.
    pub fn relation(&self) -> Option<Relation> {
        Relation::read(self.content())
    }

    /// The `msgtype` of a message event.
    pub fn msgtype(&self) -> Option<&str> {
        self.content().get("msgtype").and_then(Value::as_str)
    }

    pub(super) fn from_row(row: &AnyRow) -> Result<Self> {
        let text: String = row.try_get("event")?;
        Ok(Self {
            seq: row.try_get("seq")?,
            event_id: id(row, "event_id")?,
            room_id: id(row, "room_id")?,
            sender: id(row, "sender")?,
            event_type: row.try_get("event_type")?,
            state_key: row.try_get("state_key")?,
            origin_ts: row.try_get("origin_ts")?,
            received_at: row.try_get("received_at")?,
            event: serde_json::from_str(&text)?,
            processed: row.try_get::<i64, _>("processed")? != 0,
        })
    }
}

/// Events per `INSERT` statement (9 parameters each, well under both databases' limits).
const ROWS_PER_INSERT: usize = 100;

/// The `INSERT` of `n` events, built once per `n` (with bare `?`s on SQLite: `params.rs`).
fn insert_sql(backend: Backend, n: usize) -> &'static str {
    static SQL: std::sync::OnceLock<Vec<[String; 2]>> = std::sync::OnceLock::new();
    let all = SQL.get_or_init(|| {
        (0..=ROWS_PER_INSERT)
            .map(|n| {
                let rows: Vec<String> = (0..n).map(|i| format!("({})", super::list(i * 9 + 1, 9))).collect();
                let rows = rows.join(", ");
                let sql = format!(
                    "INSERT INTO events (event_id, room_id, sender, event_type, state_key, origin_ts, event, received_at, processed)
                     VALUES {rows} ON CONFLICT (event_id) DO NOTHING"
                );
                [super::engine::params::positional(&sql).into_owned(), sql]
            })
            .collect()
    });
    &all[n][usize::from(backend == Backend::Postgres)]
}

/// One multi-row `INSERT` of `events` (at most [`ROWS_PER_INSERT`]).
fn insert(
    backend: Backend,
    events: &[NewEvent],
    now: i64,
) -> sqlx::query::Query<'_, sqlx::Any, sqlx::any::AnyArguments<'_>> {
    let mut q = sqlx::query(insert_sql(backend, events.len()));
    for e in events {
        q = q
            .bind(e.event_id.as_str())
            .bind(e.room_id.as_str())
            .bind(e.sender.as_str())
            .bind(e.event_type.as_str())
            .bind(e.state_key.as_deref())
            .bind(e.origin_ts)
            .bind(e.event.as_str())
            .bind(now)
            .bind(i64::from(e.processed));
    }
    q
}

pub(super) const COLUMNS: &str =
    "seq, event_id, room_id, sender, event_type, state_key, origin_ts, received_at, event, processed";

impl Store {
    /// Stores events in one transaction; an event id seen before is skipped. Returns how
    /// many were new. One multi-row statement per [`ROWS_PER_INSERT`] events.
    pub async fn insert_events(&self, events: &[NewEvent], now: i64) -> Result<u64> {
        if events.is_empty() {
            return Ok(0);
        }
        self.inserted();
        if events.len() <= ROWS_PER_INSERT {
            // One statement is one transaction already.
            return Ok(insert(self.backend, events, now).execute(&self.writer).await?.rows_affected());
        }
        let mut tx = self.writer.begin().await?;
        let mut inserted = 0;
        for chunk in events.chunks(ROWS_PER_INSERT) {
            inserted += insert(self.backend, chunk, now).execute(&mut *tx).await?.rows_affected();
        }
        tx.commit().await?;
        Ok(inserted)
    }

    /// Rooms that have events not yet handled, oldest first.
    pub async fn rooms_with_pending(&self) -> Result<Vec<OwnedRoomId>> {
        let rows = sqlx::query(
            "SELECT room_id, MIN(seq) AS first FROM events WHERE processed = 0 GROUP BY room_id ORDER BY first",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| id(r, "room_id")).collect()
    }

    /// A room's unhandled events not claimed by a turn, in arrival order.
    pub async fn pending_events(&self, room_id: &RoomId) -> Result<Vec<StoredEvent>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM events WHERE processed = 0 AND turn_id IS NULL AND room_id = $1 ORDER BY seq"
        );
        let rows = sqlx::query(&sql).bind(room_id.as_str()).fetch_all(&self.pool).await?;
        rows.iter().map(StoredEvent::from_row).collect()
    }

    /// Stores the clear event of an encrypted one (same id and place; its decrypted type
    /// and content), which no longer waits for its key.
    pub async fn make_clear(&self, seq: i64, event_type: &str, clear: &Value) -> Result<()> {
        let mut tx = self.writer.begin().await?;
        sqlx::query("UPDATE events SET event_type = $1, event = $2 WHERE seq = $3")
            .bind(event_type)
            .bind(clear.to_string())
            .bind(seq)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM key_waits WHERE event_seq = $1").bind(seq).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Marks events handled (those that started no turn), in one statement.
    pub async fn mark_processed(&self, seqs: &[i64]) -> Result<()> {
        if seqs.is_empty() {
            return Ok(());
        }
        let mut tx = self.writer.begin().await?;
        for chunk in seqs.chunks(super::LIST_CHUNK) {
            let sql = format!("UPDATE events SET processed = 1 WHERE seq IN ({})", super::list(1, chunk.len()));
            let sql = self.many_params(&sql);
            chunk.iter().fold(sqlx::query(&sql), |q, seq| q.bind(*seq)).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The room's most recent messages (`m.room.message` and stickers, and schedules'
    /// occurrences, `org.richbot.schedule`; reactions, state and other types are not
    /// history) up to and including `upto_seq`, after the room's last `!reset`, newest
    /// last, at most `limit`.
    pub async fn history(&self, room_id: &RoomId, upto_seq: i64, limit: i64) -> Result<Vec<StoredEvent>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM events WHERE room_id = $1 AND seq <= $2 AND event_type IN ('m.room.message', 'm.sticker', 'org.richbot.schedule')
             AND seq > COALESCE((SELECT reset_seq FROM room_settings WHERE room_id = $1), 0)
             ORDER BY seq DESC LIMIT $3"
        );
        let rows = sqlx::query(&sql).bind(room_id.as_str()).bind(upto_seq).bind(limit).fetch_all(&self.pool).await?;
        let mut events: Vec<StoredEvent> = rows.iter().map(StoredEvent::from_row).collect::<Result<_>>()?;
        events.reverse();
        Ok(events)
    }

    /// The room's name: from the latest `m.room.name` event we saw, else from the stripped
    /// state of the latest invite (a name set before a persona was invited never reaches us
    /// as an event).
    pub async fn room_name(&self, room_id: &RoomId) -> Result<Option<String>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM events WHERE room_id = $1 AND (event_type = 'm.room.name'
             OR (event_type = 'm.room.member' AND event LIKE '%invite_room_state%'))
             ORDER BY event_type = 'm.room.name' DESC, seq DESC LIMIT 1"
        );
        let row = sqlx::query(&sql).bind(room_id.as_str()).fetch_optional(&self.pool).await?;
        let Some(event) = row.as_ref().map(StoredEvent::from_row).transpose()? else { return Ok(None) };
        let name = if event.event_type == "m.room.name" {
            event.content().get("name").and_then(Value::as_str)
        } else {
            let stripped =
                event.event.get("invite_room_state").or_else(|| event.event.get("unsigned")?.get("invite_room_state"));
            stripped
                .and_then(Value::as_array)
                .and_then(|s| s.iter().find(|e| e.get("type").and_then(Value::as_str) == Some("m.room.name")))
                .and_then(|e| e.get("content")?.get("name")?.as_str())
        };
        Ok(name.filter(|n| !n.is_empty()).map(str::to_owned))
    }

    /// One stored event by id.
    pub async fn event(&self, event_id: &EventId) -> Result<Option<StoredEvent>> {
        let sql = format!("SELECT {COLUMNS} FROM events WHERE event_id = $1");
        let row = sqlx::query(&sql).bind(event_id.as_str()).fetch_optional(&self.pool).await?;
        row.as_ref().map(StoredEvent::from_row).transpose()
    }

    /// All events of a room in arrival order (for operators and tests).
    pub async fn room_events(&self, room_id: &RoomId) -> Result<Vec<StoredEvent>> {
        let sql = format!("SELECT {COLUMNS} FROM events WHERE room_id = $1 ORDER BY seq");
        let rows = sqlx::query(&sql).bind(room_id.as_str()).fetch_all(&self.pool).await?;
        rows.iter().map(StoredEvent::from_row).collect()
    }

    /// Scrubs a redacted event's content, and that of its edits, from the stored events
    /// and from our sent messages (SQLite runs with `secure_delete`). Candidates are the
    /// rows whose text holds the event id (the homeserver's canonical JSON never escapes
    /// it); the relation is read in Rust, so both databases share this.
    pub async fn redact(&self, room_id: &RoomId, event_id: &EventId) -> Result<u64> {
        let mut tx = self.writer.begin().await?;
        let sql = format!(
            "SELECT {COLUMNS} FROM events WHERE room_id = $1 AND (event_id = $2 OR event LIKE '%' || $2 || '%')"
        );
        let rows = sqlx::query(&sql).bind(room_id.as_str()).bind(event_id.as_str()).fetch_all(&mut *tx).await?;
        let mut scrubbed = 0;
        for row in &rows {
            let mut e = StoredEvent::from_row(row)?;
            let relates = &e.content()["m.relates_to"];
            let edit = relates["rel_type"] == "m.replace" && relates["event_id"] == event_id.as_str();
            if e.event_id != event_id && !edit {
                continue;
            }
            if let Some(object) = e.event.as_object_mut() {
                object.insert("content".to_owned(), Value::Object(serde_json::Map::new()));
            }
            sqlx::query("UPDATE events SET event = $1 WHERE seq = $2")
                .bind(e.event.to_string())
                .bind(e.seq)
                .execute(&mut *tx)
                .await?;
            scrubbed += 1;
        }
        sqlx::query("UPDATE sent_messages SET content = '{}' WHERE room_id = $1 AND (event_id = $2 OR replaces = $2)")
            .bind(room_id.as_str())
            .bind(event_id.as_str())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        // So that the text is gone from the disk too.
        self.truncate_wal().await?;
        Ok(scrubbed)
    }
}

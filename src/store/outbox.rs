//! `outbox`: writes to the homeserver with transaction ids fixed before the first attempt.

use ruma::{OwnedEventId, RoomId, UserId};
use sqlx::Row;

use super::{Result, Store, opt_id};

/// A write to claim: the `seq`-th write of turn `turn`, by `sender` in `room`.
#[derive(Debug, Clone, Copy)]
pub struct NewWrite<'a> {
    pub txn_id: &'a str,
    pub turn: i64,
    pub seq: i64,
    pub room: &'a RoomId,
    pub sender: &'a UserId,
    /// `send` or `edit`.
    pub kind: &'a str,
    /// A stable hash of the content, to refuse a different content under the same id.
    pub content_hash: &'a str,
}

/// Where one write stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutboxState {
    /// Not (known to be) landed yet: send it, with its transaction id.
    Pending,
    /// Landed as this event.
    Sent(OwnedEventId),
    /// Refused by the homeserver for good, with its reason.
    Failed(String),
}

/// One write's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRow {
    pub txn_id: String,
    pub state: OutboxState,
    /// Attempts made before this claim (a claim of a pending write counts as one): a
    /// pending row with attempts may have landed unseen.
    pub attempts: i64,
    /// Whether the row was made for the same room, kind and content as this claim.
    pub same: bool,
    /// When the write was first claimed (ms): it cannot have landed before.
    pub created_at: i64,
    /// An encrypted room's write, encrypted before its first attempt: the ciphertext
    /// content, and the clear content it holds.
    pub sealed: Option<(String, String)>,
}

impl Store {
    /// The write `w`, creating it (pending, with `w.txn_id`) if it is new. A resumed turn
    /// gets the row it made before the crash, with that row's transaction id.
    ///
    /// A claim of a pending write counts as an attempt at it, in the same statement: the
    /// claim is followed by a PUT, and the count is what tells a resumed turn to look for
    /// a write that may have landed unseen (with one statement fewer per write, and
    /// flushed with the claim, not only written to the WAL after it). A claim that no PUT
    /// followed (a crash between them) costs its resumption one look that finds nothing.
    pub async fn outbox_claim(&self, w: &NewWrite<'_>, now: i64) -> Result<OutboxRow> {
        // A new write is known whole from its insert: one statement. Only a claim made
        // before (a resumed turn's, whose insert does nothing) reads the row back.
        let inserted = sqlx::query(
            "INSERT INTO outbox (txn_id, turn_id, seq, room_id, sender, created_at, kind, content_hash, attempts)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1) ON CONFLICT (turn_id, seq) DO NOTHING RETURNING txn_id",
        )
        .bind(w.txn_id)
        .bind(w.turn)
        .bind(w.seq)
        .bind(w.room.as_str())
        .bind(w.sender.as_str())
        .bind(now)
        .bind(w.kind)
        .bind(w.content_hash)
        .fetch_optional(&self.writer)
        .await?;
        if let Some(row) = inserted {
            let txn_id = row.try_get("txn_id")?;
            return Ok(OutboxRow {
                txn_id,
                state: OutboxState::Pending,
                attempts: 0,
                same: true,
                created_at: now,
                sealed: None,
            });
        }
        let row = sqlx::query(
            "UPDATE outbox SET attempts = attempts + CASE WHEN state = 'pending' THEN 1 ELSE 0 END
             WHERE turn_id = $1 AND seq = $2
             RETURNING txn_id, state, event_id, error, attempts, room_id, kind, content_hash, created_at, sealed, sealed_clear",
        )
        .bind(w.turn)
        .bind(w.seq)
        .fetch_one(&self.writer)
        .await?;
        let state: String = row.try_get("state")?;
        let counted = i64::from(state == "pending");
        let state = match (state.as_str(), opt_id(&row, "event_id")?) {
            ("sent", Some(event_id)) => OutboxState::Sent(event_id),
            ("failed", _) => OutboxState::Failed(row.try_get::<Option<String>, _>("error")?.unwrap_or_default()),
            _ => OutboxState::Pending,
        };
        let same = row.try_get::<String, _>("room_id")? == w.room.as_str()
            && row.try_get::<Option<String>, _>("kind")?.is_none_or(|k| k == w.kind)
            && row.try_get::<Option<String>, _>("content_hash")?.is_none_or(|h| h == w.content_hash);
        Ok(OutboxRow {
            txn_id: row.try_get("txn_id")?,
            state,
            attempts: row.try_get::<i64, _>("attempts")? - counted,
            same,
            created_at: row.try_get("created_at")?,
            sealed: match (row.try_get("sealed")?, row.try_get("sealed_clear")?) {
                (Some(sealed), Some(clear)) => Some((sealed, clear)),
                _ => None,
            },
        })
    }

    /// Keeps a write's ciphertext (and the clear content it holds) before its first
    /// attempt: every attempt sends these same bytes.
    pub async fn outbox_seal(&self, txn_id: &str, sealed: &str, clear: &str) -> Result<()> {
        sqlx::query("UPDATE outbox SET sealed = $1, sealed_clear = $2 WHERE txn_id = $3")
            .bind(sealed)
            .bind(clear)
            .bind(txn_id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Records that a write landed as `event_id`.
    pub async fn outbox_sent(&self, txn_id: &str, event_id: &ruma::EventId) -> Result<()> {
        sqlx::query("UPDATE outbox SET state = 'sent', event_id = $1, error = NULL WHERE txn_id = $2")
            .bind(event_id.as_str())
            .bind(txn_id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Records that the homeserver refused a write for good, with its reason.
    pub async fn outbox_failed(&self, txn_id: &str, reason: &str) -> Result<()> {
        sqlx::query("UPDATE outbox SET state = 'failed', error = $1 WHERE txn_id = $2")
            .bind(reason)
            .bind(txn_id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }
}

//! `tool_results` and `approvals`: what MCP tool calls returned (so a resumed turn never
//! calls a tool twice) and the calls waiting for their asker's approval.

use ruma::{EventId, OwnedEventId, OwnedRoomId, OwnedUserId, RoomId, UserId};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Result, Store, id, opt_id};

/// A call waiting for (or decided by) its asker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    pub id: i64,
    pub turn_id: i64,
    pub room_id: OwnedRoomId,
    pub asker: OwnedUserId,
    pub tool: String,
    pub notice_event: Option<OwnedEventId>,
    pub created_at: i64,
    pub expires_at: i64,
    /// `allow`, `deny` or `timeout`; `None` while it waits.
    pub decision: Option<String>,
    /// The reaction that decided it (none for a timeout).
    pub decided_by: Option<OwnedEventId>,
}

/// An approval to open for a call.
#[derive(Debug, Clone, Copy)]
pub struct NewApproval<'a> {
    pub turn_id: i64,
    pub nth: u32,
    pub room_id: &'a RoomId,
    pub asker: &'a UserId,
    pub tool: &'a str,
    pub now: i64,
    pub expires_at: i64,
}

const COLUMNS: &str = "id, turn_id, room_id, asker, tool, notice_event, created_at, expires_at, decision, decided_by";

fn approval(r: &AnyRow) -> Result<Approval> {
    Ok(Approval {
        id: r.try_get("id")?,
        turn_id: r.try_get("turn_id")?,
        room_id: id(r, "room_id")?,
        asker: id(r, "asker")?,
        tool: r.try_get("tool")?,
        notice_event: opt_id(r, "notice_event")?,
        created_at: r.try_get("created_at")?,
        expires_at: r.try_get("expires_at")?,
        decision: r.try_get("decision")?,
        decided_by: opt_id(r, "decided_by")?,
    })
}

impl Store {
    /// What call `nth` of `turn` returned, if it ran.
    pub async fn tool_result(&self, turn: i64, nth: u32) -> Result<Option<String>> {
        let row = sqlx::query("SELECT content FROM tool_results WHERE turn_id = $1 AND nth = $2")
            .bind(turn)
            .bind(i64::from(nth))
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get("content")).transpose()?)
    }

    /// Records what call `nth` of `turn` returned (the first record stands).
    pub async fn record_tool_result(&self, turn: i64, nth: u32, content: &str) -> Result<()> {
        sqlx::query("INSERT INTO tool_results (turn_id, nth, content) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING")
            .bind(turn)
            .bind(i64::from(nth))
            .bind(content)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// The approval of call `nth` of the turn, opened now unless it was before (a resumed
    /// turn finds the one it opened, with its first deadline).
    pub async fn open_approval(&self, a: &NewApproval<'_>) -> Result<Approval> {
        sqlx::query(
            "INSERT INTO approvals (turn_id, nth, room_id, asker, tool, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (turn_id, nth) DO NOTHING",
        )
        .bind(a.turn_id)
        .bind(i64::from(a.nth))
        .bind(a.room_id.as_str())
        .bind(a.asker.as_str())
        .bind(a.tool)
        .bind(a.now)
        .bind(a.expires_at)
        .execute(&self.writer)
        .await?;
        let row = sqlx::query(&format!("SELECT {COLUMNS} FROM approvals WHERE turn_id = $1 AND nth = $2"))
            .bind(a.turn_id)
            .bind(i64::from(a.nth))
            .fetch_one(&self.writer)
            .await?;
        approval(&row)
    }

    /// Remembers the notice that asks for approval `id`.
    pub async fn set_approval_notice(&self, id: i64, notice: &EventId) -> Result<()> {
        sqlx::query("UPDATE approvals SET notice_event = $1 WHERE id = $2")
            .bind(notice.as_str())
            .bind(id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Approval `id` as it stands.
    pub async fn approval(&self, id: i64) -> Result<Option<Approval>> {
        let row = sqlx::query(&format!("SELECT {COLUMNS} FROM approvals WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(approval).transpose()
    }

    /// The approvals whose notices are among `notices` (decided or not).
    pub async fn approvals_by_notice(&self, notices: &[&str]) -> Result<Vec<Approval>> {
        if notices.is_empty() {
            return Ok(Vec::new());
        }
        let mut found = Vec::new();
        for chunk in notices.chunks(super::LIST_CHUNK) {
            let sql =
                format!("SELECT {COLUMNS} FROM approvals WHERE notice_event IN ({})", super::list(1, chunk.len()));
            let rows = chunk.iter().fold(sqlx::query(&sql), |q, n| q.bind(*n)).fetch_all(&self.pool).await?;
            found.extend(rows.iter().map(approval).collect::<Result<Vec<_>>>()?);
        }
        Ok(found)
    }

    /// Decides approval `id` unless it was decided already; true if this decided it.
    pub async fn decide_approval(&self, id: i64, decision: &str, by: Option<&EventId>) -> Result<bool> {
        let done =
            sqlx::query("UPDATE approvals SET decision = $1, decided_by = $2 WHERE id = $3 AND decision IS NULL")
                .bind(decision)
                .bind(by.map(EventId::as_str))
                .bind(id)
                .execute(&self.writer)
                .await?;
        Ok(done.rows_affected() == 1)
    }
}

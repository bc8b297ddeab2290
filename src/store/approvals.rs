//! `tool_results`, `tool_starts` and `approvals`: what MCP tool calls returned (so a
//! resumed turn never calls a tool twice), which calls started (so one cut off by a crash
//! is never made again unasked), and the calls waiting for their asker's approval, each
//! approval bound to what its notice showed and spent by one run.

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
    /// Which ask of the call this is (0 first; more after a cut-off run).
    pub attempt: u32,
    /// The hash of what the notice showed (`turn::tools::shown::hash`).
    pub shown_hash: Option<String>,
    /// When the approved call started: the decision is spent.
    pub used_at: Option<i64>,
}

/// An approval to open for a call.
#[derive(Debug, Clone, Copy)]
pub struct NewApproval<'a> {
    pub turn_id: i64,
    pub nth: u32,
    pub room_id: &'a RoomId,
    pub asker: &'a UserId,
    pub tool: &'a str,
    pub shown_hash: &'a str,
    pub now: i64,
    pub expires_at: i64,
}

const COLUMNS: &str = "id, turn_id, room_id, asker, tool, notice_event, created_at, expires_at, decision, decided_by, attempt, shown_hash, used_at";

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
        attempt: u32::try_from(r.try_get::<i64, _>("attempt")?).unwrap_or(u32::MAX),
        shown_hash: r.try_get("shown_hash")?,
        used_at: r.try_get("used_at")?,
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

    /// The approval of call `nth` of the turn: the one opened before, if its decision is
    /// not spent yet (a resumed turn finds it, with its first deadline), else a new ask
    /// (the next attempt) opened now.
    pub async fn open_approval(&self, a: &NewApproval<'_>) -> Result<Approval> {
        let latest = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM approvals WHERE turn_id = $1 AND nth = $2 ORDER BY attempt DESC LIMIT 1"
        ))
        .bind(a.turn_id)
        .bind(i64::from(a.nth))
        .fetch_optional(&self.writer)
        .await?;
        let attempt = match latest.as_ref().map(approval).transpose()? {
            Some(open) if open.used_at.is_none() => return Ok(open),
            Some(spent) => i64::from(spent.attempt) + 1,
            None => 0,
        };
        sqlx::query(
            "INSERT INTO approvals (turn_id, nth, room_id, asker, tool, created_at, expires_at, attempt, shown_hash)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (turn_id, nth, attempt) DO NOTHING",
        )
        .bind(a.turn_id)
        .bind(i64::from(a.nth))
        .bind(a.room_id.as_str())
        .bind(a.asker.as_str())
        .bind(a.tool)
        .bind(a.now)
        .bind(a.expires_at)
        .bind(attempt)
        .bind(a.shown_hash)
        .execute(&self.writer)
        .await?;
        let row =
            sqlx::query(&format!("SELECT {COLUMNS} FROM approvals WHERE turn_id = $1 AND nth = $2 AND attempt = $3"))
                .bind(a.turn_id)
                .bind(i64::from(a.nth))
                .bind(attempt)
                .fetch_one(&self.writer)
                .await?;
        approval(&row)
    }

    /// Spends approval `id`'s decision on the run starting now; false if it was spent.
    pub async fn use_approval(&self, id: i64, now: i64) -> Result<bool> {
        let done = sqlx::query("UPDATE approvals SET used_at = $1 WHERE id = $2 AND used_at IS NULL")
            .bind(now)
            .bind(id)
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Whether call `nth` of `turn` was started (its result recorded or not).
    pub async fn tool_started(&self, turn: i64, nth: u32) -> Result<bool> {
        let row = sqlx::query("SELECT 1 AS one FROM tool_starts WHERE turn_id = $1 AND nth = $2")
            .bind(turn)
            .bind(i64::from(nth))
            .fetch_optional(&self.writer)
            .await?;
        Ok(row.is_some())
    }

    /// Records that call `nth` of `turn` starts now, before it is made.
    pub async fn start_tool(&self, turn: i64, nth: u32, now: i64) -> Result<()> {
        sqlx::query("INSERT INTO tool_starts (turn_id, nth, started_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING")
            .bind(turn)
            .bind(i64::from(nth))
            .bind(now)
            .execute(&self.writer)
            .await?;
        Ok(())
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
            let rows = chunk
                .iter()
                .fold(sqlx::query(&self.many_params(&sql)), |q, n| q.bind(*n))
                .fetch_all(&self.pool)
                .await?;
            found.extend(rows.iter().map(approval).collect::<Result<Vec<_>>>()?);
        }
        Ok(found)
    }

    /// Decides approval `id` unless it was decided already; true if this decided it. A
    /// reaction `sent_at` (ms) after the approval's deadline decides nothing.
    pub async fn decide_approval(&self, id: i64, decision: &str, by: Option<&EventId>, sent_at: i64) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE approvals SET decision = $1, decided_by = $2
             WHERE id = $3 AND decision IS NULL AND expires_at >= $4",
        )
        .bind(decision)
        .bind(by.map(EventId::as_str))
        .bind(id)
        .bind(sent_at)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

//! Retention: what richbot keeps, it keeps for `bot.history_days` (30), then forgets. The
//! room history and everything derived from it (finished turns, their approvals and
//! outbox rows, the messages richbot sent and their buttons) older than that is deleted;
//! token use is kept only as long as the budgets' rolling day needs it. Pending events
//! and running turns are never pruned, whatever their age.
//!
//! Deletes go in batches of [`BATCH`] rows, each its own short transaction, bounded by a
//! cut-off found once by primary key (events and turns are numbered in arrival order), so
//! pruning a large backlog never holds the writer for long.

use std::time::Duration;

use sqlx::Row;

use super::{DAY_MS, Result, Store};

/// Rows per delete.
const BATCH: i64 = 5_000;
/// How often the pruner runs.
pub const EVERY: Duration = Duration::from_secs(3600);

/// What one prune deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    pub events: u64,
    pub turns: u64,
    pub sent: u64,
    pub usage: u64,
}

impl Store {
    /// Deletes what is older than `keep` at `now` (see the module docs).
    pub async fn prune(&self, keep: Duration, now: i64) -> Result<Pruned> {
        let before = now.saturating_sub(crate::clock::ms(keep));
        let mut pruned = Pruned::default();
        // Events: those received before the cut-off have a seq below the first after it.
        let cutoff = self.first_at_or_after("SELECT MIN(seq) AS n FROM events WHERE received_at >= $1", before).await?;
        pruned.events = self
            .batches(
                "DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE seq < $1 AND processed = 1 LIMIT $2)",
                cutoff,
            )
            .await?;
        // Finished turns started before the cut-off, and what hangs on them.
        let cutoff = self.first_at_or_after("SELECT MIN(id) AS n FROM turns WHERE started_at >= $1", before).await?;
        for table in ["approvals", "outbox", "tool_starts", "tool_results", "turn_replies", "uploads"] {
            let sql = format!(
                "DELETE FROM {table} WHERE turn_id IN (SELECT id FROM turns WHERE id < $1 AND state = 'done' LIMIT $2)"
            );
            self.batches(&sql, cutoff).await?;
        }
        pruned.turns = self
            .batches(
                "DELETE FROM turns WHERE id IN (SELECT id FROM turns WHERE id < $1 AND state = 'done' LIMIT $2)",
                cutoff,
            )
            .await?;
        // Messages richbot sent, last written before the cut-off, and their buttons.
        pruned.sent = self
            .batches(
                "DELETE FROM sent_messages WHERE event_id IN
                 (SELECT event_id FROM sent_messages WHERE sent_at < $1 AND next_edit_at < $1 LIMIT $2)",
                before,
            )
            .await?;
        sqlx::query("DELETE FROM sent_buttons WHERE event_id NOT IN (SELECT event_id FROM sent_messages)")
            .execute(&self.writer)
            .await?;
        // Token use: the budgets look back one day; an hour more for clocks that differ.
        pruned.usage = self
            .batches(
                "DELETE FROM llm_usage WHERE id IN (SELECT id FROM llm_usage WHERE at < $1 LIMIT $2)",
                now - DAY_MS - 3_600_000,
            )
            .await?;
        self.batches(
            "DELETE FROM audio_usage WHERE id IN (SELECT id FROM audio_usage WHERE at < $1 LIMIT $2)",
            now - DAY_MS - 3_600_000,
        )
        .await?;
        // Voice messages' words, as long as the history.
        self.batches(
            "DELETE FROM transcripts WHERE event_id IN (SELECT event_id FROM transcripts WHERE created_at < $1 LIMIT $2)",
            before,
        )
        .await?;
        sqlx::query("DELETE FROM budget_notices WHERE until < $1").bind(now).execute(&self.writer).await?;
        // Which event first carried each megolm message index, as long as the history.
        self.batches(
            "DELETE FROM crypto_message_indices WHERE (session_id, message_index) IN
             (SELECT session_id, message_index FROM crypto_message_indices WHERE seen_at < $1 LIMIT $2)",
            before,
        )
        .await?;
        // Polls that ended before the cut-off: their votes by reply with them (their poll
        // responses are pruned with the events).
        sqlx::query("DELETE FROM poll_replies WHERE poll_id IN (SELECT id FROM polls WHERE ended_at < $1)")
            .bind(before)
            .execute(&self.writer)
            .await?;
        sqlx::query("DELETE FROM polls WHERE ended_at < $1").bind(before).execute(&self.writer).await?;
        // Schedules that ended (done, cancelled, stopped) before it.
        sqlx::query("DELETE FROM schedules WHERE state <> 'active' AND ended_at < $1")
            .bind(before)
            .execute(&self.writer)
            .await?;
        Ok(pruned)
    }

    /// The first seq (or id) at or after `at`, from `sql`; past the last when none is.
    async fn first_at_or_after(&self, sql: &str, at: i64) -> Result<i64> {
        let row = sqlx::query(sql).bind(at).fetch_one(&self.writer).await?;
        Ok(row.try_get::<Option<i64>, _>("n")?.unwrap_or(i64::MAX))
    }

    /// Runs a batched delete (`$1` the bound, `$2` the batch size) until it deletes nothing.
    async fn batches(&self, sql: &str, bound: i64) -> Result<u64> {
        let mut total = 0;
        loop {
            let done = sqlx::query(sql).bind(bound).bind(BATCH).execute(&self.writer).await?.rows_affected();
            total += done;
            if done < BATCH as u64 {
                return Ok(total);
            }
        }
    }

    /// Prunes every [`EVERY`], keeping `keep`, until the task is aborted.
    pub async fn keep_pruning(self, keep: Duration) {
        loop {
            match self.prune(keep, crate::clock::now_ms()).await {
                Ok(p) if p != Pruned::default() => tracing::info!(?p, "pruned what is past bot.history_days"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "could not prune old history; trying again later"),
            }
            tokio::time::sleep(EVERY).await;
        }
    }
}

//! `llm_usage`: token budgets over a rolling day. A call's estimated cost is reserved in
//! one conditional `INSERT` (so two turns cannot both take the last of a budget), then
//! settled with what the API reported.

use ruma::{RoomId, UserId};
use sqlx::Row;

use super::{Result, Store};

/// A rolling day, in milliseconds.
pub const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// Token budgets per rolling day; 0 is no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budgets {
    pub per_user: u64,
    pub per_room: u64,
    pub total: u64,
}

/// Which budget a reservation did not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetKind {
    User,
    Room,
    Deployment,
}

/// A reservation that did not fit: which budget, and when enough of it refills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spent {
    pub kind: BudgetKind,
    pub refills_at: i64,
}

/// What one user used over the rolling day: `tokens` as the budget counts them, and of
/// the prompt tokens within, those the provider reused from its cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DayUse {
    pub tokens: u64,
    pub turns: u64,
    pub prompt: u64,
    pub cached: u64,
}

/// The advisory lock budget reservations take on PostgreSQL: "rbbudget" in ASCII, apart
/// from the lock `serve` and `migrate` take (`lock.rs`).
const BUDGET_LOCK: i64 = 0x72_62_62_75_64_67_65_74;

fn limit(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Store {
    /// Reserves `tokens` for a call on behalf of `user` in `room` at `now`, if every
    /// budget has room for them; otherwise says which one is spent. Returns the
    /// reservation's id, to settle.
    pub async fn reserve_tokens(
        &self,
        user: &UserId,
        room: &RoomId,
        tokens: u64,
        budgets: Budgets,
        now: i64,
    ) -> Result<Result<i64, Spent>> {
        let since = now - DAY_MS;
        let tokens = limit(tokens);
        // The sums and the insert must see every other reservation: one at a time. SQLite
        // has one writer; on PostgreSQL several instances (or connections) reserve at once,
        // and under READ COMMITTED two could both see room for the last tokens, so they
        // queue on a transaction-level advisory lock, held until the commit.
        let mut tx = self.writer.begin().await?;
        if self.backend == super::Backend::Postgres {
            sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(BUDGET_LOCK).execute(&mut *tx).await?;
        }
        let row = sqlx::query(
            "INSERT INTO llm_usage (at, user_id, room_id, tokens)
             SELECT $1, $2, $3, $4
             WHERE ($5 = 0 OR (SELECT CAST(COALESCE(SUM(tokens), 0) AS BIGINT) FROM llm_usage WHERE user_id = $2 AND at > $8) + $4 <= $5)
               AND ($6 = 0 OR (SELECT CAST(COALESCE(SUM(tokens), 0) AS BIGINT) FROM llm_usage WHERE room_id = $3 AND at > $8) + $4 <= $6)
               AND ($7 = 0 OR (SELECT CAST(COALESCE(SUM(tokens), 0) AS BIGINT) FROM llm_usage WHERE at > $8) + $4 <= $7)
             RETURNING id",
        )
        .bind(now)
        .bind(user.as_str())
        .bind(room.as_str())
        .bind(tokens)
        .bind(limit(budgets.per_user))
        .bind(limit(budgets.per_room))
        .bind(limit(budgets.total))
        .bind(since)
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        if let Some(row) = row {
            return Ok(Ok(row.try_get("id")?));
        }
        let scopes = [
            (BudgetKind::User, budgets.per_user, "user_id = $2", Some(user.as_str())),
            (BudgetKind::Room, budgets.per_room, "room_id = $2", Some(room.as_str())),
            (BudgetKind::Deployment, budgets.total, "$2 IS NULL", None),
        ];
        for (kind, max, filter, value) in scopes {
            if max == 0 {
                continue;
            }
            let sql = format!("SELECT at, tokens FROM llm_usage WHERE at > $1 AND {filter} ORDER BY at");
            let rows = sqlx::query(&sql).bind(since).bind(value).fetch_all(&self.pool).await?;
            let used: i64 = rows.iter().map(|r| r.try_get::<i64, _>("tokens").unwrap_or(0)).sum();
            let over = used + tokens - limit(max);
            if over <= 0 {
                continue;
            }
            // Enough of the oldest use must age out of the window.
            let mut freed = 0;
            let mut refills_at = now + DAY_MS;
            for r in &rows {
                freed += r.try_get::<i64, _>("tokens")?;
                if freed >= over {
                    refills_at = r.try_get::<i64, _>("at")? + DAY_MS;
                    break;
                }
            }
            return Ok(Err(Spent { kind, refills_at }));
        }
        // A budget filled between the two queries; the earliest it could refill is unknown.
        Ok(Err(Spent { kind: BudgetKind::Deployment, refills_at: now + DAY_MS }))
    }

    /// Replaces a reservation's estimate with the tokens the call really used (as the
    /// budget counts them), and records its prompt tokens and the cached part of them.
    pub async fn settle_tokens(&self, id: i64, tokens: u64, prompt: u64, cached: u64) -> Result<()> {
        sqlx::query(
            "UPDATE llm_usage SET tokens = $1, settled = 1, prompt_tokens = $2, cached_tokens = $3 WHERE id = $4",
        )
        .bind(limit(tokens))
        .bind(limit(prompt))
        .bind(limit(cached))
        .bind(id)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// What `user` used over the rolling day before `now`: tokens, and the turns of theirs
    /// that asked the model.
    pub async fn day_use(&self, user: &UserId, now: i64) -> Result<DayUse> {
        let since = now - DAY_MS;
        let row = sqlx::query(
            "SELECT CAST(COALESCE(SUM(tokens), 0) AS BIGINT) AS n, CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT) AS p,
                    CAST(COALESCE(SUM(cached_tokens), 0) AS BIGINT) AS c
             FROM llm_usage WHERE user_id = $1 AND at > $2",
        )
        .bind(user.as_str())
        .bind(since)
        .fetch_one(&self.pool)
        .await?;
        let (tokens, prompt, cached): (i64, i64, i64) = (row.try_get("n")?, row.try_get("p")?, row.try_get("c")?);
        // Turns that asked the model: not richbot's own notices (commands, limits) and not
        // those refused before any model call.
        let turns: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM turns WHERE asker = $1 AND started_at > $2 AND notice IS NULL AND rounds > 0",
        )
        .bind(user.as_str())
        .bind(since)
        .fetch_one(&self.pool)
        .await?
        .try_get("n")?;
        Ok(DayUse {
            tokens: tokens.unsigned_abs(),
            turns: turns.unsigned_abs(),
            prompt: prompt.unsigned_abs(),
            cached: cached.unsigned_abs(),
        })
    }

    /// Whether the spent budget `key` is to be told now: true the first time, and again
    /// only after the last telling's `until` has passed. Atomic, so one notice per budget.
    pub async fn budget_notice_due(&self, key: &str, until: i64, now: i64) -> Result<bool> {
        let row = sqlx::query(
            "INSERT INTO budget_notices (key, until) VALUES ($1, $2)
             ON CONFLICT (key) DO UPDATE SET until = excluded.until WHERE budget_notices.until <= $3
             RETURNING 1 AS due",
        )
        .bind(key)
        .bind(until)
        .bind(now)
        .fetch_optional(&self.writer)
        .await?;
        Ok(row.is_some())
    }
}

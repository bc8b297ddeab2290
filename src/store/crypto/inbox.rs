//! The personas' crypto inbox: what the homeserver pushed for their devices (one row per
//! transaction and persona), until their crypto has taken it; rows that keep failing are
//! counted, and their failing pieces set aside for the admin to look at.

use sqlx::Row;

use crate::store::{Result, Store};

/// Crypto inbox pieces set aside that are kept per persona (the newest).
pub const ASIDE_KEPT: i64 = 1000;

/// `s` with control characters (a NUL among them, which PostgreSQL refuses in text)
/// replaced, for text that may quote what a stranger sent.
fn printable(s: &str) -> String {
    s.chars().map(|c| if c.is_control() && c != '\n' { '\u{fffd}' } else { c }).collect()
}

/// A row of a persona's crypto inbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxRow {
    pub seq: i64,
    pub body: String,
    /// Failed attempts at it so far.
    pub attempts: i64,
}

impl Store {
    /// Stores what a transaction brought for the personas' devices: `(persona, body)`.
    pub async fn crypto_inbox_add(&self, rows: &[(String, String)], now: i64) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut tx = self.writer.begin().await?;
        for (persona, body) in rows {
            sqlx::query("INSERT INTO crypto_inbox (persona, body, received_at) VALUES ($1, $2, $3)")
                .bind(persona.as_str())
                .bind(body.as_str())
                .bind(now)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Up to `limit` of `persona`'s crypto inbox, oldest first.
    pub async fn crypto_inbox(&self, persona: &str, limit: i64) -> Result<Vec<InboxRow>> {
        let rows = sqlx::query("SELECT seq, body, attempts FROM crypto_inbox WHERE persona = $1 ORDER BY seq LIMIT $2")
            .bind(persona)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(InboxRow { seq: r.try_get("seq")?, body: r.try_get("body")?, attempts: r.try_get("attempts")? })
            })
            .collect()
    }

    /// `persona`'s crypto has taken its inbox up to `seq`.
    pub async fn crypto_inbox_done(&self, persona: &str, seq: i64) -> Result<()> {
        sqlx::query("DELETE FROM crypto_inbox WHERE persona = $1 AND seq <= $2")
            .bind(persona)
            .bind(seq)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// One more failed attempt at `persona`'s inbox row `seq`: how many there have been
    /// (0 when the row is gone, taken meanwhile).
    pub async fn crypto_inbox_failed(&self, persona: &str, seq: i64) -> Result<i64> {
        let attempts: Option<i64> = sqlx::query(
            "UPDATE crypto_inbox SET attempts = attempts + 1 WHERE persona = $1 AND seq = $2 RETURNING attempts",
        )
        .bind(persona)
        .bind(seq)
        .fetch_optional(&self.writer)
        .await?
        .map(|r| r.try_get("attempts"))
        .transpose()?;
        Ok(attempts.unwrap_or(0))
    }

    /// Sets `piece` of `persona`'s inbox row `seq` aside (`error`: why), in
    /// `crypto_inbox_aside`, which keeps the newest [`ASIDE_KEPT`] per persona; the row
    /// keeps `rest` (`None`: it was all the row had, and the row goes). `false` when the
    /// row is gone (taken meanwhile).
    pub async fn crypto_inbox_set_aside(
        &self,
        persona: &str,
        seq: i64,
        piece: &str,
        rest: Option<&str>,
        error: &str,
        now: i64,
    ) -> Result<bool> {
        let mut tx = self.writer.begin().await?;
        let aside = sqlx::query(
            "INSERT INTO crypto_inbox_aside (seq, persona, body, received_at, set_aside_at, error)
             SELECT seq, persona, $3, received_at, $4, $5 FROM crypto_inbox WHERE persona = $1 AND seq = $2",
        )
        .bind(persona)
        .bind(seq)
        .bind(piece)
        .bind(now)
        .bind(printable(error))
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        let left = match rest {
            Some(rest) => sqlx::query("UPDATE crypto_inbox SET body = $3 WHERE persona = $1 AND seq = $2")
                .bind(persona)
                .bind(seq)
                .bind(rest),
            None => sqlx::query("DELETE FROM crypto_inbox WHERE persona = $1 AND seq = $2").bind(persona).bind(seq),
        };
        left.execute(&mut *tx).await?;
        sqlx::query(
            "DELETE FROM crypto_inbox_aside WHERE persona = $1 AND id NOT IN
             (SELECT id FROM crypto_inbox_aside WHERE persona = $1 ORDER BY id DESC LIMIT $2)",
        )
        .bind(persona)
        .bind(ASIDE_KEPT)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(aside)
    }

    /// `persona`'s inbox pieces set aside, oldest first: `(seq of their row, error)`.
    pub async fn crypto_inbox_aside(&self, persona: &str) -> Result<Vec<(i64, String)>> {
        let rows = sqlx::query("SELECT seq, error FROM crypto_inbox_aside WHERE persona = $1 ORDER BY id")
            .bind(persona)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| Ok((r.try_get("seq")?, r.try_get("error")?))).collect()
    }

    /// The personas with something in their crypto inbox.
    pub async fn crypto_inbox_personas(&self) -> Result<Vec<String>> {
        let rows = sqlx::query("SELECT DISTINCT persona FROM crypto_inbox").fetch_all(&self.pool).await?;
        rows.iter().map(|r| Ok(r.try_get("persona")?)).collect()
    }
}

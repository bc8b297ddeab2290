//! `meta` and `personas`: facts about this installation.

use rand::distr::{Alphanumeric, SampleString};
use ruma::UserId;
use sqlx::Row;

use super::{Result, Store};

impl Store {
    /// This installation's random id (10 alphanumeric characters), created on first use.
    pub async fn instance_id(&self) -> Result<String> {
        let candidate = Alphanumeric.sample_string(&mut rand::rng(), 10);
        sqlx::query("INSERT INTO meta (key, value) VALUES ('instance_id', $1) ON CONFLICT (key) DO NOTHING")
            .bind(&candidate)
            .execute(&self.writer)
            .await?;
        let row = sqlx::query("SELECT value FROM meta WHERE key = 'instance_id'").fetch_one(&self.pool).await?;
        Ok(row.try_get("value")?)
    }

    /// Whether a persona was registered with the homeserver.
    pub async fn persona_registered(&self, user_id: &UserId) -> Result<bool> {
        let row = sqlx::query("SELECT 1 FROM personas WHERE user_id = $1")
            .bind(user_id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }

    /// Records that a persona is registered.
    pub async fn mark_persona_registered(&self, user_id: &UserId, now: i64) -> Result<()> {
        sqlx::query("INSERT INTO personas (user_id, registered_at) VALUES ($1, $2) ON CONFLICT (user_id) DO NOTHING")
            .bind(user_id.as_str())
            .bind(now)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// One fact of `meta` (`None` when unset).
    pub async fn meta(&self, key: &str) -> Result<Option<String>> {
        let row = sqlx::query("SELECT value FROM meta WHERE key = $1").bind(key).fetch_optional(&self.pool).await?;
        row.map(|r| Ok(r.try_get("value")?)).transpose()
    }

    /// Sets one fact of `meta`.
    pub async fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )
        .bind(key)
        .bind(value)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Takes one fact of `meta`: its value, and it is gone.
    pub async fn take_meta(&self, key: &str) -> Result<Option<String>> {
        let row = sqlx::query("DELETE FROM meta WHERE key = $1 RETURNING value")
            .bind(key)
            .fetch_optional(&self.writer)
            .await?;
        row.map(|r| Ok(r.try_get("value")?)).transpose()
    }
}

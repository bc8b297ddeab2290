//! The personas' crypto secrets sealed at rest with the pickle key (`crate::pickle`).
//!
//! The values of four tables are sealed: `crypto_kv` (the account, the cross-signing
//! keys, secrets, and the smaller rows beside them), `crypto_olm_sessions`,
//! `crypto_group_sessions` (room keys) and `crypto_outbound_sessions`. What stays clear is
//! public (other people's devices and identities, and richbot's own `richbot.` rows of
//! `crypto_kv`: a persona's device id, whether it is cross-signed, which `reset-crypto`
//! reads when the key is lost) or looked up by its value (Olm message hashes). Every write of those tables seals (`crypto_state.rs`) and every read opens
//! (`crypto_lookup.rs`), so nothing above the store sees a sealed value.
//!
//! [`Store::seal_crypto_state`] runs at start: it refuses a database whose sealed values
//! the configured key does not open (or when no key is configured), and seals every value
//! still clear (a store from before the key, or written by an older richbot), so an
//! existing store is carried over, not reset. Each value is replaced only if it is still
//! the one read, so a save made meanwhile is never overwritten.

use std::sync::Arc;

use sqlx::Row;

use crate::pickle::{self, PickleKey};
use crate::store::{Error, Result, Store};

/// Each sealed table and the column that, with `persona`, names a row.
const SEALED: [(&str, &str); 4] = [
    ("crypto_kv", "key"),
    ("crypto_olm_sessions", "session_id"),
    ("crypto_group_sessions", "session_id"),
    ("crypto_outbound_sessions", "room_id"),
];

/// Rows sealed per transaction at start.
const BATCH: i64 = 200;

/// SQL true for a sealed `value`.
const IS_SEALED: &str = "substr(value, 1, 5) = 'rbk1:'";

/// The `crypto_kv` keys that stay clear: richbot's own public bookkeeping.
const CLEAR_KV: &str = "richbot.";

/// SQL true for a row that is to be sealed but is not yet.
fn unsealed(table: &str) -> String {
    let public = if table == "crypto_kv" { format!(" AND substr(key, 1, 8) <> '{CLEAR_KV}'") } else { String::new() };
    format!("NOT ({IS_SEALED}){public}")
}

impl Store {
    /// This handle seals and opens the crypto secrets with `key` (none: values are written
    /// clear, and a sealed one does not open).
    #[must_use]
    pub fn with_pickle_key(mut self, key: Option<Arc<PickleKey>>) -> Self {
        self.pickles = key;
        self
    }

    /// `clear`, as `persona`'s row stores it.
    pub(in crate::store) fn seal(&self, persona: &str, clear: &str) -> String {
        match &self.pickles {
            Some(key) => key.seal(persona, clear),
            None => clear.to_owned(),
        }
    }

    /// `clear`, as `persona`'s `crypto_kv` row `key` stores it.
    pub(in crate::store) fn seal_kv(&self, persona: &str, key: &str, clear: &str) -> String {
        if key.starts_with(CLEAR_KV) { clear.to_owned() } else { self.seal(persona, clear) }
    }

    /// A stored value of `persona`'s, clear.
    pub(in crate::store) fn unseal(&self, persona: &str, stored: String) -> Result<String> {
        pickle::open(self.pickles.as_deref(), persona, stored).map_err(|e| Error::Pickle(persona.to_owned(), e))
    }

    /// Checks the pickle key against the database and seals every crypto value still
    /// clear; returns how many were sealed.
    pub async fn seal_crypto_state(&self) -> Result<u64> {
        self.check_pickle_key().await?;
        let Some(key) = self.pickles.clone() else { return Ok(0) };
        let mut sealed = 0;
        for (table, column) in SEALED {
            loop {
                let rows = sqlx::query(&format!(
                    "SELECT persona, {column} AS id, value FROM {table} WHERE {} LIMIT {BATCH}",
                    unsealed(table)
                ))
                .fetch_all(&self.pool)
                .await?;
                let mut done = 0;
                let mut tx = self.writer.begin().await?;
                for row in &rows {
                    let (persona, id, value): (String, String, String) =
                        (row.try_get("persona")?, row.try_get("id")?, row.try_get("value")?);
                    let update = sqlx::query(&format!(
                        "UPDATE {table} SET value = $1 WHERE persona = $2 AND {column} = $3 AND value = $4"
                    ))
                    .bind(key.seal(&persona, &value))
                    .bind(&persona)
                    .bind(&id)
                    .bind(&value)
                    .execute(&mut *tx)
                    .await?;
                    done += update.rows_affected();
                }
                tx.commit().await?;
                sealed += done;
                // A batch that sealed nothing was rewritten meanwhile; the next start
                // seals what is left.
                if rows.len() < BATCH as usize || done == 0 {
                    break;
                }
            }
        }
        Ok(sealed)
    }

    /// Whether the stored crypto state opens with this handle's pickle key: an error
    /// naming the fix when a sealed value does not (no key, or another).
    pub async fn check_pickle_key(&self) -> Result<()> {
        if let Some((persona, value)) = self.a_sealed_value().await? {
            self.unseal(&persona, value)?;
        }
        Ok(())
    }

    /// One sealed value and its persona, if any table holds one.
    async fn a_sealed_value(&self) -> Result<Option<(String, String)>> {
        for (table, _) in SEALED {
            let row = sqlx::query(&format!("SELECT persona, value FROM {table} WHERE {IS_SEALED} LIMIT 1"))
                .fetch_optional(&self.pool)
                .await?;
            if let Some(row) = row {
                return Ok(Some((row.try_get("persona")?, row.try_get("value")?)));
            }
        }
        Ok(None)
    }

    /// How many crypto values that are to be sealed are still clear (for `check` and tests).
    pub async fn clear_crypto_values(&self) -> Result<i64> {
        let mut n = 0;
        for (table, _) in SEALED {
            let row = sqlx::query(&format!("SELECT COUNT(*) AS n FROM {table} WHERE {}", unsealed(table)))
                .fetch_one(&self.pool)
                .await?;
            n += row.try_get::<i64, _>("n")?;
        }
        Ok(n)
    }
}

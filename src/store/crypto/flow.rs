//! What moves through the personas' crypto besides its inbox (`crypto_inbox`): the
//! crypto leases (among several instances, who advances a persona's Olm state), and the
//! encrypted events waiting for their room key (`key_waits`).

use ruma::{OwnedRoomId, RoomId};
use sqlx::Row;

use crate::store::{Result, Store, id};

/// Events set aside to wait for their key have this `processed` value: neither pending
/// (0) nor done (1), so the room goes on without them.
pub const WAITING_FOR_KEY: i64 = 2;

impl Store {
    /// Claims `persona`'s crypto for `holder` (session: its `serve` lock's backend) until
    /// `now + lease_ms`, unless another holds a live lease. Returns the lease's generation
    /// when `holder` has it: it changes whenever the lease changes hands, so a holder whose
    /// last generation differs knows another instance advanced the state meanwhile.
    pub async fn claim_crypto(
        &self,
        persona: &str,
        holder: &str,
        session: Option<i64>,
        now: i64,
        lease_ms: i64,
    ) -> Result<Option<i64>> {
        let sql = format!(
            "INSERT INTO crypto_leases (persona, holder, session, expires_at, generation) VALUES ($1, $2, $3, $4, 1)
             ON CONFLICT (persona) DO UPDATE
             SET holder = excluded.holder, session = excluded.session, expires_at = excluded.expires_at,
                 generation = CASE WHEN crypto_leases.holder = excluded.holder THEN crypto_leases.generation
                                   ELSE crypto_leases.generation + 1 END
             WHERE crypto_leases.holder = excluded.holder OR NOT ({})
             RETURNING generation",
            self.live("crypto_leases", "$5")
        );
        let row = sqlx::query(&sql)
            .bind(persona)
            .bind(holder)
            .bind(session)
            .bind(now + lease_ms)
            .bind(now)
            .fetch_optional(&self.writer)
            .await?;
        row.map(|r| Ok(r.try_get("generation")?)).transpose()
    }

    /// Who last held `persona`'s crypto lease, and its generation (for tests and
    /// operators).
    pub async fn crypto_lease(&self, persona: &str) -> Result<Option<(String, i64)>> {
        let row = sqlx::query("SELECT holder, generation FROM crypto_leases WHERE persona = $1")
            .bind(persona)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| Ok((r.try_get("holder")?, r.try_get("generation")?))).transpose()
    }

    /// Gives `persona`'s crypto up (the row stays, with its generation).
    pub async fn release_crypto(&self, persona: &str, holder: &str) -> Result<()> {
        sqlx::query("UPDATE crypto_leases SET expires_at = 0 WHERE persona = $1 AND holder = $2")
            .bind(persona)
            .bind(holder)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Sets the encrypted event `seq` aside until its room key (`session_id`) arrives or
    /// `until` (ms) passes.
    pub async fn await_key(&self, seq: i64, room: &RoomId, session_id: &str, until: i64) -> Result<()> {
        let mut tx = self.writer.begin().await?;
        sqlx::query(
            "INSERT INTO key_waits (event_seq, room_id, session_id, wait_until) VALUES ($1, $2, $3, $4)
             ON CONFLICT (event_seq) DO NOTHING",
        )
        .bind(seq)
        .bind(room.as_str())
        .bind(session_id)
        .bind(until)
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE events SET processed = $1 WHERE seq = $2 AND processed = 0")
            .bind(WAITING_FOR_KEY)
            .bind(seq)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Whether the event `seq` waited for its key and the wait ran out.
    pub async fn key_wait_expired(&self, seq: i64) -> Result<bool> {
        let row = sqlx::query("SELECT expired FROM key_waits WHERE event_seq = $1")
            .bind(seq)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get::<i64, _>("expired")).transpose()?.is_some_and(|e| e != 0))
    }

    /// The event `seq` no longer waits (decrypted, or given up).
    pub async fn end_key_wait(&self, seq: i64) -> Result<()> {
        sqlx::query("DELETE FROM key_waits WHERE event_seq = $1").bind(seq).execute(&self.writer).await?;
        Ok(())
    }

    /// Room keys arrived: the events waiting for them are pending again. Returns their rooms.
    pub async fn keys_arrived(&self, keys: &[(String, String)]) -> Result<Vec<OwnedRoomId>> {
        let mut rooms: Vec<OwnedRoomId> = Vec::new();
        let mut tx = self.writer.begin().await?;
        for (room, session) in keys {
            let woken = sqlx::query(
                "UPDATE events SET processed = 0 WHERE processed = $3 AND seq IN
                 (SELECT event_seq FROM key_waits WHERE room_id = $1 AND session_id = $2)",
            )
            .bind(room.as_str())
            .bind(session.as_str())
            .bind(WAITING_FOR_KEY)
            .execute(&mut *tx)
            .await?;
            sqlx::query("DELETE FROM key_waits WHERE room_id = $1 AND session_id = $2")
                .bind(room.as_str())
                .bind(session.as_str())
                .execute(&mut *tx)
                .await?;
            if woken.rows_affected() > 0
                && let Ok(room) = OwnedRoomId::try_from(room.as_str())
                && !rooms.contains(&room)
            {
                rooms.push(room);
            }
        }
        tx.commit().await?;
        Ok(rooms)
    }

    /// Waits that ran out by `now`: their events are pending again (their step gives them
    /// up). Returns their rooms.
    pub async fn expire_key_waits(&self, now: i64) -> Result<Vec<OwnedRoomId>> {
        let mut tx = self.writer.begin().await?;
        let rows = sqlx::query("SELECT event_seq, room_id FROM key_waits WHERE expired = 0 AND wait_until <= $1")
            .bind(now)
            .fetch_all(&mut *tx)
            .await?;
        let mut rooms: Vec<OwnedRoomId> = Vec::new();
        for row in &rows {
            let seq: i64 = row.try_get("event_seq")?;
            sqlx::query("UPDATE key_waits SET expired = 1 WHERE event_seq = $1").bind(seq).execute(&mut *tx).await?;
            sqlx::query("UPDATE events SET processed = 0 WHERE seq = $1 AND processed = $2")
                .bind(seq)
                .bind(WAITING_FOR_KEY)
                .execute(&mut *tx)
                .await?;
            let room: OwnedRoomId = id(row, "room_id")?;
            if !rooms.contains(&room) {
                rooms.push(room);
            }
        }
        tx.commit().await?;
        Ok(rooms)
    }

    /// How many of `room`'s events wait for their keys now.
    pub async fn key_waits(&self, room: &RoomId) -> Result<i64> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM key_waits WHERE room_id = $1 AND expired = 0")
            .bind(room.as_str())
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get("n")?)
    }

    /// When the next wait runs out (ms), if any does.
    pub async fn next_key_wait_end(&self) -> Result<Option<i64>> {
        let row = sqlx::query("SELECT MIN(wait_until) AS next FROM key_waits WHERE expired = 0")
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get("next")?)
    }
}

//! A persona's crypto inbox, taken in order, a batch at a time: each row through the
//! machine (`inbound::receive`), then the machine's own requests go out (one-time keys to
//! replenish, devices to query) and the rows are deleted. A crash between the two hands a
//! row over again: its Olm messages are known by their hash and refused the second time,
//! the rest is idempotent.

use std::sync::atomic::Ordering;

use super::apart::{Apart, Failed, take_apart};
use super::inbound::receive;
use super::machine::Held;
use super::pushed::Pushed;
use super::requests::{self, Device};
use super::{Counters, Error, Settled};
use crate::clock::now_ms;

/// Crypto inbox rows taken at once.
const BATCH: i64 = 50;

/// Failed attempts at one crypto inbox row before it is set aside.
pub const ATTEMPTS: i64 = 3;

/// Hands `held`'s persona everything in its crypto inbox; returns the room keys that
/// arrived, as `(room, session id)`, and the verification requests to cancel once the
/// persona's crypto is let go (`verify::send`).
///
/// A row the machine fails on is counted; the machine is dropped (what it holds in memory
/// may be ahead of what was saved) and the failure returned, so the row is tried again on
/// a machine built afresh. After [`ATTEMPTS`] failures the row is taken apart (`apart`):
/// the piece that fails is set aside alone (logged, counted), the rest of the row and the
/// rows behind it flow: one message nobody can store must not stop the persona reading
/// and writing in every encrypted room, nor cost it the room keys sent beside it.
pub async fn settle(
    held: &Held<'_>,
    dev: Device<'_>,
    store: &crate::store::Store,
    counters: &Counters,
) -> Result<Settled, Error> {
    let persona = dev.user.as_str();
    let mut settled = Settled::default();
    loop {
        let rows = store.crypto_inbox(persona, BATCH).await?;
        let Some(last) = rows.last().map(|r| r.seq) else { break };
        for row in &rows {
            let pushed: Pushed = match serde_json::from_str(&row.body) {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(persona, seq = row.seq, error = %e, "a crypto inbox row is not readable; skipped");
                    continue;
                }
            };
            // A row that failed whole is taken apart, and only its failing piece set aside.
            let taken = if row.attempts >= ATTEMPTS {
                match take_apart(&pushed, |piece| Box::pin(receive(held, dev.device, piece))).await {
                    Apart::Taken(done) => Ok(done),
                    Apart::Failed(failed) => {
                        let Failed { settled: before, piece, rest, error } = *failed;
                        settled.0.extend(before.0);
                        settled.1.extend(before.1);
                        held.spoil();
                        held.fence().await?;
                        let (piece, rest) =
                            (serde_json::to_string(&piece)?, rest.map(|r| serde_json::to_string(&r)).transpose()?);
                        let why = error.to_string();
                        if store
                            .crypto_inbox_set_aside(persona, row.seq, &piece, rest.as_deref(), &why, now_ms())
                            .await?
                        {
                            tracing::warn!(
                                persona,
                                seq = row.seq,
                                error = why,
                                "a piece of a crypto inbox row kept failing; set aside"
                            );
                            counters.set_aside.fetch_add(1, Ordering::Relaxed);
                        }
                        return Err(error);
                    }
                }
            } else {
                Box::pin(receive(held, dev.device, pushed)).await
            };
            match taken {
                Ok((keys, asks)) => {
                    settled.0.extend(keys);
                    settled.1.extend(asks);
                }
                Err(e) => {
                    held.spoil();
                    // Not the row's fault when this instance lost the lease: the holder takes it.
                    held.fence().await?;
                    let attempts = store.crypto_inbox_failed(persona, row.seq).await?;
                    tracing::warn!(persona, seq = row.seq, attempts, error = %e, "a crypto inbox row failed; trying again");
                    return Err(e);
                }
            }
        }
        held.fence().await?;
        Box::pin(requests::flush(dev, &held.machine)).await?;
        store.crypto_inbox_done(persona, last).await?;
        if rows.len() < BATCH as usize {
            break;
        }
    }
    Ok(settled)
}

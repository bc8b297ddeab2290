//! Transactions the homeserver made but never sent.
//!
//! Synapse numbers an appservice's transactions one by one. At the end of its recovery
//! from an outage of the appservice (richbot restarting), it can store a transaction and
//! never send it while it takes the appservice for up again: one made between the
//! recoverer's last look for unsent transactions and its marking the appservice up
//! (Synapse 1.163; a CI run lost a question so, the transaction left in
//! `application_services_txns` with the appservice `up`). It sends such a transaction
//! only when a later send fails and starts a recoverer, which sends the oldest unsent
//! first.
//!
//! So when a transaction's number skips a few past the last one's, richbot stores its
//! events as usual and answers 503 once. Synapse's recoverer then sends the skipped ones,
//! oldest first, and this one again (a duplicate, answered 200). Only after a step of one
//! (the homeserver numbers one by one; other homeservers name transactions by hash or
//! time, which are not numbers in a row), and never twice for one transaction.
//!
//! The numbers seen are kept in the database (`appservice_txns`): the race comes right
//! after a restart, so the last number must outlive the process that saw it (kept in
//! memory, a question was lost to a restart in CI); and Synapse sends one transaction at a
//! time, each answered only once its number is stored, so instances sharing a database
//! see each other's.
//!
//! Synapse draws the numbers of *all* its appservices' transactions from one sequence
//! (`application_services_txn_id_seq`), so beside a bridge or another bot richbot's
//! numbers skip all the time, and each 503 held a member's answer for the recoverer's
//! back-off (2 s, then 4: the pipeline bench's `synapse` scenario, where a second
//! appservice shares the homeserver, answered in a median of 1,975 ms instead of 46). The
//! homeserver's answer to the 503 tells the two apart: after a real skip it sends the
//! skipped transactions first; when the numbers went to another appservice it sends the
//! same transaction again. Then the numbering is shared, and skips are not asked about
//! for a day (`SHARED_FOR`, kept in `meta` for every instance and restart): a removed
//! bridge gives the race its protection back by the next day, a bridge still there costs
//! one retry a day.

use std::sync::{Arc, Mutex};

use crate::store::{self, Store, TxnSeen};

/// The most transactions a skip may leave out and still be asked for (more is a
/// homeserver that numbers otherwise, or a numbering started over).
const MAX_SKIPPED: i64 = 100;

/// How long, after the homeserver showed that its numbering is shared with other
/// appservices, skips are taken for theirs and not asked about (ms).
const SHARED_FOR: i64 = 24 * 60 * 60 * 1000;

/// The `meta` key holding when the numbering was last seen shared (ms since the epoch).
const SHARED_AT: &str = "appservice_txn_numbers_shared_at";

/// A skip asked about: the numbers skipped, and the transaction answered 503 for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Asked {
    first: i64,
    last: i64,
    at: i64,
}

/// The transaction numbers seen, in the store, and the skip last asked about.
#[derive(Debug, Clone)]
pub struct Gaps {
    store: Store,
    asked: Arc<Mutex<Option<Asked>>>,
}

impl Gaps {
    pub fn new(store: Store) -> Self {
        Self { store, asked: Arc::default() }
    }

    /// Notes that transaction `txn_id` was stored; returns the numbers it skipped (first,
    /// last) when the homeserver should be asked to send them.
    pub async fn stored(&self, txn_id: &str, now: i64) -> Result<Option<(i64, i64)>, store::Error> {
        let Some(n) = txn_id.parse::<i64>().ok().filter(|n| *n >= 0) else { return Ok(None) };
        let seen = self.store.note_transaction(n, now).await?;
        if self.answered(n) == Some(Answer::Shared) {
            tracing::info!(
                txn_id,
                "the homeserver numbers other appservices' transactions in the same sequence; skips in richbot's \
                 are not asked about for a day"
            );
            self.store.set_meta(SHARED_AT, &now.to_string()).await?;
        }
        let Some((first, last)) = skipped(n, seen) else { return Ok(None) };
        let shared_at = self.store.meta(SHARED_AT).await?.and_then(|v| v.parse::<i64>().ok());
        if shared_at.is_some_and(|at| now.saturating_sub(at) < SHARED_FOR) {
            return Ok(None);
        }
        *self.lock() = Some(Asked { first, last, at: n });
        Ok(Some((first, last)))
    }

    /// What transaction `n` says of the skip asked about last, which it settles.
    fn answered(&self, n: i64) -> Option<Answer> {
        let asked = self.lock().take()?;
        if (asked.first..=asked.last).contains(&n) {
            Some(Answer::Skipped)
        } else if n == asked.at {
            Some(Answer::Shared)
        } else {
            None
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Asked>> {
        self.asked.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// How the homeserver answered a 503 for a skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// It sent a skipped transaction: it had made and not sent it.
    Skipped,
    /// It sent the same transaction again: the skipped numbers were other appservices'.
    Shared,
}

/// What transaction `n`, seen as `seen`, skipped, if the homeserver should be asked.
fn skipped(n: i64, seen: TxnSeen) -> Option<(i64, i64)> {
    // Seen before: asked about already (or it never skipped).
    let previous = seen.previous.filter(|_| seen.new && seen.previous_in_a_row)?;
    let gap = n - previous - 1;
    (1..=MAX_SKIPPED).contains(&gap).then_some((previous + 1, n - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn gaps() -> Gaps {
        Gaps::new(Store::open("sqlite::memory:").await.expect("store"))
    }

    async fn run(gaps: &Gaps, ids: &[i64]) -> Vec<Option<(i64, i64)>> {
        let mut out = Vec::new();
        for n in ids {
            out.push(gaps.stored(&n.to_string(), 0).await.expect("noted"));
        }
        out
    }

    async fn one(gaps: &Gaps, n: &str) -> Option<(i64, i64)> {
        gaps.stored(n, 0).await.expect("noted")
    }

    #[tokio::test]
    async fn a_skip_after_numbers_one_by_one_is_asked_for_once_then_the_numbers_go_on() {
        let gaps = gaps().await;
        // As after a restart in CI: 10 and 11 recovered, 12 left unsent, 13 sent.
        assert_eq!(run(&gaps, &[10, 11]).await, [None; 2]);
        assert_eq!(one(&gaps, "13").await, Some((12, 12)), "12 never came");
        // The recoverer sends 12, then 13 again; then on as before.
        assert_eq!(run(&gaps, &[12, 13, 14]).await, [None; 3]);
        assert_eq!(one(&gaps, "17").await, Some((15, 16)));
        // The recoverer sends them, then 17 again: a real skip, so skips are still asked.
        assert_eq!(run(&gaps, &[15, 16, 17, 18]).await, [None; 4]);
        assert_eq!(one(&gaps, "21").await, Some((19, 20)));
        assert_eq!(one(&gaps, "19").await, None);
        assert_eq!(one(&gaps, "23").await, None, "no step of one since 19");
        assert_eq!(one(&gaps, "24").await, None);
        assert_eq!(one(&gaps, "26").await, Some((25, 25)), "trusted again after a step of one");
    }

    #[tokio::test]
    async fn numbers_shared_with_another_appservice_show_in_the_retry_and_are_not_asked_about_for_a_day() {
        let gaps = gaps().await;
        assert_eq!(run(&gaps, &[10, 11]).await, [None; 2]);
        assert_eq!(one(&gaps, "13").await, Some((12, 12)));
        // The homeserver sends 13 again, not 12: 12 was another appservice's.
        assert_eq!(one(&gaps, "13").await, None);
        assert_eq!(run(&gaps, &[14, 15]).await, [None; 2]);
        assert_eq!(one(&gaps, "17").await, None, "a skip after a step of one, not asked");
        // Every instance and restart knows it (the fact is in the database).
        let after = Gaps::new(gaps.store.clone());
        assert_eq!(run(&after, &[18, 20]).await, [None; 2]);
        // A day later, skips are asked about again (the other appservice may be gone).
        assert_eq!(after.stored("21", SHARED_FOR).await.expect("noted"), None);
        assert_eq!(after.stored("23", SHARED_FOR).await.expect("noted"), Some((22, 22)));
    }

    #[tokio::test]
    async fn the_numbers_outlive_the_process_that_saw_them() {
        let gaps = gaps().await;
        assert_eq!(run(&gaps, &[40, 41]).await, [None; 2]);
        // A restart: a new Gaps on the same database sees the skip right away.
        let after = Gaps::new(gaps.store.clone());
        assert_eq!(one(&after, "43").await, Some((42, 42)));
    }

    #[tokio::test]
    async fn numbers_that_skip_anyway_or_are_not_numbers_are_never_asked_about() {
        let g = gaps().await;
        assert_eq!(run(&g, &[3, 10, 17, 40, 52]).await, [None; 5], "numbers that never step by one");
        let g = gaps().await;
        assert_eq!(run(&g, &[1, 2, 3, 4, 500]).await, [None; 5], "more skipped than a race loses");
        let g = gaps().await;
        assert_eq!(one(&g, "abc").await, None);
        assert_eq!(run(&g, &[1, 2, 3, 4]).await, [None; 4]);
        assert_eq!((one(&g, "x7").await, one(&g, "-6").await), (None, None));
        let g = gaps().await;
        let top = i64::MAX.to_string();
        assert_eq!((one(&g, &top).await, one(&g, &top).await, one(&g, "0").await), (None, None, None), "no overflow");
    }

    #[tokio::test]
    async fn a_retry_changes_nothing_and_a_numbering_started_over_is_followed() {
        let g = gaps().await;
        assert_eq!(run(&g, &[500, 501, 502, 503, 501]).await, [None; 5]);
        assert_eq!(one(&g, "505").await, Some((504, 504)), "the retry of 501 broke no run");
        let g = gaps().await;
        assert_eq!(run(&g, &[500, 501, 502, 503, 1, 2]).await, [None; 6]);
        assert_eq!(one(&g, "4").await, Some((3, 3)), "counted from 1 again");
    }
}
